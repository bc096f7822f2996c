//! The AdminService handlers: Workflow resources through kube-rs, each call
//! behind the middleware chain and the namespace authorization.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use kube::Client;
use tonic::{Request, Response, Status};

use super::DataProxyConfig;
use super::authz::{Authorization, Authorizer};
use super::chain::{Caller, Chain};
use super::console;
use super::pb;
pub use super::view::execution;
use crate::actions::Action;
use crate::metrics::Metrics;
use crate::pod_io::PodIo;

/// The annotation naming the principal that created a Workflow through the API.
pub const CREATED_BY: &str = "weft.dev/created-by";

mod calls;
mod history;
mod namespaces;
mod proxy;

/// The admin service.
pub struct AdminService {
    client: Client,
    registry: Arc<weft_plugin::Registry>,
    chain: Chain,
    authorizer: Authorizer,
    metrics: Arc<Metrics>,
    /// The data plane whose store the data proxy signs URLs of.
    artifacts: Option<Arc<PodIo>>,
    data_proxy: DataProxyConfig,
    /// Archived executions (`None`: no history database).
    history: Option<Arc<crate::history::History>>,
}

impl AdminService {
    /// A service over `client`, validating specs against `registry`'s task types.
    pub fn new(
        client: Client,
        registry: Arc<weft_plugin::Registry>,
        chain: Chain,
        authorization: Option<Authorization>,
        metrics: Arc<Metrics>,
    ) -> Self {
        AdminService {
            authorizer: Authorizer::new(authorization, client.clone()),
            client,
            registry,
            chain,
            metrics,
            artifacts: None,
            data_proxy: DataProxyConfig::default(),
            history: None,
        }
    }

    /// The data proxy's calls sign URLs of `artifacts`' store, within
    /// `limits`; without a store they answer FAILED_PRECONDITION.
    pub fn with_data_proxy(
        mut self,
        artifacts: Option<Arc<PodIo>>,
        limits: DataProxyConfig,
    ) -> Self {
        self.artifacts = artifacts;
        self.data_proxy = limits;
        self
    }

    /// ListExecutions and GetExecution read archived runs from `history`.
    pub fn with_history(mut self, history: Option<Arc<crate::history::History>>) -> Self {
        self.history = history;
        self
    }

    /// Whether `caller` may make its call in `namespace` (`None`: across
    /// all namespaces).
    async fn authorize(&self, caller: &Caller, namespace: Option<&str>) -> Result<(), Status> {
        self.authorizer.check(caller, namespace).await
    }
}

/// The stream WatchExecution answers with.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::Execution, Status>> + Send>>;

/// The full method path middleware see, e.g. `/weft.admin.v1.AdminService/GetExecution`.
macro_rules! method {
    ($name:literal) => {
        concat!("/weft.admin.v1.AdminService/", $name)
    };
}

#[tonic::async_trait]
impl pb::admin_service_server::AdminService for AdminService {
    async fn create_execution(
        &self,
        request: Request<pb::CreateExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(method!("CreateExecution"), request, |c, r| {
                self.create(c, r)
            })
            .await
    }

    async fn get_execution(
        &self,
        request: Request<pb::GetExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(method!("GetExecution"), request, |c, r| self.get(c, r))
            .await
    }

    async fn delete_archived_execution(
        &self,
        request: Request<pb::DeleteArchivedExecutionRequest>,
    ) -> Result<Response<pb::DeleteArchivedExecutionResponse>, Status> {
        self.chain
            .call(method!("DeleteArchivedExecution"), request, |c, r| {
                self.delete_archived(c, r)
            })
            .await
    }

    async fn resubmit_archived(
        &self,
        request: Request<pb::ResubmitArchivedRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(method!("ResubmitArchived"), request, |c, r| {
                self.resubmit_archived(c, r)
            })
            .await
    }

    async fn list_executions(
        &self,
        request: Request<pb::ListExecutionsRequest>,
    ) -> Result<Response<pb::ListExecutionsResponse>, Status> {
        self.chain
            .call(method!("ListExecutions"), request, |c, r| async move {
                if history::wants_history(&r) {
                    self.list_history(c, r).await
                } else {
                    self.list(c, r).await
                }
            })
            .await
    }

    async fn abort_execution(
        &self,
        request: Request<pb::AbortExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(method!("AbortExecution"), request, |c, r| self.abort(c, r))
            .await
    }

    type WatchExecutionStream = WatchStream;

    async fn watch_execution(
        &self,
        request: Request<pb::WatchExecutionRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        self.chain
            .call(method!("WatchExecution"), request, |c, r| self.watch(c, r))
            .await
    }

