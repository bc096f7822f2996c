use super::*;

#[test]
fn a_header_secret_is_refused_for_a_pod_naming_it() {
    let secrets: Vec<SecretRef> = serde_json::from_value(json!([
        {"name": "db", "key": "password"},
        {"name": "api", "key": "token", "mountAs": "header", "header": {"name": "Authorization"}}
    ]))
    .unwrap();
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main"}]}});
    let e = mark(&mut pod, &secrets).unwrap_err();
    assert!(
        e.starts_with(
            "task.secrets[1] (api/token): mountAs: header is a request header of a web-API task"
        ),
        "{e}"
    );
    assert!(pod["metadata"]["labels"].is_null(), "nothing marked");
}

#[test]
fn a_marked_pod_gets_env_and_files_and_is_left_alone_after() {
    let secrets: Vec<SecretRef> = serde_json::from_value(json!([
        {"name": "db", "key": "password"},
        {"name": "db", "key": "ca.crt", "mountAs": "file"},
        {"name": "api", "key": "token", "mountAs": "file"}
    ]))
    .unwrap();
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}]}});
    mark(&mut pod, &secrets).unwrap();
    assert_eq!(pod["metadata"]["labels"][LABEL], "true");
    assert!(missing(&pod).unwrap().contains(CONFIGURATION));
    let ops: json_patch::Patch = serde_json::from_value(patch(&pod).unwrap().unwrap()).unwrap();
    json_patch::patch(&mut pod, &ops).unwrap();
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["env"][1]["name"], "WEFT_SECRET_DB_PASSWORD");
    assert_eq!(
        c["env"][1]["valueFrom"]["secretKeyRef"],
        json!({"name": "db", "key": "password"})
    );
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert_eq!(mounts, ["/etc/weft/secrets/api", "/etc/weft/secrets/db"]);
    assert_eq!(
        pod["spec"]["volumes"][1]["secret"]["items"],
        json!([{"key": "ca.crt", "path": "ca.crt"}])
    );
    assert!(missing(&pod).is_none());
    assert_eq!(patch(&pod).unwrap(), None, "injected once");
    let mut spark = json!({"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "spec": {}});
    assert!(
        mark(&mut spark, &secrets)
            .unwrap_err()
            .contains("SparkApplication")
    );
}
