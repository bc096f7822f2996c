//! CRD schemas enforced on custom resources, as kube-apiserver enforces
//! them, seen through the real `kubectl` (1.32) and kube-rs: type errors
//! refused with the API server's 422 wording, unknown fields pruned,
//! warned about or refused per `fieldValidation`, defaults applied, CEL
//! rules, every write path (create, PUT, merge/JSON patch, apply,
//! `/status`), and the schemas served as OpenAPI for `kubectl explain`.
//! The kubectl tests are skipped, loudly, when no `kubectl` is on PATH.

mod common;

use common::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

// The CRD Weft ships (generated from its types; a test in host/weft keeps
// it current), not a copy that could drift.
const WORKFLOW_CRD: &str = include_str!("../../../deploy/crds/workflow.yaml");
const WIDGET_CRD: &str = include_str!("fixtures/widget-crd.yaml");
const SPARK_CRD: &str = include_str!("fixtures/sparkoperator.k8s.io_sparkapplications.yaml");
const SPARK_PI: &str = include_str!("fixtures/spark-pi.yaml");

async fn install(client: &kube::Client, yaml: &str) {
    let crd: CustomResourceDefinition = serde_yaml::from_str(yaml).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    await_condition(crds, &name, conditions::is_crd_established())
        .await
        .unwrap();
}

fn api(client: &kube::Client, group: &str, version: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let plural = format!("{}s", kind.to_lowercase());
    let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn workflows(client: &kube::Client) -> Api<DynamicObject> {
    api(client, "weft.dev", "v1alpha1", "Workflow")
}

fn widgets(client: &kube::Client) -> Api<DynamicObject> {
    api(client, "test.weft.dev", "v1", "Widget")
}

fn obj(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

fn workflow(name: &str, spec: Value) -> DynamicObject {
    obj(
        json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
               "metadata": {"name": name}, "spec": spec}),
    )
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    obj(json!({"apiVersion": "test.weft.dev/v1", "kind": "Widget",
               "metadata": {"name": name}, "spec": spec}))
}

fn one_node() -> Value {
    json!([{"id": "a", "task": {"type": "pod", "config": {"image": "busybox"}}}])
}

/// The causes of a 422 as (field, reason, message).
fn causes(s: &kube::core::Status) -> Vec<(String, String, String)> {
    s.details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| (c.field.clone(), c.reason.clone(), c.message.clone()))
        .collect()
}

