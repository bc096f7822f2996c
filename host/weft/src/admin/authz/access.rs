//! What each admin API call does, in RBAC's terms: the verb, API group,
//! resource and subresource a SubjectAccessReview asks about, so that a
//! Role written for kubectl grants the same through the admin API.
//!
//! | call | RBAC |
//! |---|---|
//! | CreateExecution, ResubmitExecution, ResubmitArchived, CreateUploadLocation | `create workflows` |
//! | GetExecution, GetNode, CreateDownloadLink | `get workflows` |
//! | ListExecutions | `list workflows` |
//! | ListNamespaces | `list workflows`, asked per namespace: those allowed |
//! | WatchExecution | `watch workflows` |
//! | Abort, Retry, Suspend, Resume, Stop, Terminate | `update workflows` |
//! | ApproveGate, RejectGate | `update workflows/approval` |
//! | DeleteArchivedExecution | `delete workflows` |
//! | StreamNodeLogs | `get pods/log` (core group) |
//! | ListLocks | `list locks` |
//! | ListPlugins | `list plugins` (cluster-wide) |
//!
//! `workflows/approval` is not served by the API server; RBAC matches it
//! as written, so a Role can grant approvals apart from other updates.

/// One RBAC attribute set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access {
    /// The verb.
    pub verb: &'static str,
    /// The API group (`""`: core).
    pub group: &'static str,
    /// The resource.
    pub resource: &'static str,
    /// The subresource (`""`: none).
    pub subresource: &'static str,
}

const WEFT: &str = "weft.dev";

const fn workflows(verb: &'static str) -> Access {
    Access {
        verb,
        group: WEFT,
        resource: "workflows",
        subresource: "",
    }
}

impl Access {
    /// The access `method` (`/weft.admin.v1.AdminService/Name`) needs.
    /// An unknown method asks for `*`, which only a wildcard grants.
    pub fn of(method: &str) -> Access {
        let name = method.rsplit('/').next().unwrap_or(method);
        match name {
            "CreateExecution"
            | "ResubmitExecution"
            | "ResubmitArchived"
            | "CreateUploadLocation" => workflows("create"),
            "GetExecution" | "GetNode" | "CreateDownloadLink" => workflows("get"),
            "ListExecutions" | "ListNamespaces" => workflows("list"),
            "WatchExecution" => workflows("watch"),
            "AbortExecution" | "RetryExecution" | "SuspendExecution" | "ResumeExecution"
            | "StopExecution" | "TerminateExecution" => workflows("update"),
            "ApproveGate" | "RejectGate" => Access {
                subresource: "approval",
                ..workflows("update")
            },
            "DeleteArchivedExecution" => workflows("delete"),
            "StreamNodeLogs" => Access {
                verb: "get",
                group: "",
                resource: "pods",
                subresource: "log",
            },
            "ListLocks" => Access {
                resource: "locks",
                ..workflows("list")
            },
            "ListPlugins" => Access {
                resource: "plugins",
                ..workflows("list")
            },
            _ => Access {
                verb: "*",
                group: WEFT,
                resource: "*",
                subresource: "",
            },
        }
    }

    /// `workflows.weft.dev/approval`, `pods/log`: as a user reads it.
    pub fn resource_name(&self) -> String {
        let mut s = self.resource.to_string();
        if !self.group.is_empty() {
            s = format!("{s}.{}", self.group);
        }
        if !self.subresource.is_empty() {
            s = format!("{s}/{}", self.subresource);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_of_the_service_has_its_access() {
        let proto = include_str!("../../../proto/weft/admin/v1/admin.proto");
        for line in proto.lines().filter(|l| l.trim_start().starts_with("rpc ")) {
            let name = line.trim_start()["rpc ".len()..]
                .split('(')
                .next()
                .unwrap()
                .trim();
            let a = Access::of(&format!("/weft.admin.v1.AdminService/{name}"));
            assert_ne!(a.verb, "*", "{name} has no RBAC mapping");
        }
        assert_eq!(
            Access::of("/weft.admin.v1.AdminService/ApproveGate").resource_name(),
            "workflows.weft.dev/approval"
        );
        assert_eq!(
            Access::of("/weft.admin.v1.AdminService/StreamNodeLogs").resource_name(),
            "pods/log"
        );
    }
}
