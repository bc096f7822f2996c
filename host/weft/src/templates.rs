//! Template launches: the spec a Workflow that names a WorkflowTemplate
//! runs. Resolved once, on the workflow's first round, and stored in its
//! status with the template's version; every later round runs the stored
//! spec, so a template edited (or deleted) meanwhile changes nothing.

use std::sync::Arc;

use kube::{Api, Client, ResourceExt};
use weft_dag::{WorkflowSpec, WorkflowStatus, template};

use crate::api::{Workflow, WorkflowTemplate};

/// The spec this round runs, or why the Workflow cannot run (its
/// problems, one per line). Records the resolution in `status`.
pub async fn runnable(
    client: &Client,
    wf: &Workflow,
    status: &mut WorkflowStatus,
) -> Result<Arc<WorkflowSpec>, String> {
    let own = &wf.spec.spec;
    let ns = wf.namespace().unwrap_or_default();
    let Some(r) = &own.workflow_template_ref else {
        if status.started_at.is_none() {
            check_recursion(client, &ns, None, own).await?;
        }
        return Ok(Arc::new(own.clone()));
    };
    let first_round = status.started_at.is_none();
    if let Some(stored) = &status.resolved_spec {
        if stored.abort == own.abort {
            return Ok(stored.clone());
        }
        // The user may still abort it.
        let mut spec = WorkflowSpec::clone(stored);
        spec.abort = own.abort;
        return Ok(Arc::new(spec));
    }
    if !own.nodes.is_empty() {
        return Err("workflowTemplateRef: set nodes or workflowTemplateRef, not both".into());
    }
    let api: Api<WorkflowTemplate> = Api::namespaced(client.clone(), &ns);
    let found = api.get_opt(&r.name).await.map_err(|e| {
        format!(
            "workflowTemplateRef: cannot read WorkflowTemplate {:?}: {e}",
            r.name
        )
    })?;
    let Some(t) = found else {
        return Err(format!(
            "workflowTemplateRef: WorkflowTemplate {:?} not found in namespace {ns}",
            r.name
        ));
    };
    let spec = resolve(&t, own)?;
    if first_round {
        check_recursion(client, &ns, Some(&r.name), &spec).await?;
    }
    status.template = Some(template::TemplateRecord {
        name: t.name_any(),
        uid: t.uid(),
        resource_version: t.resource_version(),
        generation: t.metadata.generation,
    });
    let spec = weft_dag::status::shared::share(spec);
    status.resolved_spec = Some(spec.clone());
    Ok(spec)
}

/// The spec a Workflow not yet started will run, for admission checks
/// (the webhook, the admin API): resolved as its first round would, with
/// nothing recorded.
pub async fn spec_to_run(client: &Client, wf: &Workflow) -> Result<WorkflowSpec, String> {
    let spec = runnable(client, wf, &mut WorkflowStatus::default()).await?;
    Ok(Arc::unwrap_or_clone(spec))
}

/// `wf` launched from `t`, or every problem with the pair, one per line.
pub fn resolve(t: &WorkflowTemplate, wf: &WorkflowSpec) -> Result<WorkflowSpec, String> {
    let name = t.name_any();
    let mut problems = template::check(&name, &t.spec.spec);
    match template::resolve(&name, &t.spec.spec, wf) {
        Ok(spec) if problems.is_empty() => Ok(spec),
        Ok(_) => Err(weft_dag::compile::describe(&problems)),
        Err(p) => {
            problems.extend(p);
            Err(weft_dag::compile::describe(&problems))
        }
    }
}

/// The most templates one recursion check reads.
const MAX_TEMPLATES_READ: usize = 1000;

/// Refuses templates that launch themselves: following the templates
/// `spec`'s sub-workflow nodes launch (and theirs, and so on) must never
/// come back to one already on the way. `from` names the template `spec`
/// is (its name starts every path). A template not found ends its path:
/// the node that launches it fails when it runs.
pub async fn check_recursion(
    client: &Client,
    ns: &str,
    from: Option<&str>,
    spec: &WorkflowSpec,
) -> Result<(), String> {
    let api: Api<WorkflowTemplate> = Api::namespaced(client.clone(), ns);
    let start: Vec<String> = from.into_iter().map(str::to_string).collect();
    let mut stack: Vec<(Vec<String>, String, String)> = template::launched_templates(spec)
        .into_iter()
        .map(|(node, t)| (start.clone(), node, t))
        .collect();
    let mut read = std::collections::HashMap::new();
    while let Some((path, node, name)) = stack.pop() {
        if path.contains(&name) {
            let mut cycle = path.clone();
            cycle.push(name);
            return Err(format!(
                "node {}: workflow.templateRef: templates launch themselves: {}",
                node.split('/').next().unwrap_or_default(),
                cycle.join(" -> ")
            ));
        }
        if read.len() >= MAX_TEMPLATES_READ {
            break;
        }
        if !read.contains_key(&name) {
            let found = api
                .get_opt(&name)
                .await
                .map_err(|e| format!("cannot read WorkflowTemplate {name:?}: {e}"))?;
            read.insert(name.clone(), found.map(|t| t.spec.spec.workflow));
        }
        let Some(Some(inner)) = read.get(&name) else {
            continue;
        };
        let mut next = path.clone();
        next.push(name.clone());
        for (_, t) in template::launched_templates(inner) {
            stack.push((next.clone(), node.clone(), t));
        }
    }
    Ok(())
}
