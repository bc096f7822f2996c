//! Dynamic admission, as kube-apiserver runs it: every write a client sends
//! (create, update, patch, apply, delete) is offered to the webhooks of the
//! `MutatingWebhookConfiguration`s first, whose JSON patches are applied in
//! order, and then, once the object is defaulted and valid, to those of the
//! `ValidatingWebhookConfiguration`s, any of which may refuse it. A webhook
//! is called when one of its `rules` names the operation and resource and
//! its `namespaceSelector` and `objectSelector` match; a call that fails
//! refuses the request under `failurePolicy: Fail` (the default) and is
//! logged and skipped under `Ignore`. Requests and answers are
//! AdmissionReview v1.
//!
//! The cluster's own writes (the runner, the garbage collector, Events it
//! records) are not admitted, and neither are webhook configurations
//! themselves, as on a real server.

mod client;

use std::time::Duration;

use serde_json::{Value, json};

// A real mutual recursion, kept at folder level (issue 40): the API's
// write path (the verb files under `api/`) calls admission, and admission
// reads the cluster it is part of (the webhook configurations, the
// namespace's labels for `namespaceSelector`) through the same `Cluster`,
// as kube-apiserver's admission reads through its informers. Between files
// there is no loop: admission imports only `api/mod.rs` (the `Cluster`
// type and write options), which imports nothing of admission.
use crate::api::{Cluster, WriteOpts};
use crate::registry::ResourceType;
use crate::selector::LabelSelector;
use crate::status::ApiError;

const GROUP: &str = "admissionregistration.k8s.io";

/// What a request does, in AdmissionReview's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

/// One request as webhooks see it.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) op: Operation,
    pub(crate) rt: &'a ResourceType,
    pub(crate) version: &'a str,
    pub(crate) status: bool,
    pub(crate) ns: &'a str,
    pub(crate) opts: &'a WriteOpts,
}

/// The webhooks of every configuration, by kind.
pub(crate) struct Hooks {
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
}

/// One webhook of a configuration.
struct Hook {
    name: String,
    client_config: Value,
    rules: Vec<Value>,
    fail_closed: bool,
    namespace_selector: Value,
    object_selector: Value,
    timeout: Duration,
}

