//! CustomResourceDefinitions (the real Spark operator CRD among them) and
//! how the server answers requests it must refuse.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

const SPARK_CRD: &str = include_str!("fixtures/sparkoperator.k8s.io_sparkapplications.yaml");

async fn install(client: &kube::Client, crd: CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    await_condition(crds, &name, conditions::is_crd_established())
        .await
        .unwrap();
}

#[tokio::test]
async fn spark_crd_installs_and_serves_spark_applications_with_status() {
    let t = start().await;
    let crd: CustomResourceDefinition = serde_yaml::from_str(SPARK_CRD).unwrap();
    install(&t.client, crd).await;

    let gvk = GroupVersionKind::gvk("sparkoperator.k8s.io", "v1beta2", "SparkApplication");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "sparkapplications");
    let apps: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &ar);
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
        "metadata": {"name": "pi"},
        "spec": {"type": "Scala", "mode": "cluster", "sparkVersion": "3.5.0",
                 "mainApplicationFile": "local:///opt/spark/examples.jar",
                 "driver": {}, "executor": {}},
        "status": {"applicationState": {"state": "ignored"}}
    }))
    .unwrap();
    let created = apps.create(&PostParams::default(), &app).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );

    let s = apps
        .patch_status(
            "pi",
            &PatchParams::default(),
            // driverInfo is required by the operator's status schema.
            &Patch::Merge(
                json!({"status": {"applicationState": {"state": "RUNNING"}, "driverInfo": {}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(s.data["status"]["applicationState"]["state"], "RUNNING");
    assert_eq!(s.metadata.generation, Some(1));

    let s = apps
        .patch(
            "pi",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"sparkVersion": "3.5.1"}, "status": null})),
        )
        .await
        .unwrap();
    assert_eq!(s.metadata.generation, Some(2));
    assert_eq!(
        s.data["status"]["applicationState"]["state"], "RUNNING",
        "main resource keeps status"
    );

    // Custom resources take merge and apply patches, not strategic ones.
    let st = status_of(
        apps.patch(
            "pi",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"mode": "client"}})),
        )
        .await,
    );
    assert_eq!(st.code, 415);

    // Deleting the CRD removes its resources and stops serving them.
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    crds.delete(
        "sparkapplications.sparkoperator.k8s.io",
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    eventually("CRD gone", || async {
        crds.get_opt("sparkapplications.sparkoperator.k8s.io")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(status_of(apps.list(&ListParams::default()).await).code, 404);
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn cluster_scoped_multi_version_crd() {
    let t = start().await;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    install(&t.client, crd).await;
    let v1 = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let v1a = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1alpha1", "Widget"),
        "widgets",
    );
    let w1: Api<DynamicObject> = Api::all_with(t.client.clone(), &v1);
    let w1a: Api<DynamicObject> = Api::all_with(t.client.clone(), &v1a);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}})).unwrap();
    w1.create(&PostParams::default(), &obj).await.unwrap();
    let via_alpha = w1a.get("w").await.unwrap();
    assert_eq!(via_alpha.types.unwrap().api_version, "example.com/v1alpha1");
    assert_eq!(via_alpha.data["spec"]["size"], 3);
    // No status subresource declared: /status is not served.
    assert_eq!(status_of(w1.get_status("w").await).code, 404);
    t.cluster.shutdown().await;
}

async fn raw(
    client: &kube::Client,
    method: &str,
    uri: &str,
    ct: &str,
    body: Vec<u8>,
) -> kube::core::Status {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(body)
        .unwrap();
    status_of(client.request_text(req).await)
}

#[tokio::test]
async fn bad_requests_get_kubernetes_status_and_store_nothing() {
    let t = start().await;
    let c = &t.client;
    let url = "/api/v1/namespaces/default/configmaps";
    let count = || async {
        let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
        cms.list(&ListParams::default()).await.unwrap().items.len()
    };

    let s = raw(
        c,
        "GET",
        "/api/v1/namespaces/default/gizmos",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        s.message,
        "the server could not find the requested resource"
    );
    let s = raw(
        c,
        "GET",
        "/apis/nope.example.com/v1/things",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(s.code, 404);

    let s = raw(
        c,
        "POST",
        url,
        "application/json",
        b"{\"kind\": \"ConfigMap\", ".to_vec(),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert!(s.message.contains("json parse error"), "{}", s.message);

    let wrong = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}});
    let s = raw(
        c,
        "POST",
        url,
        "application/json",
        serde_json::to_vec(&wrong).unwrap(),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert!(
        s.message.contains("Secret") && s.message.contains("ConfigMap"),
        "{}",
        s.message
    );
    let wrong_version = json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let s = raw(
        c,
        "POST",
        url,
        "application/json",
        serde_json::to_vec(&wrong_version).unwrap(),
    )
    .await;
    assert_eq!(s.code, 400);

    let bad_name =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}});
    let s = raw(
        c,
        "POST",
        url,
        "application/json",
        serde_json::to_vec(&bad_name).unwrap(),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message
            .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value"),
        "{}",
        s.message
    );
    let causes = s.details.unwrap().causes;
    assert_eq!(causes[0].field, "metadata.name");

    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                     "data": {"blob": "x".repeat(3 * 1024 * 1024 + 1)}});
    let s = raw(
        c,
        "POST",
        url,
        "application/json",
        serde_json::to_vec(&big).unwrap(),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (413, "RequestEntityTooLarge"));

    // Under the 3 MiB request limit but over etcd's 1.5 MiB per object:
    // refused as a real cluster refuses it, by create and by patch.
    let mut big = big;
    big["data"]["blob"] = "x".repeat(2 * 1024 * 1024).into();
    let s = raw(
        c,
        "POST",
        url,
        "application/json",
        serde_json::to_vec(&big).unwrap(),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (413, "RequestEntityTooLarge"));
    assert!(
        s.message
            .starts_with("etcdserver: request is too large: ConfigMap \"big\" is 2097"),
        "{}",
        s.message
    );
    big["data"]["blob"] = "x".into();
    let create = http::Request::builder()
        .method("POST")
        .uri(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&big).unwrap())
        .unwrap();
    c.request_text(create).await.unwrap();
    let grow = json!({"data": {"blob": "x".repeat(1600 * 1024)}});
    let s = raw(
        c,
        "PATCH",
        &format!("{url}/big"),
        "application/merge-patch+json",
        serde_json::to_vec(&grow).unwrap(),
    )
    .await;
    assert_eq!(
        (s.code, s.reason.as_str()),
        (413, "RequestEntityTooLarge"),
        "{}",
        s.message
    );
    let get = http::Request::builder()
        .uri(format!("{url}/big"))
        .body(Vec::new())
        .unwrap();
    let kept: serde_json::Value =
        serde_json::from_str(&c.request_text(get).await.unwrap()).unwrap();
    assert_eq!(
        kept["data"]["blob"], "x",
        "the refused patch changed nothing"
    );

    let s = raw(
        c,
        "PATCH",
        &format!("{url}/nothing"),
        "application/merge-patch+json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(s.code, 404);
    let s = raw(
        c,
        "PATCH",
        &format!("{url}/nothing"),
        "text/plain",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(s.code, 415);

    assert_eq!(
        count().await,
        1,
        "nothing but the small ConfigMap was stored"
    );
    t.cluster.shutdown().await;
}
