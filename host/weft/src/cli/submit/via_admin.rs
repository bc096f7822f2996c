//! `weft submit --via-admin`: the Workflow goes to the admin API's
//! CreateExecution, so the admin API's authentication and authorization
//! (single sign-on, the cluster's RBAC) decide, not the kubeconfig's.

use anyhow::bail;
use kube::ResourceExt;

use crate::admin::pb;
use crate::api::{Workflow, WorkflowTemplate};
use crate::cli::cp::AdminClientArgs;

/// Creates `wf` in `ns` through the admin API; answers its name.
pub(super) async fn create(
    admin: &AdminClientArgs,
    ns: &str,
    wf: &Workflow,
    templates: &[WorkflowTemplate],
) -> anyhow::Result<String> {
    if let Some(t) = templates.first() {
        bail!(
            "--via-admin: the file also holds WorkflowTemplate {}; the admin API creates Workflows only (apply templates with kubectl or weft template)",
            t.name_any()
        );
    }
    let mut client = admin.connect().await?;
    let request = pb::CreateExecutionRequest {
        namespace: ns.to_string(),
        name: wf.metadata.name.clone().unwrap_or_default(),
        generate_name: match wf.metadata.name {
            Some(_) => String::new(),
            None => wf.metadata.generate_name.clone().unwrap_or_default(),
        },
        labels: wf.labels().clone().into_iter().collect(),
        spec: serde_json::to_string(&wf.spec.spec)?,
    };
    let created = client.create_execution(request).await.map_err(|s| {
        let hint = match s.code() {
            tonic::Code::Unauthenticated => format!(
                " (sign in with weft login --admin {}, or pass --token)",
                admin.admin_url
            ),
            _ => String::new(),
        };
        anyhow::anyhow!(
            "the admin API at {} refused: {}{hint}",
            admin.admin_url,
            s.message()
        )
    })?;
    let id = created.into_inner().id.unwrap_or_default();
    Ok(id.name)
}