fn wf_yaml(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata:
  name: {name}
spec:
{extra}  nodes:
  - id: a
    task:
      type: pod
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_is_validated_and_unknown_fields_follow_validate() {
    let t = start().await;
    let Some(k) = Kubectl::new(&t) else { return };
    install(&t.client, WORKFLOW_CRD).await;
    let dir = t.dir.path();

    let bad = write(dir, "bad.yaml", &wf_yaml("bad", "  parallelism: lots\n"));
    let (ok, _, err) = k.run(&["create", "-f", &bad]).await;
    assert!(!ok);
    assert!(
        err.contains(
            r#"The Workflow "bad" is invalid: spec.parallelism: Invalid value: "string": spec.parallelism in body must be of type integer: "string""#
        ),
        "{err}"
    );

    let bogus = |name: &str| wf_yaml(name, "  bogusField: 1\n");
    // kubectl's default is --validate=strict: the server refuses.
    for (name, flags) in [
        ("strict-default", vec![]),
        ("strict", vec!["--validate=strict"]),
    ] {
        let f = write(dir, &format!("{name}.yaml"), &bogus(name));
        let mut args = vec!["create", "-f", &f];
        args.extend(flags);
        let (ok, _, err) = k.run(&args).await;
        assert!(!ok, "{name}");
        assert!(
            err.contains(r#"Error from server (BadRequest): error when creating"#)
                && err.contains(r#"Workflow in version "v1alpha1" cannot be handled as a Workflow: strict decoding error: unknown field "spec.bogusField""#),
            "{name}: {err}"
        );
    }

    let f = write(dir, "warn.yaml", &bogus("warned"));
    let (ok, out, err) = k.run(&["create", "--validate=warn", "-f", &f]).await;
    assert!(ok, "{out}{err}");
    assert!(
        err.contains(r#"Warning: unknown field "spec.bogusField""#),
        "{err}"
    );
    let got = k.json(&["get", "workflow/warned"]).await;
    assert!(got["spec"].get("bogusField").is_none(), "pruned: {got}");
    assert_eq!(got["spec"]["failurePolicy"], "FailFast", "defaulted");

    let f = write(dir, "ignore.yaml", &bogus("ignored"));
    let (ok, out, err) = k.run(&["create", "--validate=ignore", "-f", &f]).await;
    assert!(ok, "{out}{err}");
    assert!(!err.contains("Warning"), "{err}");
    let got = k.json(&["get", "workflow/ignored"]).await;
    assert!(got["spec"].get("bogusField").is_none(), "pruned: {got}");
    t.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_prints_the_crd_descriptions_and_follows_crd_changes() {
    let t = start().await;
    let Some(k) = Kubectl::new(&t) else { return };
    install(&t.client, WORKFLOW_CRD).await;
    let out = k.ok(&["explain", "workflow.spec.nodes.task"]).await;
    assert!(out.contains("GROUP:      weft.dev"), "{out}");
    assert!(out.contains("KIND:       Workflow"), "{out}");
    assert!(out.contains("VERSION:    v1alpha1"), "{out}");
    assert!(
        out.contains("Run a task through the plugin that serves its type."),
        "{out}"
    );
    assert!(
        out.contains("The task type, e.g. `pod` or `spark`."),
        "{out}"
    );
    assert!(out.contains("type\t<string> -required-"), "{out}");

    // A changed CRD is served at once (kubectl's cache follows the hash).
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    let path = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/nodes/items/properties/task/description";
    let p = json!([{"op": "replace", "path": path, "value": "Changed description."}]);
    let p: json_patch::Patch = serde_json::from_value(p).unwrap();
    crds.patch(
        "workflows.weft.dev",
        &PatchParams::default(),
        &Patch::Json::<()>(p),
    )
    .await
    .unwrap();
    let out = k.ok(&["explain", "workflow.spec.nodes.task"]).await;
    assert!(out.contains("Changed description."), "{out}");

    install(&t.client, SPARK_CRD).await;
    let out = k
        .ok(&["explain", "sparkapplication.spec.driver.cores"])
        .await;
    assert!(out.contains("Cores maps to `spark.driver.cores`"), "{out}");
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn openapi_v2_and_v3_serve_every_crd_schema() {
    let t = start().await;
    install(&t.client, WORKFLOW_CRD).await;
    let get = |path: &'static str| {
        let client = t.client.clone();
        async move {
            let req = http::Request::get(path).body(Vec::new()).unwrap();
            client.request::<Value>(req).await.unwrap()
        }
    };
    let v3 = get("/openapi/v3/apis/weft.dev/v1alpha1").await;
    let wf = &v3["components"]["schemas"]["dev.weft.v1alpha1.Workflow"];
    assert_eq!(
        wf["x-kubernetes-group-version-kind"],
        json!([{"group": "weft.dev", "kind": "Workflow", "version": "v1alpha1"}])
    );
    assert_eq!(
        wf["properties"]["spec"]["properties"]["parallelism"]["type"],
        "integer"
    );
    let v2 = get("/openapi/v2").await;
    let wf2 = &v2["definitions"]["dev.weft.v1alpha1.Workflow"];
    assert_eq!(
        wf2["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert!(
        wf2.to_string().find("nullable").is_none(),
        "v2 has no nullable"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    crds.delete("workflows.weft.dev", &Default::default())
        .await
        .unwrap();
    let v2 = eventually("the schema to go", || async {
        let v2 = get("/openapi/v2").await;
        v2["definitions"]["dev.weft.v1alpha1.Workflow"]
            .is_null()
            .then_some(())
    })
    .await;
    let () = v2;
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn every_write_path_is_validated() {
    let t = start().await;
    install(&t.client, WORKFLOW_CRD).await;
    let wfs = workflows(&t.client);
    let pp = PostParams::default();

    // Create: the 422 names the field, with kube-apiserver's cause.
    let bad = workflow("bad", json!({"parallelism": "string", "nodes": one_node()}));
    let st = status_of(wfs.create(&pp, &bad).await);
    assert_eq!(st.code, 422);
    assert_eq!(st.reason, "Invalid");
    assert_eq!(
        st.message,
        r#"Workflow.weft.dev "bad" is invalid: spec.parallelism: Invalid value: "string": spec.parallelism in body must be of type integer: "string""#
    );
    assert_eq!(
        causes(&st),
        vec![(
            "spec.parallelism".into(),
            "FieldValueTypeInvalid".into(),
            r#"Invalid value: "string": spec.parallelism in body must be of type integer: "string""#.into()
        )]
    );
    let missing = workflow("missing", json!({"nodes": [{"task": {"type": "pod"}}]}));
    let st = status_of(wfs.create(&pp, &missing).await);
    assert_eq!(
        causes(&st),
        vec![(
            "spec.nodes[0].id".into(),
            "FieldValueRequired".into(),
            "Required value".into()
        )]
    );

    // Defaults and pruning without fieldValidation (Warn).
    let spec = json!({"nodes": [{"id": "a", "retries": {}, "task": {"type": "pod"}, "bogus": 1}]});
    let wf = wfs.create(&pp, &workflow("wf", spec)).await.unwrap();
    assert_eq!(wf.data["spec"]["failurePolicy"], "FailFast");
    assert_eq!(wf.data["spec"]["nodes"][0]["retries"]["limit"], 0);
    assert!(wf.data["spec"]["nodes"][0].get("bogus").is_none());

    // PUT.
    let mut put = wf.clone();
    put.data["spec"]["parallelism"] = json!(-1);
    let st = status_of(wfs.replace("wf", &pp, &put).await);
    assert_eq!(
        causes(&st),
        vec![(
            "spec.parallelism".into(),
            "FieldValueInvalid".into(),
            "Invalid value: -1: spec.parallelism in body should be greater than or equal to 0"
                .into()
        )]
    );

    // Merge and JSON patches.
    let merge = Patch::Merge(json!({"spec": {"failurePolicy": "Sometimes"}}));
    let st = status_of(wfs.patch("wf", &PatchParams::default(), &merge).await);
    assert_eq!(
        causes(&st)[0].2,
        r#"Unsupported value: "Sometimes": supported values: "FailFast", "FailAfterExecutableNodesComplete""#
    );
    let p: json_patch::Patch = serde_json::from_value(
        json!([{"op": "add", "path": "/spec/nodes/0/dependsOn", "value": "b"}]),
    )
    .unwrap();
    let st = status_of(
        wfs.patch("wf", &PatchParams::default(), &Patch::Json::<()>(p))
            .await,
    );
    assert_eq!(causes(&st)[0].0, "spec.nodes[0].dependsOn");
    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..Default::default()
    };
    let unknown = Patch::Merge(json!({"spec": {"bogusField": true}}));
    let st = status_of(wfs.patch("wf", &strict, &unknown).await);
    assert_eq!((st.code, st.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        st.message,
        r#"strict decoding error: unknown field "spec.bogusField""#
    );
    let ok = wfs
        .patch("wf", &PatchParams::default(), &unknown)
        .await
        .unwrap();
    assert!(ok.data["spec"].get("bogusField").is_none());

    // Server-side apply: types validated, unknown fields fail the typed
    // conversion whatever fieldValidation says (500, as kube-apiserver).
    // (Forced: the fields were created by another manager, and conflicts
    // are found before validation, as in kube-apiserver.)
    let ssa = PatchParams::apply("test").force();
    let apply = |spec: Value| {
        Patch::Apply(
            json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
                            "metadata": {"name": "wf", "namespace": "default"}, "spec": spec}),
        )
    };
    let st = status_of(
        wfs.patch(
            "wf",
            &ssa,
            &apply(json!({"nodes": one_node(), "parallelism": true})),
        )
        .await,
    );
    assert_eq!(causes(&st)[0].0, "spec.parallelism");
    let st = status_of(
        wfs.patch(
            "wf",
            &ssa,
            &apply(json!({"nodes": one_node(), "bogusField": 1})),
        )
        .await,
    );
    assert_eq!(st.code, 500);
    assert_eq!(
        st.message,
        "failed to create typed patch object (default/wf; weft.dev/v1alpha1, Kind=Workflow): .spec.bogusField: field not declared in schema"
    );
    wfs.patch(
        "wf",
        &ssa,
        &apply(json!({"nodes": one_node(), "parallelism": 2})),
    )
    .await
    .unwrap();

    // The status subresource is validated and defaulted too.
    let status = Patch::Merge(json!({"status": {"phase": "Dancing"}}));
    let st = status_of(
        wfs.patch_status("wf", &PatchParams::default(), &status)
            .await,
    );
    assert_eq!(causes(&st)[0].0, "status.phase");
    let status = Patch::Merge(json!({"status": {"nodes": {"a": {"attempts": 1}}}}));
    let s = wfs
        .patch_status("wf", &PatchParams::default(), &status)
        .await
        .unwrap();
    assert_eq!(s.data["status"]["phase"], "Pending");
    assert_eq!(s.data["status"]["nodes"]["a"]["phase"], "Pending");
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn warnings_are_sent_as_299_headers() {
    let t = start().await;
    install(&t.client, WORKFLOW_CRD).await;
    let body = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "w", "labelz": {}},
        "spec": {"nodes": [{"id": "a", "task": {"type": "pod"}, "extra": 1}], "bogusField": 1}});
    let req = http::Request::post("/apis/weft.dev/v1alpha1/namespaces/default/workflows")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let resp = t.client.send(req).await.unwrap();
    assert_eq!(resp.status(), 201);
    let warnings: Vec<&str> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        vec![
            r#"299 - "unknown field \"metadata.labelz\"""#,
            r#"299 - "unknown field \"spec.bogusField\"""#,
            r#"299 - "unknown field \"spec.nodes[0].extra\"""#,
        ]
    );
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn cel_rules_formats_and_value_validations() {
    let t = start().await;
    install(&t.client, WIDGET_CRD).await;
    let ws = widgets(&t.client);
    let pp = PostParams::default();
    let w = ws
        .create(&pp, &widget("w", json!({"size": 5, "port": "http"})))
        .await
        .unwrap();
    assert_eq!(
        (
            &w.data["spec"]["minReplicas"],
            &w.data["spec"]["maxReplicas"],
            &w.data["spec"]["color"]
        ),
        (&json!(1), &json!(3), &json!("green"))
    );

    let st = status_of(
        ws.create(&pp, &widget("x", json!({"size": 5, "minReplicas": 9})))
            .await,
    );
    assert_eq!(
        st.message,
        r#"Widget.test.weft.dev "x" is invalid: spec: Invalid value: "object": minReplicas must not exceed maxReplicas"#
    );

    // A transition rule, with its messageExpression and reason.
    let shrink = Patch::Merge(json!({"spec": {"size": 2}}));
    let st = status_of(ws.patch("w", &PatchParams::default(), &shrink).await);
    assert_eq!(
        causes(&st),
        vec![(
            "spec".into(),
            "FieldValueForbidden".into(),
            "Forbidden: size may not shrink from 5".into()
        )]
    );

    let bad = json!({"size": 500, "name": "Not-OK", "port": true, "since": "yesterday",
                     "tags": ["a", "b", "c"], "template": {"spec": {}}, "note": null,
                     "color": "pink"});
    let st = status_of(ws.create(&pp, &widget("y", bad)).await);
    let got: Vec<String> = causes(&st)
        .into_iter()
        .map(|(f, _, m)| format!("{f}: {m}"))
        .collect();
    assert_eq!(
        got,
        vec![
            r#"spec.color: Unsupported value: "pink": supported values: "red", "green", "blue""#,
            r#"spec.name: Invalid value: "Not-OK": spec.name in body should match '^[a-z][a-z0-9-]*$'"#,
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
            r#"spec.since: Invalid value: "yesterday": spec.since in body must be of type date-time: "yesterday""#,
            "spec.size: Invalid value: 500: spec.size in body should be less than or equal to 100",
            "spec.tags: Too many: 3: must have at most 2 items",
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty",
            r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
        ]
    );
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn spark_applications_are_validated_against_the_operator_crd() {
    let t = start().await;
    install(&t.client, SPARK_CRD).await;
    let apps = api(
        &t.client,
        "sparkoperator.k8s.io",
        "v1beta2",
        "SparkApplication",
    );
    let pi: Value = serde_yaml::from_str(SPARK_PI).unwrap();
    let created = apps
        .create(&PostParams::default(), &obj(pi.clone()))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["driver"]["cores"], 1);
    let mut bad = pi;
    bad["metadata"]["name"] = "bad".into();
    bad["spec"]["driver"]["cores"] = "two".into();
    bad["spec"]["executor"]["instances"] = 0.into();
    let st = status_of(apps.create(&PostParams::default(), &obj(bad)).await);
    let fields: Vec<String> = causes(&st).into_iter().map(|c| c.0).collect();
    assert_eq!(fields, vec!["spec.driver.cores", "spec.executor.instances"]);
    t.cluster.shutdown().await;
}
