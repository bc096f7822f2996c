//! Template launches: the spec a Workflow that names a WorkflowTemplate
//! runs. Resolved once, on the workflow's first round, and stored in its
//! status with the template's version; every later round runs the stored
//! spec, so a template edited (or deleted) meanwhile changes nothing.

use kube::{Api, Client, ResourceExt};
use weft_dag::{WorkflowSpec, WorkflowStatus, template};

use crate::api::{Workflow, WorkflowTemplate};

/// The spec this round runs, or why the Workflow cannot run (its
/// problems, one per line). Records the resolution in `status`.
pub async fn runnable(
    client: &Client,
    wf: &Workflow,
    status: &mut WorkflowStatus,
) -> Result<WorkflowSpec, String> {
    let own = &wf.spec.spec;
    let Some(r) = &own.workflow_template_ref else {
        return Ok(own.clone());
    };
    if let Some(stored) = &status.resolved_spec {
        // The user may still abort it.
        let mut spec = stored.clone();
        spec.abort = own.abort;
        return Ok(spec);
    }
    if !own.nodes.is_empty() {
        return Err("workflowTemplateRef: set nodes or workflowTemplateRef, not both".into());
    }
    let ns = wf.namespace().unwrap_or_default();
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
    status.template = Some(template::TemplateRecord {
        name: t.name_any(),
        uid: t.uid(),
        resource_version: t.resource_version(),
        generation: t.metadata.generation,
    });
    status.resolved_spec = Some(spec.clone());
    Ok(spec)
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