    async fn approve_gate(
        &self,
        request: Request<pb::ApproveGateRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("ApproveGate"),
                request,
                |c, r: pb::ApproveGateRequest| {
                    self.action(c, r.id, Action::Approve { node: r.node_id })
                },
            )
            .await
    }

    async fn reject_gate(
        &self,
        request: Request<pb::RejectGateRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("RejectGate"),
                request,
                |c, r: pb::RejectGateRequest| {
                    let reject = Action::Reject {
                        node: r.node_id,
                        reason: r.reason,
                    };
                    self.action(c, r.id, reject)
                },
            )
            .await
    }

    async fn get_node(
        &self,
        request: Request<pb::GetNodeRequest>,
    ) -> Result<Response<pb::NodeDetails>, Status> {
        self.chain
            .call(
                method!("GetNode"),
                request,
                |c, r: pb::GetNodeRequest| async move {
                    let (wf, _) = self.fetch_any(&c, r.id).await?;
                    console::node_details(&self.client, &wf, &r.node_id).await
                },
            )
            .await
    }

    type StreamNodeLogsStream = console::LogStream;

    async fn stream_node_logs(
        &self,
        request: Request<pb::StreamNodeLogsRequest>,
    ) -> Result<Response<console::LogStream>, Status> {
        self.chain
            .call(
                method!("StreamNodeLogs"),
                request,
                |c, r: pb::StreamNodeLogsRequest| async move {
                    let (wf, _) = self.fetch_any(&c, r.id.clone()).await?;
                    let store = self.artifacts.as_deref().map(|io| io.store());
                    console::node_logs(&self.client, &wf, &r, store).await
                },
            )
            .await
    }

    async fn list_plugins(
        &self,
        request: Request<pb::ListPluginsRequest>,
    ) -> Result<Response<pb::ListPluginsResponse>, Status> {
        self.chain
            .call(method!("ListPlugins"), request, |c, _r| async move {
                self.authorize(&c, None).await?;
                Ok(console::plugins(&self.client, &self.registry, &self.metrics).await)
            })
            .await
    }

    async fn list_locks(
        &self,
        request: Request<pb::ListLocksRequest>,
    ) -> Result<Response<pb::ListLocksResponse>, Status> {
        self.chain
            .call(method!("ListLocks"), request, |c, r| async move {
                self.authorize(&c, Some(&r.namespace)).await?;
                console::locks(&self.client, &r.namespace).await
            })
            .await
    }

    async fn list_namespaces(
        &self,
        request: Request<pb::ListNamespacesRequest>,
    ) -> Result<Response<pb::ListNamespacesResponse>, Status> {
        self.chain
            .call(method!("ListNamespaces"), request, |c, _| {
                self.namespaces(c)
            })
            .await
    }

    async fn create_upload_location(
        &self,
        request: Request<pb::CreateUploadLocationRequest>,
    ) -> Result<Response<pb::CreateUploadLocationResponse>, Status> {
        self.chain
            .call(method!("CreateUploadLocation"), request, |c, r| {
                self.upload_location(c, r)
            })
            .await
    }

    async fn create_download_link(
        &self,
        request: Request<pb::CreateDownloadLinkRequest>,
    ) -> Result<Response<pb::CreateDownloadLinkResponse>, Status> {
        self.chain
            .call(method!("CreateDownloadLink"), request, |c, r| {
                self.download_link(c, r)
            })
            .await
    }

    async fn retry_execution(
        &self,
        request: Request<pb::RetryExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("RetryExecution"),
                request,
                |c, r: pb::RetryExecutionRequest| {
                    let node = Some(r.node_id).filter(|n| !n.is_empty());
                    self.action(c, r.id, Action::Retry { node })
                },
            )
            .await
    }

    async fn resubmit_execution(
        &self,
        request: Request<pb::ResubmitExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("ResubmitExecution"),
                request,
                |c, r: pb::ResubmitExecutionRequest| {
                    self.action(
                        c,
                        r.id,
                        Action::Resubmit {
                            memoized: r.memoized,
                        },
                    )
                },
            )
            .await
    }

    async fn suspend_execution(
        &self,
        request: Request<pb::ExecutionActionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("SuspendExecution"),
                request,
                |c, r: pb::ExecutionActionRequest| self.action(c, r.id, Action::Suspend),
            )
            .await
    }

    async fn resume_execution(
        &self,
        request: Request<pb::ExecutionActionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("ResumeExecution"),
                request,
                |c, r: pb::ExecutionActionRequest| self.action(c, r.id, Action::Resume),
            )
            .await
    }

    async fn stop_execution(
        &self,
        request: Request<pb::ExecutionActionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("StopExecution"),
                request,
                |c, r: pb::ExecutionActionRequest| self.action(c, r.id, Action::Stop),
            )
            .await
    }

    async fn terminate_execution(
        &self,
        request: Request<pb::ExecutionActionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("TerminateExecution"),
                request,
                |c, r: pb::ExecutionActionRequest| self.action(c, r.id, Action::Terminate),
            )
            .await
    }
}

#[cfg(test)]
mod tests;
