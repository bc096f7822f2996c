//! What a request body must be before anything is stored: the kind and
//! apiVersion the URL serves, metadata and built-in rules, a custom
//! resource's schema (unknown fields pruned, apply bodies checked). Kept
//! apart from the verbs because create, update and patch all call it.

use serde_json::Value;

use super::{Cluster, WriteOpts, name_of};
use crate::admission;
use crate::meta;
use crate::quota;
use crate::registry::ResourceType;
use crate::schema::{self, FieldError, FieldValidation};
use crate::status::{ApiError, ApiResult};

impl Cluster {
    /// Checks a request body is the kind the URL serves and fills in what a
    /// client may leave out.
    pub(crate) fn check_kind(rt: &ResourceType, version: &str, obj: &mut Value) -> ApiResult<()> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was not a JSON object",
            ));
        }
        let want_av = rt.api_version(version);
        match obj["kind"].as_str() {
            None | Some("") => obj["kind"] = rt.kind.clone().into(),
            Some(k) if k == rt.kind => {}
            Some(k) => {
                return Err(ApiError::bad_request(format!(
                    "{k} in version \"{version}\" cannot be handled as a {}: the kind in the body ({k}) does not match the kind served at this URL ({})",
                    rt.kind, rt.kind
                )));
            }
        }
        match obj["apiVersion"].as_str() {
            None | Some("") => obj["apiVersion"] = want_av.into(),
            Some(av) if av == want_av => {}
            Some(av) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({want_av})"
                )));
            }
        }
        if !obj.get("metadata").is_none_or(Value::is_object) {
            return Err(ApiError::bad_request("metadata must be an object"));
        }
        Ok(())
    }

    /// Validates an object about to be stored; a custom resource is first
    /// defaulted from its CRD schema, then validated against it (with `old`
    /// for ratcheting and transition rules).
    pub(super) fn validate(
        &self,
        rt: &ResourceType,
        version: &str,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> ApiResult<()> {
        let errs = Self::object_errors(rt, obj);
        if rt.builtin && errs.is_empty() {
            return Ok(());
        }
        if rt.builtin {
            return Err(ApiError::invalid(&rt.kind, name_of(obj), errs));
        }
        let mut all: Vec<FieldError> = errs
            .into_iter()
            .map(|(f, m)| FieldError::from_message(&f, m))
            .collect();
        if let Some(s) = rt.schema(version) {
            all.extend(schema::default_and_validate(s, obj, old));
        }
        if all.is_empty() {
            return Ok(());
        }
        let kind = format!("{}.{}", rt.kind, rt.group);
        let details = format!("{}/{}", rt.group, rt.kind);
        Err(ApiError::invalid_fields(
            &kind,
            &details,
            name_of(obj),
            &all,
        ))
    }

    /// Metadata and built-in rules, as (field, message).
    fn object_errors(rt: &ResourceType, obj: &Value) -> Vec<(String, String)> {
        let name = name_of(obj);
        let mut errs = Vec::new();
        let is_ns = rt.group.is_empty() && rt.plural == "namespaces";
        if let Some(msg) = meta::validate_name(name, is_ns) {
            errs.push(("metadata.name".to_string(), msg));
        }
        errs.extend(meta::validate_metadata(obj));
        errs.extend(admission::configuration_errors(rt, obj));
        if rt.group.is_empty() && rt.plural == "resourcequotas" {
            errs.extend(quota::spec_errors(obj));
        }
        if rt.group.is_empty() && rt.plural == "pods" {
            match obj["spec"]["containers"].as_array() {
                Some(cs) if !cs.is_empty() => {
                    for (i, c) in cs.iter().enumerate() {
                        if c["name"].as_str().unwrap_or("").is_empty() {
                            errs.push((
                                format!("spec.containers[{i}].name"),
                                "Required value".into(),
                            ));
                        }
                        if c["image"].as_str().unwrap_or("").is_empty() {
                            errs.push((
                                format!("spec.containers[{i}].image"),
                                "Required value".into(),
                            ));
                        }
                    }
                }
                _ => errs.push(("spec.containers".into(), "Required value".into())),
            }
        }
        if rt.group == "apiextensions.k8s.io"
            && let Err(e) = ResourceType::from_crd(obj)
        {
            errs.extend(e);
        }
        errs
    }

    /// What kube-apiserver's decoder does to a custom resource's body (or
    /// patched object): fields its schema does not declare are dropped,
    /// and reported as `Warning`s, refused (400 `strict decoding error`) or
    /// ignored as `?fieldValidation=` says.
    pub(super) fn prune_unknown(
        rt: &ResourceType,
        version: &str,
        obj: &mut Value,
        opts: &WriteOpts,
        patched: bool,
    ) -> ApiResult<()> {
        let Some(s) = rt.schema(version) else {
            return Ok(());
        };
        let pruned = schema::prune_object(obj, s);
        if pruned.is_empty() {
            return Ok(());
        }
        let unknown: Vec<String> = pruned
            .iter()
            .map(|p| format!("unknown field \"{p}\""))
            .collect();
        match opts.field_validation {
            FieldValidation::Strict => {
                let why = format!("strict decoding error: {}", unknown.join(", "));
                let k = &rt.kind;
                if patched {
                    return Err(ApiError::bad_request(why));
                }
                Err(ApiError::bad_request(format!(
                    "{k} in version \"{version}\" cannot be handled as a {k}: {why}"
                )))
            }
            FieldValidation::Warn => {
                let mut w = opts.warnings.lock().unwrap_or_else(|e| e.into_inner());
                w.extend(unknown);
                Ok(())
            }
            FieldValidation::Ignore => Ok(()),
        }
    }

    /// Server-side apply converts its body to a typed object, which fails
    /// on a field the schema lacks whatever `fieldValidation` says; the
    /// real server answers 500 without a reason.
    pub(super) fn check_apply(rt: &ResourceType, version: &str, applied: &Value) -> ApiResult<()> {
        let Some(s) = rt.schema(version) else {
            return Ok(());
        };
        let unknown = schema::apply_unknown_fields(applied, s);
        if unknown.is_empty() {
            return Ok(());
        }
        let errs: Vec<String> = unknown
            .iter()
            .map(|p| format!("{p}: field not declared in schema"))
            .collect();
        let errs = match errs.len() {
            1 => errs[0].clone(),
            _ => format!("errors:\n  {}", errs.join("\n  ")),
        };
        let m = &applied["metadata"];
        let (ns, name) = (m["namespace"].as_str().unwrap_or(""), name_of(applied));
        Err(ApiError::unclassified(format!(
            "failed to create typed patch object ({ns}/{name}; {}, Kind={}): {errs}",
            rt.api_version(version),
            rt.kind
        )))
    }
}
