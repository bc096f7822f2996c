//! ResourceQuota for pods, as kube-apiserver's admission plugin enforces
//! it and kube-controller-manager's quota controller counts it: a create
//! over the limit is a 403 with the real server's message (POST and
//! server-side apply alike), a pod that finishes or goes frees its slot,
//! racing creates never overrun a quota, and `status.used` follows. The
//! tests wait as they would on a real cluster (for the quota's status
//! before relying on it, for the controller after a pod finishes), so the
//! same steps hold there.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{Namespace, Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "alpine:3"}]},
    }))
    .unwrap()
}

async fn namespace(client: &kube::Client, name: &str) {
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
}

/// Creates a quota and waits until its status holds its limits, as the
/// real controller must have synced it before admission relies on it.
async fn quota(client: &kube::Client, ns: &str, name: &str, spec: serde_json::Value) {
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    let q = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    quotas.create(&PostParams::default(), &q).await.unwrap();
    let want = spec["hard"].as_object().unwrap().len();
    eventually("the quota's status", || async {
        let q = quotas.get(name).await.ok()?;
        let hard = q.status?.hard?;
        (hard.len() == want).then_some(())
    })
    .await;
}

/// `status.used[resource]` of a quota once it reads `want`.
async fn used_becomes(client: &kube::Client, ns: &str, name: &str, resource: &str, want: &str) {
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    let what = format!("{ns}/{name} using {resource}={want}");
    eventually(&what, || async {
        let q = quotas.get(name).await.ok()?;
        let used = q.status?.used?;
        (used.get(resource)?.0 == want).then_some(())
    })
    .await;
}

fn refused(r: Result<Pod, kube::Error>, name: &str, why: &str) {
    let s = status_of(r);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"), "{s:?}");
    assert_eq!(s.message, format!("pods \"{name}\" is forbidden: {why}"));
    let details = s.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        (name, "pods")
    );
}

