//! A task's data plane on the executor's side: whether its pod's logs
//! are archived, the attempt its artifacts belong to, and the outputs
//! held to the plan once the plugin says the task succeeded
//! (`crate::pod_io` does the pod's side).

use serde_json::Value;
use weft_dag::schedule::{TaskObservation, TaskRequest, TaskState};

use super::PluginExecutor;
use crate::pod_io::{Attempt, IoProblem, PodIo};

impl PluginExecutor {
    /// Whether pods' logs are archived: the workflow's choice, else the
    /// controller's; never without a repository.
    pub(super) fn archives_logs(&self) -> bool {
        let io = self.io.as_ref().ok().and_then(Option::as_ref);
        io.is_some_and(|io| self.archive_logs.unwrap_or(io.archive_logs()))
    }

    pub(super) fn node_name(req: &TaskRequest<'_>) -> String {
        match req.item {
            Some(i) => format!("{}-{i}", req.node_id),
            None => req.node_id.to_string(),
        }
    }

    /// Runs `then` with the attempt's data plane, or says why there is none.
    pub(super) fn with_attempt<T>(
        &self,
        req: &TaskRequest<'_>,
        then: impl FnOnce(&PodIo, &Attempt<'_>) -> Result<T, IoProblem>,
    ) -> Result<T, IoProblem> {
        let io = match &self.io {
            Ok(Some(io)) => io,
            Ok(None) => return Err(IoProblem {
                reason: "NoArtifactRepository",
                message: "the task declares artifacts, and this controller has no artifact repository (--artifact-repository)".into(),
                system: false,
            }),
            Err(why) => return Err(IoProblem {
                reason: "ArtifactRepositoryInvalid",
                message: why.clone(),
                system: false,
            }),
        };
        let node = Self::node_name(req);
        let at = Attempt {
            namespace: &self.namespace,
            workflow: &self.workflow,
            uid: &self.uid,
            node: &node,
            attempt: req.attempt,
        };
        then(io, &at)
    }

    /// After the plugin's verdict: outputs held to the plan, and a
    /// store's fault counted as the platform's.
    pub(super) fn io_verdict(
        &self,
        req: &TaskRequest<'_>,
        observed: &Value,
        obs: &mut TaskObservation,
    ) {
        match obs.state {
            TaskState::Succeeded => {
                let outputs = obs.outputs.take();
                let resource = !crate::pod_io::is_pod(observed);
                let settled = self.with_attempt(req, |io, at| {
                    io.settle_outputs(at, req.task, outputs, resource)
                });
                match settled {
                    Ok((outputs, reference)) => {
                        (obs.outputs, obs.outputs_ref) = (outputs, reference)
                    }
                    Err(p) => {
                        *obs = TaskObservation::failed(p.system, p.system, p.reason, &p.message)
                    }
                }
            }
            TaskState::Failed { .. } if crate::pod_io::store_fault(observed) => {
                obs.state = TaskState::Failed {
                    retryable: true,
                    system: true,
                };
                obs.reason = Some("System:ArtifactStore".into());
            }
            _ => {}
        }
    }
}