impl Request<'_> {
    fn resource(&self) -> String {
        match self.status {
            true => format!("{}/status", self.rt.plural),
            false => self.rt.plural.clone(),
        }
    }

    /// The webhooks this request may call, read from the store once; none
    /// when no rule names its resource and operation (then the write takes
    /// the short path, with no extra dry run).
    pub(crate) fn hooks(&self, cx: &Cluster) -> Option<Hooks> {
        if self.rt.group == GROUP {
            return None;
        }
        let hooks = Hooks {
            mutating: load(cx, true),
            validating: load(cx, false),
        };
        // A patch may be an apply that creates: CREATE rules count too.
        let create = Request {
            op: Operation::Create,
            ..*self
        };
        let wanted = (hooks.mutating.iter()).chain(&hooks.validating).any(|h| {
            self.rule_matches(h) || (self.op == Operation::Update && create.rule_matches(h))
        });
        wanted.then_some(hooks)
    }

    fn rule_matches(&self, hook: &Hook) -> bool {
        let resource = self.resource();
        let any = |list: &Value, want: &str| {
            list.as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|x| x == "*" || x == want)
        };
        hook.rules.iter().any(|rule| {
            let scope = rule["scope"].as_str().unwrap_or("*");
            let scoped = match scope {
                "Namespaced" => self.rt.namespaced,
                "Cluster" => !self.rt.namespaced,
                _ => true,
            };
            scoped
                && any(&rule["apiGroups"], &self.rt.group)
                && any(&rule["apiVersions"], self.version)
                && any(&rule["operations"], self.op.as_str())
                && rule["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .any(|r| resource_matches(r, &resource))
        })
    }

    /// Rules, then the namespace's and the object's labels.
    fn calls(&self, cx: &Cluster, hook: &Hook, obj: Option<&Value>, old: Option<&Value>) -> bool {
        if !self.rule_matches(hook) {
            return false;
        }
        let selector = |v: &Value| LabelSelector::from_json(v).unwrap_or_default();
        let ns_sel = selector(&hook.namespace_selector);
        let ns_ok = if !ns_sel.is_empty() && self.rt.namespaced {
            let ns = cx.store.get("/namespaces", "", self.ns);
            ns.is_some_and(|ns| ns_sel.matches(&ns))
        } else if !ns_sel.is_empty() && self.rt.group.is_empty() && self.rt.plural == "namespaces" {
            obj.or(old).is_some_and(|o| ns_sel.matches(o))
        } else {
            true
        };
        let obj_sel = selector(&hook.object_selector);
        let obj_ok = obj_sel.is_empty()
            || obj.is_some_and(|o| obj_sel.matches(o))
            || old.is_some_and(|o| obj_sel.matches(o));
        ns_ok && obj_ok
    }

    /// The AdmissionReview v1 sent for `obj` (and `old`).
    fn review(&self, uid: &str, obj: Option<&Value>, old: Option<&Value>) -> Value {
        let name = obj
            .or(old)
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or("");
        let kind = json!({"group": self.rt.group, "version": self.version, "kind": self.rt.kind});
        let resource =
            json!({"group": self.rt.group, "version": self.version, "resource": self.rt.plural});
        let (username, groups) = match &self.opts.user {
            Some(u) => (u.name.clone(), u.groups.clone()),
            None => (String::new(), Vec::new()),
        };
        let mut request = json!({
            "uid": uid,
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": name,
            "operation": self.op.as_str(),
            "userInfo": {"username": username, "groups": groups},
            "object": obj,
            "oldObject": old,
            "dryRun": self.opts.dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": self.op.options_kind()},
        });
        if self.rt.namespaced {
            request["namespace"] = self.ns.into();
        }
        if self.status {
            request["subResource"] = "status".into();
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    }

    /// Calls one webhook: `Ok(None)` when a failed call is ignored.
    async fn call(
        &self,
        cx: &Cluster,
        hook: &Hook,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Option<Value>, ApiError> {
        let uid = uuid::Uuid::new_v4().to_string();
        let review = self.review(&uid, obj, old);
        let ca = hook.client_config["caBundle"].as_str().unwrap_or("");
        let answer =
            match client::Endpoint::resolve(&cx.store, &hook.client_config, hook.timeout) {
                Ok(ep) => client::post(&ep, ca, &review, hook.timeout).await,
                Err(e) => Err(e),
            }
            .and_then(|a| {
                let resp = a["response"].clone();
                match resp["uid"].as_str() {
                    Some(u) if u == uid => Ok(resp),
                    got => Err(format!("expected response.uid=\"{uid}\", got {got:?}")),
                }
            });
        match answer {
            Ok(resp) => {
                self.keep_warnings(&resp);
                if resp["allowed"].as_bool() != Some(true) {
                    return Err(denied(&hook.name, &resp["status"]));
                }
                Ok(Some(resp))
            }
            Err(e) if hook.fail_closed => Err(ApiError::internal(format!(
                "failed calling webhook \"{}\": failed to call webhook: {e}",
                hook.name
            ))),
            Err(e) => {
                tracing::warn!(webhook = %hook.name, error = %e, "failed calling webhook, failing open (failurePolicy: Ignore)");
                Ok(None)
            }
        }
    }

    fn keep_warnings(&self, resp: &Value) {
        let mut w = self.opts.warnings.lock().unwrap_or_else(|e| e.into_inner());
        w.extend(
            resp["warnings"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from),
        );
    }

    /// Runs the mutating webhooks on `obj`, applying each one's patch before
    /// the next is called.
    pub(crate) async fn mutate(
        &self,
        cx: &Cluster,
        hooks: &Hooks,
        mut obj: Value,
        old: Option<&Value>,
    ) -> Result<Value, ApiError> {
        for hook in &hooks.mutating {
            if !self.calls(cx, hook, Some(&obj), old) {
                continue;
            }
            let Some(resp) = self.call(cx, hook, Some(&obj), old).await? else {
                continue;
            };
            if !resp["patch"].is_null() {
                apply_patch(&hook.name, &resp, &resp["patch"], &mut obj)?;
            }
        }
        Ok(obj)
    }

    /// Runs the validating webhooks; the first refusal refuses the request.
    pub(crate) async fn validate(
        &self,
        cx: &Cluster,
        hooks: &Hooks,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        for hook in &hooks.validating {
            if self.calls(cx, hook, obj, old) {
                self.call(cx, hook, obj, old).await?;
            }
        }
        Ok(())
    }
}

/// `*` is every resource, `*/*` every resource and subresource, `*/status`
/// every status subresource.
fn resource_matches(rule: &str, resource: &str) -> bool {
    let (r, sub) = resource.split_once('/').unwrap_or((resource, ""));
    match rule.split_once('/') {
        None => sub.is_empty() && (rule == "*" || rule == r),
        Some((rr, rs)) => (rr == "*" || rr == r) && (rs == "*" || rs == sub),
    }
}

/// kube-apiserver's wording of a refusal: the webhook's message after
/// `admission webhook "NAME" denied the request`, with its code (400 at
/// least) and reason.
fn denied(name: &str, status: &Value) -> ApiError {
    let by = format!("admission webhook \"{name}\" denied the request");
    let message = match (status["message"].as_str(), status["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("{by}: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("{by}: {r}"),
        _ => format!("{by} without explanation"),
    };
    let code = status["code"].as_u64().unwrap_or(0).max(400) as u16;
    ApiError {
        code,
        reason: known_reason(status["reason"].as_str().unwrap_or("")),
        message,
        details: json!({}),
    }
}

/// A webhook's `status.reason`, when it is one of the API's reasons.
fn known_reason(r: &str) -> &'static str {
    [
        "BadRequest",
        "Forbidden",
        "Invalid",
        "Conflict",
        "NotFound",
        "AlreadyExists",
        "Unauthorized",
        "TooManyRequests",
        "InternalError",
    ]
    .into_iter()
    .find(|k| *k == r)
    .unwrap_or("")
}

/// Applies a webhook's patch: bytes, which JSON carries as a base64
/// string or (as Go decodes a `[]byte` from either, and kube-rs sends) a
/// list of numbers.
fn apply_patch(name: &str, resp: &Value, patch: &Value, obj: &mut Value) -> Result<(), ApiError> {
    use base64::Engine as _;
    if resp["patchType"].as_str() != Some("JSONPatch") {
        return Err(ApiError::internal(format!(
            "webhook \"{name}\": unsupported patchType {:?} (only JSONPatch)",
            resp["patchType"]
        )));
    }
    let bytes = match patch {
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| format!("patch is not base64: {e}")),
        Value::Array(a) => a
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| "patch is not a list of bytes".to_string()),
        _ => Err("patch is neither base64 nor bytes".to_string()),
    }
    .map_err(|e| ApiError::internal(format!("webhook \"{name}\": {e}")))?;
    let ops: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::internal(format!(
            "webhook \"{name}\": patch is not a JSON patch: {e}"
        ))
    })?;
    json_patch::patch(obj, &ops).map_err(|e| {
        ApiError::internal(format!(
            "webhook \"{name}\": its JSON patch does not apply: {e}"
        ))
    })
}

