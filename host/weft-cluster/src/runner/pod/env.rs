//! What a container is given before it starts: its environment (`env`,
//! `envFrom`, the downward API, ConfigMap and Secret keys) and the files of
//! its `secret` and `configMap` volumes. Kept apart from process handling
//! because it only reads the API server.

use serde_json::Value;

use super::{PodRun, expand_vars};

impl PodRun {
    pub(super) async fn resolve_env(&self, spec: &Value) -> Result<Vec<(String, String)>, String> {
        let ns = self.ns();
        let mut env: Vec<(String, String)> = vec![
            (
                "PATH".into(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            ("HOME".into(), self.dir.display().to_string()),
            ("HOSTNAME".into(), self.name()),
            ("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()),
            ("KUBERNETES_SERVICE_PORT".into(), self.host.service_port()),
        ];
        let tm = spec["terminationMessagePath"]
            .as_str()
            .unwrap_or("/dev/termination-log");
        let _ = tm;
        env.push((
            "WEFT_TERMINATION_MESSAGE_PATH".into(),
            self.dir
                .join(format!(
                    "{}.termination-log",
                    spec["name"].as_str().unwrap_or("")
                ))
                .display()
                .to_string(),
        ));
        let set = |env: &mut Vec<(String, String)>, k: String, v: String| {
            env.retain(|(x, _)| *x != k);
            env.push((k, v));
        };
        for from in spec["envFrom"].as_array().into_iter().flatten() {
            let prefix = from["prefix"].as_str().unwrap_or("");
            for (kind, gr) in [("configMapRef", "/configmaps"), ("secretRef", "/secrets")] {
                let r = &from[kind];
                if !r.is_object() {
                    continue;
                }
                let name = r["name"].as_str().unwrap_or("");
                match self.host.get(gr, &ns, name).await {
                    Some(obj) => {
                        for (k, v) in obj["data"].as_object().into_iter().flatten() {
                            let v = decode(gr, v);
                            set(&mut env, format!("{prefix}{k}"), v);
                        }
                    }
                    None if r["optional"].as_bool() == Some(true) => {}
                    None => return Err(format!("{} \"{name}\" not found", &gr[1..gr.len() - 1])),
                }
            }
        }
        for e in spec["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap_or("").to_string();
            if let Some(v) = e["value"].as_str() {
                let v = expand_vars(v, &env);
                set(&mut env, name, v);
                continue;
            }
            let vf = &e["valueFrom"];
            if let Some(path) = vf["fieldRef"]["fieldPath"].as_str() {
                set(&mut env, name, field_ref(&self.pod, path));
            } else if vf["configMapKeyRef"].is_object() || vf["secretKeyRef"].is_object() {
                let (r, gr) = if vf["configMapKeyRef"].is_object() {
                    (&vf["configMapKeyRef"], "/configmaps")
                } else {
                    (&vf["secretKeyRef"], "/secrets")
                };
                let obj_name = r["name"].as_str().unwrap_or("");
                let key = r["key"].as_str().unwrap_or("");
                let optional = r["optional"].as_bool() == Some(true);
                let what = &gr[1..gr.len() - 1];
                match self.host.get(gr, &ns, obj_name).await {
                    Some(obj) => match obj["data"].get(key) {
                        Some(v) => set(&mut env, name, decode(gr, v)),
                        None if optional => {}
                        None => {
                            return Err(format!(
                                "couldn't find key {key} in {what} {ns}/{obj_name}"
                            ));
                        }
                    },
                    None if optional => {}
                    None => return Err(format!("{what} \"{obj_name}\" not found")),
                }
            } else if vf["resourceFieldRef"].is_object() {
                set(&mut env, name, "0".into());
            }
        }
        Ok(env)
    }

    /// Writes the keys of the `secret` and `configMap` volumes a container
    /// mounts into their per-pod directories, as the kubelet projects them
    /// (`items` pick and rename keys; a missing object or key fails the
    /// container unless `optional`).
    pub(super) async fn fill_volumes(&self, spec: &Value) -> Result<(), String> {
        let ns = self.ns();
        for m in spec["volumeMounts"].as_array().into_iter().flatten() {
            let name = m["name"].as_str().unwrap_or("");
            let Some(vol) = self.pod["spec"]["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["name"] == name)
            else {
                continue;
            };
            let (src, gr, obj_name) = if vol["secret"].is_object() {
                (
                    &vol["secret"],
                    "/secrets",
                    vol["secret"]["secretName"].as_str(),
                )
            } else if vol["configMap"].is_object() {
                (
                    &vol["configMap"],
                    "/configmaps",
                    vol["configMap"]["name"].as_str(),
                )
            } else {
                continue;
            };
            let obj_name = obj_name.unwrap_or("");
            let what = &gr[1..gr.len() - 1];
            let optional = src["optional"].as_bool() == Some(true);
            let Some(obj) = self.host.get(gr, &ns, obj_name).await else {
                if optional {
                    continue;
                }
                return Err(format!("{what} \"{obj_name}\" not found"));
            };
            let items: Vec<(String, String)> = match src["items"].as_array() {
                Some(items) => items
                    .iter()
                    .map(|i| {
                        let key = i["key"].as_str().unwrap_or("").to_string();
                        (key.clone(), i["path"].as_str().unwrap_or(&key).to_string())
                    })
                    .collect(),
                None => obj["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| (k.clone(), k.clone()))
                    .collect(),
            };
            let dir = self.dir.join("volumes").join(name);
            for (key, path) in items {
                let Some(v) = obj["data"].get(&key) else {
                    if optional {
                        continue;
                    }
                    return Err(format!("couldn't find key {key} in {what} {ns}/{obj_name}"));
                };
                let file = dir.join(&path);
                if path.split('/').any(|p| p == "..") {
                    return Err(format!(
                        "{what} {ns}/{obj_name}: item path {path:?} leaves the volume"
                    ));
                }
                if let Some(parent) = file.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                std::fs::write(&file, decode(gr, v))
                    .map_err(|e| format!("writing {what} volume {name}: {e}"))?;
            }
        }
        Ok(())
    }
}

fn decode(gr: &str, v: &Value) -> String {
    let s = v.as_str().unwrap_or("");
    if gr == "/secrets" {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default()
    } else {
        s.to_string()
    }
}

/// The downward API for env: `metadata.name`, `metadata.labels['k']`, ...
fn field_ref(pod: &Value, path: &str) -> String {
    let m = &pod["metadata"];
    let bracket = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?;
        let key = rest.strip_prefix("['")?.strip_suffix("']")?;
        Some(key.to_string())
    };
    if let Some(k) = bracket("metadata.labels") {
        return m["labels"][k].as_str().unwrap_or("").to_string();
    }
    if let Some(k) = bracket("metadata.annotations") {
        return m["annotations"][k].as_str().unwrap_or("").to_string();
    }
    match path {
        "status.podIP" | "status.hostIP" | "status.podIPs" | "status.hostIPs" => "127.0.0.1".into(),
        _ => {
            let mut cur = pod;
            for seg in path.split('.') {
                cur = &cur[seg];
            }
            match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            }
        }
    }
}
