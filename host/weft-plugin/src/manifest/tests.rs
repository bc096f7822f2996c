use super::*;

const POD: &str = r#"
name: pod
version: 0.1.0
world: k8s-task-plugin
taskTypes: [pod]
resources: [{apiVersion: v1, kind: Pod}]
limits: {deadline: 250ms, memory: 32Mi}
config: {imagePullGracePeriodSeconds: 300}
"#;

#[test]
fn guests_never_see_secret_references() {
    let text = POD.replace(
            "config: {imagePullGracePeriodSeconds: 300}",
            "config:\n  a: 1\n  token: {valueFrom: {secretKeyRef: {name: s, key: k}}}\n  jwt: {keys: [{valueFrom: {secretKeyRef: {name: s, key: j}}}, pem], leeway: 3}",
        );
    let m = Manifest::parse(&text, "test").unwrap();
    assert_eq!(
        serde_json::Value::Object(m.config_without_secret_refs()),
        serde_json::json!({"a": 1, "jwt": {"keys": ["pem"], "leeway": 3}})
    );
}

#[test]
fn parses_a_task_manifest() {
    let m = Manifest::parse(POD, "pod.yaml").unwrap();
    assert_eq!(m.name, "pod");
    assert_eq!(m.world, World::K8sTaskPlugin);
    assert_eq!(m.limits.deadline, Duration::from_millis(250));
    assert_eq!(m.limits.memory, 32 << 20);
    assert_eq!(m.limits.output, Limits::DEFAULT.output);
    assert!(m.allows("v1", "Pod"));
    assert!(!m.allows("batch/v1", "Job"));
    assert_eq!(m.config["imagePullGracePeriodSeconds"], 300);
}

fn err(text: &str) -> String {
    Manifest::parse(text, "m.yaml").unwrap_err().to_string()
}

#[test]
fn errors_name_the_origin_and_the_field() {
    let e = err(&POD.replace("name: pod", "name: Pod_1"));
    assert!(
        e.contains("m.yaml") && e.contains("name") && e.contains("Pod_1"),
        "{e}"
    );
    let e = err(&POD.replace("version: 0.1.0", "version: one"));
    assert!(e.contains("version"), "{e}");
    let e = err(&POD.replace("250ms", "soon"));
    assert!(e.contains("limits.deadline") && e.contains("soon"), "{e}");
    let e = err(&POD.replace("32Mi", "32 bananas"));
    assert!(e.contains("limits.memory"), "{e}");
    let e = err(&POD.replace("taskTypes: [pod]", "taskTypes: []"));
    assert!(e.contains("taskTypes"), "{e}");
    let e = err(&POD.replace("world: k8s-task-plugin", "world: spaceship"));
    assert!(e.contains("malformed") && e.contains("world"), "{e}");
    let e = err(&format!("{POD}\nsurprise: 1"));
    assert!(e.contains("surprise"), "{e}");
    let e = err(&POD.replace("config: {imagePullGracePeriodSeconds: 300}", "config: [1]"));
    assert!(e.contains("config") && e.contains("array"), "{e}");
    let e = err("{{{");
    assert!(e.contains("malformed"), "{e}");
}

#[test]
fn middleware_manifests_take_no_task_types() {
    let m = Manifest::parse(
        "name: audit\nversion: 1.0.0\nworld: middleware-plugin\nmiddleware: {failStrategy: open}\n",
        "audit.yaml",
    )
    .unwrap();
    assert_eq!(m.middleware.fail_strategy, FailStrategy::Open);
    let e = err("name: audit\nversion: 1.0.0\nworld: middleware-plugin\ntaskTypes: [x]\n");
    assert!(e.contains("middleware-plugin serves no task types"), "{e}");
}

const RAY: &str = r#"
name: ray-job
version: 0.1.0
world: webapi-task-plugin
taskTypes: [ray-job]
egress:
  allow: [{host: "*", ports: [8265], methods: [GET, POST], schemes: [http, https]}]
  timeout: 10s
  maxResponse: 2Mi
poll: {initial: 500ms, max: 10s}
"#;

#[test]
fn webapi_manifests_state_egress_and_polling() {
    let m = Manifest::parse(RAY, "ray.yaml").unwrap();
    assert_eq!(m.world.export_name(), "weft:plugin/webapi-task@0.2.0");
    assert_eq!(m.egress.allow.len(), 1);
    assert_eq!(m.egress.timeout, Duration::from_secs(10));
    assert_eq!(m.egress.max_response, 2 << 20);
    assert_eq!(m.poll.initial, Duration::from_millis(500));
    assert_eq!(Manifest::parse(POD, "pod.yaml").unwrap().egress.allow, []);

    let e = err(&RAY.replace("{initial: 500ms, max: 10s}", "{initial: 5s, max: 1s}"));
    assert!(e.contains("poll.max") && e.contains("below"), "{e}");
    let e = err(&RAY.replace("methods: [GET, POST]", "methods: [get]"));
    assert!(
        e.contains("egress.allow[0]") && e.contains("\"get\""),
        "{e}"
    );
    let e = err(&RAY.replace(
        "taskTypes: [ray-job]",
        "taskTypes: [ray-job]\nresources: [{apiVersion: v1, kind: Pod}]",
    ));
    assert!(e.contains("creates no Kubernetes resources"), "{e}");
    let e = err(&format!("{POD}egress: {{allow: []}}\n"));
    assert!(
        e.contains("only a webapi-task-plugin") && e.contains("k8s-task-plugin"),
        "{e}"
    );
}

#[test]
fn quantities() {
    assert_eq!(parse_quantity("64Mi"), Ok(64 << 20));
    assert_eq!(parse_quantity("100M"), Ok(100_000_000));
    assert_eq!(parse_quantity("4096"), Ok(4096));
    assert!(parse_quantity("1Ti").is_err());
    assert!(parse_quantity("Mi").is_err());
}
