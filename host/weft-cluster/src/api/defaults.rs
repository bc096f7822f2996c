//! What the real API server's strategies fill in on create (pods,
//! namespaces, secrets) and the status a CRD gets when it is accepted.
//! Separate from validation: this changes the object, validation only
//! judges it.

use serde_json::{Value, json};

use super::{Cluster, fold_string_data, meta_mut, name_of};
use crate::meta;
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult};

/// Finalizer the namespace controller owns (in `spec.finalizers`).
const NS_FINALIZER: &str = "kubernetes";

impl Cluster {
    /// What the real API server's strategies and defaulting fill in.
    pub(super) fn defaults_on_create(&self, rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
        match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "pods") => {
                let spec = &mut obj["spec"];
                for (k, v) in [
                    ("restartPolicy", json!("Always")),
                    ("terminationGracePeriodSeconds", json!(30)),
                    ("dnsPolicy", json!("ClusterFirst")),
                    ("schedulerName", json!("default-scheduler")),
                    ("serviceAccountName", json!("default")),
                    ("securityContext", json!({})),
                ] {
                    if spec.get(k).is_none_or(Value::is_null) {
                        spec[k] = v;
                    }
                }
                for list in ["initContainers", "containers"] {
                    for c in spec[list].as_array_mut().into_iter().flatten() {
                        let image = c["image"].as_str().unwrap_or("").to_string();
                        let pull = if image.ends_with(":latest") || !image.contains(':') {
                            "Always"
                        } else {
                            "IfNotPresent"
                        };
                        for (k, v) in [
                            ("terminationMessagePath", json!("/dev/termination-log")),
                            ("terminationMessagePolicy", json!("File")),
                            ("imagePullPolicy", json!(pull)),
                            ("resources", json!({})),
                        ] {
                            if c.get(k).is_none_or(Value::is_null) {
                                c[k] = v;
                            }
                        }
                    }
                }
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
            ("", "namespaces") => {
                obj["spec"] = json!({"finalizers": [NS_FINALIZER]});
                obj["status"] = json!({"phase": "Active"});
                let name = name_of(obj).to_string();
                let labels = meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
                labels["kubernetes.io/metadata.name"] = name.into();
            }
            // The quota controller owns the status, kube-apiserver's
            // strategy clears whatever a client sends.
            ("", "resourcequotas") => obj["status"] = json!({}),
            ("", "secrets") => {
                if obj["type"].as_str().unwrap_or("").is_empty() {
                    obj["type"] = "Opaque".into();
                }
                fold_string_data(obj);
            }
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                self.crd_status(obj)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Accepts a CRD: conditions, accepted names, stored versions. The
    /// served type itself is registered once the write is in.
    pub(super) fn crd_status(&self, obj: &mut Value) -> ApiResult<()> {
        let t = ResourceType::from_crd(obj)
            .map_err(|e| ApiError::invalid("CustomResourceDefinition", name_of(obj), e))?;
        if let Some(why) = self.registry.names_conflict(&t) {
            return Err(ApiError::invalid(
                "CustomResourceDefinition",
                name_of(obj),
                vec![(
                    "spec.names.kind".into(),
                    format!("Invalid value: \"{}\": {why}", t.kind),
                )],
            ));
        }
        let now = meta::now();
        let storage: Vec<Value> = obj["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["storage"].as_bool() == Some(true))
            .map(|v| v["name"].clone())
            .collect();
        let mut accepted = obj["spec"]["names"].clone();
        if accepted["singular"].is_null() {
            accepted["singular"] = t.singular.clone().into();
        }
        if accepted["listKind"].is_null() {
            accepted["listKind"] = t.list_kind.clone().into();
        }
        obj["status"] = json!({
            "acceptedNames": accepted,
            "storedVersions": storage,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        });
        Ok(())
    }
}