#[tokio::test]
async fn a_full_pod_quota_refuses_creates_until_a_pod_finishes_or_goes() {
    let t = start().await;
    namespace(&t.client, "team").await;
    quota(
        &t.client,
        "team",
        "pods-2",
        json!({"hard": {"pods": "2", "cpu": "4"}}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "team");
    let pp = PostParams::default();
    pods.create(&pp, &pod("p1")).await.unwrap();
    pods.create(&pp, &pod("p2")).await.unwrap();
    used_becomes(&t.client, "team", "pods-2", "pods", "2").await;

    let full = "exceeded quota: pods-2, requested: pods=1, used: pods=2, limited: pods=2";
    refused(pods.create(&pp, &pod("p3")).await, "p3", full);
    // A server-side apply that would create the pod is a create too.
    let apply = PatchParams::apply("quota-test");
    let mut body = serde_json::to_value(pod("p4")).unwrap();
    body["apiVersion"] = "v1".into();
    body["kind"] = "Pod".into();
    refused(
        pods.patch("p4", &apply, &Patch::Apply(&body)).await,
        "p4",
        full,
    );
    assert!(pods.get_opt("p3").await.unwrap().is_none());

    // A pod that finished no longer counts.
    let done = json!({"status": {"phase": "Succeeded"}});
    let ps = PatchParams::default();
    pods.patch_status("p1", &ps, &Patch::Merge(&done))
        .await
        .unwrap();
    used_becomes(&t.client, "team", "pods-2", "pods", "1").await;
    pods.create(&pp, &pod("p3")).await.unwrap();
    used_becomes(&t.client, "team", "pods-2", "pods", "2").await;
    refused(pods.create(&pp, &pod("p5")).await, "p5", full);

    // Neither does one that is gone.
    pods.delete("p2", &DeleteParams::default()).await.unwrap();
    used_becomes(&t.client, "team", "pods-2", "pods", "1").await;
    pods.patch("p4", &apply, &Patch::Apply(&body))
        .await
        .unwrap();

    // Resources nothing counts are shown without usage.
    let quotas: Api<ResourceQuota> = Api::namespaced(t.client.clone(), "team");
    let status = quotas.get("pods-2").await.unwrap().status.unwrap();
    assert_eq!(status.hard.unwrap()["cpu"].0, "4");
    assert!(!status.used.unwrap().contains_key("cpu"));
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn count_pods_scopes_and_namespaces_without_a_quota() {
    let t = start().await;
    namespace(&t.client, "counted").await;
    namespace(&t.client, "free").await;
    quota(
        &t.client,
        "counted",
        "objects",
        json!({"hard": {"count/pods": "1"}}),
    )
    .await;
    let pp = PostParams::default();
    let counted: Api<Pod> = Api::namespaced(t.client.clone(), "counted");
    counted.create(&pp, &pod("a")).await.unwrap();
    let why = "exceeded quota: objects, requested: count/pods=1, used: count/pods=1, limited: count/pods=1";
    refused(counted.create(&pp, &pod("b")).await, "b", why);
    used_becomes(&t.client, "counted", "objects", "count/pods", "1").await;

    // Other namespaces are not limited.
    let free: Api<Pod> = Api::namespaced(t.client.clone(), "free");
    for i in 0..5 {
        free.create(&pp, &pod(&format!("f{i}"))).await.unwrap();
    }

    // A scoped quota counts and limits only the pods its scopes match.
    namespace(&t.client, "scoped").await;
    let spec = json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]});
    quota(&t.client, "scoped", "best-effort", spec).await;
    let scoped: Api<Pod> = Api::namespaced(t.client.clone(), "scoped");
    let mut guaranteed = pod("sized");
    let limits = json!({"limits": {"cpu": "1", "memory": "64Mi"}});
    guaranteed.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(limits).unwrap());
    scoped.create(&pp, &guaranteed).await.unwrap();
    scoped.create(&pp, &pod("plain")).await.unwrap();
    let why = "exceeded quota: best-effort, requested: pods=1, used: pods=1, limited: pods=1";
    refused(scoped.create(&pp, &pod("plain2")).await, "plain2", why);
    used_becomes(&t.client, "scoped", "best-effort", "pods", "1").await;
    t.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creates_never_overrun_a_quota() {
    let t = start().await;
    namespace(&t.client, "race").await;
    quota(&t.client, "race", "three", json!({"hard": {"pods": "3"}})).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "race");
    let tries = (0..12).map(|i| {
        let pods = pods.clone();
        tokio::spawn(async move {
            pods.create(&PostParams::default(), &pod(&format!("r{i}")))
                .await
        })
    });
    let results = futures::future::join_all(tries).await;
    let (mut ok, mut forbidden) = (0, 0);
    for r in results {
        match r.unwrap() {
            Ok(_) => ok += 1,
            Err(kube::Error::Api(s)) if s.code == 403 => forbidden += 1,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!((ok, forbidden), (3, 9));
    used_becomes(&t.client, "race", "three", "pods", "3").await;
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn quota_limits_must_be_quantities() {
    let t = start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(t.client.clone(), "default");
    let bad = json!({"metadata": {"name": "bad"}, "spec": {"hard": {"pods": "-1"}}});
    let bad: ResourceQuota = serde_json::from_value(bad).unwrap();
    let s = status_of(quotas.create(&PostParams::default(), &bad).await);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "ResourceQuota \"bad\" is invalid: spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0"
    );
    t.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_quota_and_shows_its_usage() {
    let t = start().await;
    let Some(k) = Kubectl::new(&t) else { return };
    k.ok(&["create", "quota", "small", "--hard=pods=1,cpu=2"])
        .await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    used_becomes(&t.client, "default", "small", "pods", "0").await;
    pods.create(&PostParams::default(), &pod("one"))
        .await
        .unwrap();
    used_becomes(&t.client, "default", "small", "pods", "1").await;
    let out = k.ok(&["get", "quota"]).await;
    assert!(
        out.contains("REQUEST") && out.contains("cpu: 0/2, pods: 1/1"),
        "{out}"
    );
    let (ok, _, err) = k.run(&["run", "two", "--image=alpine:3"]).await;
    assert!(!ok);
    assert!(
        err.contains("pods \"two\" is forbidden: exceeded quota: small, requested: pods=1, used: pods=1, limited: pods=1"),
        "{err}"
    );
    t.cluster.shutdown().await;
}