/// The webhooks of every configuration of one kind, configurations in
/// name order and webhooks in their order, as kube-apiserver calls them.
fn load(cx: &Cluster, mutating: bool) -> Vec<Hook> {
    let plural = match mutating {
        true => "mutatingwebhookconfigurations",
        false => "validatingwebhookconfigurations",
    };
    let (mut configs, _) = cx.store.list(&format!("{GROUP}/{plural}"), None);
    configs.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    configs
        .iter()
        .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
        .map(|w| Hook {
            name: w["name"].as_str().unwrap_or("").to_string(),
            client_config: w["clientConfig"].clone(),
            rules: w["rules"].as_array().cloned().unwrap_or_default(),
            fail_closed: w["failurePolicy"].as_str() != Some("Ignore"),
            namespace_selector: w["namespaceSelector"].clone(),
            object_selector: w["objectSelector"].clone(),
            timeout: Duration::from_secs(w["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30)),
        })
        .collect()
}

/// What kube-apiserver refuses in a webhook configuration, as
/// (field, message): each webhook needs a qualified name, exactly one of
/// `url` and `service`, an https `url`, `sideEffects` of `None` or
/// `NoneOnDryRun`, and `admissionReviewVersions` with `v1`.
pub(crate) fn configuration_errors(rt: &ResourceType, obj: &Value) -> Vec<(String, String)> {
    if rt.group != GROUP {
        return Vec::new();
    }
    let mut errs = Vec::new();
    for (i, w) in obj["webhooks"].as_array().into_iter().flatten().enumerate() {
        let at = |f: &str| format!("webhooks[{i}].{f}");
        let name = w["name"].as_str().unwrap_or("");
        if name.split('.').filter(|p| !p.is_empty()).count() < 3 {
            errs.push((
                at("name"),
                format!("Invalid value: {name:?}: should be a domain with at least three segments separated by dots"),
            ));
        }
        let cc = &w["clientConfig"];
        match (cc["url"].as_str(), cc["service"].is_object()) {
            (Some(_), true) | (None, false) => errs.push((
                at("clientConfig"),
                "Required value: exactly one of url or service is required".into(),
            )),
            (Some(u), false) if !u.starts_with("https://") => errs.push((
                at("clientConfig.url"),
                format!("Unsupported value: {u:?}: 'https' is the only allowed URL scheme"),
            )),
            _ => {}
        }
        match w["sideEffects"].as_str() {
            Some("None" | "NoneOnDryRun") => {}
            Some(s) => errs.push((
                at("sideEffects"),
                format!("Unsupported value: {s:?}: supported values: \"None\", \"NoneOnDryRun\""),
            )),
            None => errs.push((at("sideEffects"), "Required value".into())),
        }
        let versions = &w["admissionReviewVersions"];
        if !versions
            .as_array()
            .is_some_and(|v| v.iter().any(|x| x == "v1"))
        {
            errs.push((
                at("admissionReviewVersions"),
                "Required value: must include at least one of v1".into(),
            ));
        }
        for (j, e) in [&w["namespaceSelector"], &w["objectSelector"]]
            .iter()
            .enumerate()
        {
            if let Err(why) = LabelSelector::from_json(e) {
                let f = ["namespaceSelector", "objectSelector"][j];
                errs.push((at(f), format!("Invalid value: {why}")));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_match_as_rules_say() {
        assert!(resource_matches("*", "pods"));
        assert!(!resource_matches("*", "pods/status"));
        assert!(resource_matches("*/*", "pods/status"));
        assert!(resource_matches("*/status", "pods/status"));
        assert!(resource_matches("pods", "pods"));
        assert!(!resource_matches("pods", "secrets"));
        assert!(resource_matches("pods/status", "pods/status"));
    }

    #[test]
    fn refusals_are_worded_as_kube_apiserver() {
        let e = denied(
            "v.weft.dev",
            &json!({"message": "no", "code": 403, "reason": "Forbidden"}),
        );
        assert_eq!(
            e.message,
            "admission webhook \"v.weft.dev\" denied the request: no"
        );
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        let e = denied("v.weft.dev", &Value::Null);
        assert_eq!(e.code, 400);
        assert!(e.message.ends_with("without explanation"));
    }
}
