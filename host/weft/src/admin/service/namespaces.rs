//! ListNamespaces: the namespaces the caller may list executions in, so
//! the console offers only those (Argo's UI asks the user to type one).
//!
//! The namespaces are read with the controller's own credentials; each is
//! then checked with the caller's authorization, as ListExecutions of that
//! namespace would be (the decisions are cached, see `authz::rbac`).

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use tonic::{Code, Status};

use crate::admin::chain::Caller;
use crate::admin::pb;
use crate::admin::request::kube_status;
use crate::admin::service::AdminService;

impl AdminService {
    pub(super) async fn namespaces(
        &self,
        caller: Caller,
    ) -> Result<pb::ListNamespacesResponse, Status> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let all = api
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| kube_status(e, "namespaces"))?;
        let mut namespaces = Vec::new();
        for ns in all.items.iter().map(|n| n.name_any()) {
            match self.authorize(&caller, Some(&ns)).await {
                Ok(()) => namespaces.push(ns),
                Err(s) if s.code() == Code::PermissionDenied => {}
                Err(s) => return Err(s),
            }
        }
        namespaces.sort();
        caller.decide(format!("may list executions in: {}", namespaces.join(", ")));
        Ok(pb::ListNamespacesResponse { namespaces })
    }
}
