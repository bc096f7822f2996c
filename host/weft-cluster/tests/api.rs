//! The API server driven by kube-rs over real HTTP, as the controller drives
//! a real cluster.

mod common;

use std::collections::BTreeMap;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Resource, ResourceExt};
use serde_json::json;

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn create_get_list_delete_with_server_filled_metadata() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", &[("k", "v")]))
        .await
        .unwrap();
    assert!(created.uid().is_some());
    assert!(created.creation_timestamp().is_some());
    assert!(created.resource_version().is_some());
    assert_eq!(created.namespace().as_deref(), Some("default"));

    let mut gen_named = cm("", &[]);
    gen_named.metadata.name = None;
    gen_named.metadata.generate_name = Some("job-".into());
    let g = cms
        .create(&PostParams::default(), &gen_named)
        .await
        .unwrap();
    assert!(g.name_any().starts_with("job-") && g.name_any().len() == 9);

    let got = cms.get("a").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "v");
    assert_eq!(
        cms.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let s = status_of(cms.get("a").await);
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "configmaps \"a\" not found");

    // Namespaces exist by default, and objects need one.
    let nss: Api<Namespace> = Api::all(t.client.clone());
    assert!(nss.get("kube-system").await.is_ok());
    let missing: Api<ConfigMap> = Api::namespaced(t.client.clone(), "nope");
    let s = status_of(missing.create(&PostParams::default(), &cm("x", &[])).await);
    assert_eq!(s.code, 404);
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn watch_sees_every_one_of_1000_rapid_updates_in_order() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("counter", &[("n", "0")]))
        .await
        .unwrap();
    let rv = first.resource_version().unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().fields("metadata.name=counter"), &rv)
        .await
        .unwrap()
        .boxed();
    let writer = {
        let cms = cms.clone();
        tokio::spawn(async move {
            for i in 1..=1000 {
                let p = json!({"data": {"n": i.to_string()}});
                cms.patch("counter", &PatchParams::default(), &Patch::Merge(&p))
                    .await
                    .unwrap();
            }
        })
    };
    let mut expected = 1;
    let mut last_rv: u64 = rv.parse().unwrap();
    while expected <= 1000 {
        match stream.try_next().await.unwrap().expect("watch ended early") {
            WatchEvent::Modified(o) => {
                assert_eq!(o.data.as_ref().unwrap()["n"], expected.to_string());
                let this_rv: u64 = o.resource_version().unwrap().parse().unwrap();
                assert!(this_rv > last_rv, "resourceVersions increase");
                last_rv = this_rv;
                expected += 1;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    writer.await.unwrap();
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = weft_cluster::DevCluster::start(api_only(dir.path()))
        .await
        .unwrap();
    let addr = cluster.addr();
    let client = client_for(&cluster);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let c = cms
        .create(&PostParams::default(), &cm("keep", &[("v", "1")]))
        .await
        .unwrap();
    let rv0 = c.resource_version().unwrap();
    cms.patch(
        "keep",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    cluster.shutdown().await;

    // Same data dir and port: the client does not notice it is a new process.
    let mut cfg = api_only(dir.path());
    cfg.bind = addr;
    let cluster = weft_cluster::DevCluster::start(cfg).await.unwrap();
    let after = cms.get("keep").await.unwrap();
    assert_eq!(
        after.data.as_ref().unwrap()["v"],
        "2",
        "acknowledged write survived"
    );
    let p3 = cms
        .patch(
            "keep",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "3"}})),
        )
        .await
        .unwrap();
    assert!(
        p3.resource_version().unwrap().parse::<u64>().unwrap()
            > after.resource_version().unwrap().parse::<u64>().unwrap()
    );
    let mut stream = cms
        .watch(&WatchParams::default().fields("metadata.name=keep"), &rv0)
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        if let WatchEvent::Modified(o) = stream.try_next().await.unwrap().unwrap() {
            seen.push(o.data.unwrap()["v"].clone());
        }
    }
    assert_eq!(seen, vec!["2", "3"]);
    cluster.shutdown().await;
}

#[tokio::test]
async fn watch_from_a_compacted_resource_version_gets_410_gone() {
    let t = start_with(|d| {
        let mut c = api_only(d);
        c.history_limit = 5;
        c
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let c = cms
        .create(&PostParams::default(), &cm("old", &[]))
        .await
        .unwrap();
    let rv0 = c.resource_version().unwrap();
    for i in 0..20 {
        let p = json!({"data": {"i": i.to_string()}});
        cms.patch("old", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap();
    }
    let mut stream = cms
        .watch(&WatchParams::default(), &rv0)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(s) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }
    // The runtime watcher relists and carries on.
    let w = kube::runtime::watcher(cms.clone(), kube::runtime::watcher::Config::default());
    let objs: Vec<ConfigMap> = kube::runtime::WatchStreamExt::applied_objects(w)
        .take(1)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(objs[0].name_any(), "old");
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn stale_updates_and_duplicate_creates_conflict() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let c = cms
        .create(&PostParams::default(), &cm("x", &[("a", "1")]))
        .await
        .unwrap();
    let s = status_of(cms.create(&PostParams::default(), &cm("x", &[])).await);
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));

    let mut fresh = c.clone();
    fresh.data = Some(BTreeMap::from([("a".into(), "2".into())]));
    cms.replace("x", &PostParams::default(), &fresh)
        .await
        .unwrap();
    let mut stale = c;
    stale.data = Some(BTreeMap::from([("a".into(), "3".into())]));
    let s = status_of(cms.replace("x", &PostParams::default(), &stale).await);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(s.message.contains("the object has been modified"));
    assert_eq!(cms.get("x").await.unwrap().data.unwrap()["a"], "2");
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let mut o = cm("held", &[]);
    o.metadata.finalizers = Some(vec!["weft.dev/cleanup".into()]);
    let c = cms.create(&PostParams::default(), &o).await.unwrap();
    let mut stream = cms
        .watch(
            &WatchParams::default().fields("metadata.name=held"),
            &c.resource_version().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    cms.delete("held", &DeleteParams::default()).await.unwrap();
    let still = cms.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    assert!(matches!(
        stream.try_next().await.unwrap().unwrap(),
        WatchEvent::Modified(_)
    ));

    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(matches!(
        stream.try_next().await.unwrap().unwrap(),
        WatchEvent::Deleted(_)
    ));
    assert_eq!(status_of(cms.get("held").await).code, 404);
    t.cluster.shutdown().await;
}

fn owned_by(name: &str, owner: &ConfigMap) -> ConfigMap {
    let mut c = cm(name, &[]);
    c.metadata.owner_references = Some(vec![owner.controller_owner_ref(&()).unwrap()]);
    c
}

#[tokio::test]
async fn owner_reference_garbage_collection() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let pp = PostParams::default();

    // Background: the owner goes at once, dependents after.
    let parent = cms.create(&pp, &cm("parent", &[])).await.unwrap();
    cms.create(&pp, &owned_by("child", &parent)).await.unwrap();
    cms.delete("parent", &DeleteParams::background())
        .await
        .unwrap();
    eventually("child collected", || async {
        cms.get_opt("child").await.unwrap().is_none().then_some(())
    })
    .await;

    // Foreground: the owner waits for its dependents.
    let parent = cms.create(&pp, &cm("fg", &[])).await.unwrap();
    let mut kid = owned_by("fg-child", &parent);
    kid.metadata.finalizers = Some(vec!["test/hold".into()]);
    cms.create(&pp, &kid).await.unwrap();
    cms.delete("fg", &DeleteParams::foreground()).await.unwrap();
    eventually("dependent marked for deletion", || async {
        cms.get("fg-child")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    assert!(
        cms.get("fg")
            .await
            .unwrap()
            .finalizers()
            .contains(&"foregroundDeletion".to_string())
    );
    cms.patch(
        "fg-child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("owner gone after its dependents", || async {
        cms.get_opt("fg").await.unwrap().is_none().then_some(())
    })
    .await;

    // Orphan: dependents stay, without the reference.
    let parent = cms.create(&pp, &cm("orph", &[])).await.unwrap();
    cms.create(&pp, &owned_by("orph-child", &parent))
        .await
        .unwrap();
    cms.delete("orph", &DeleteParams::orphan()).await.unwrap();
    eventually("owner gone", || async {
        cms.get_opt("orph").await.unwrap().is_none().then_some(())
    })
    .await;
    let kid = cms.get("orph-child").await.unwrap();
    assert!(kid.owner_references().is_empty());

    // Owners that are not there: a dependent created naming one that never
    // existed, one naming a name whose object has another uid, and an
    // object given such a reference by an update, are all collected;
    // dependents of a live owner stay, however often they are written.
    let live = cms.create(&pp, &cm("live", &[])).await.unwrap();
    let mut ghost = live.clone();
    ghost.metadata.name = Some("never".into());
    ghost.metadata.uid = Some("00000000-0000-0000-0000-000000000001".into());
    cms.create(&pp, &owned_by("of-never", &ghost))
        .await
        .unwrap();
    let mut renamed = live.clone();
    renamed.metadata.uid = Some("00000000-0000-0000-0000-000000000002".into());
    cms.create(&pp, &owned_by("of-other-uid", &renamed))
        .await
        .unwrap();
    cms.create(&pp, &owned_by("of-live", &live)).await.unwrap();
    cms.create(&pp, &cm("adopted-by-ghost", &[])).await.unwrap();
    let refs = json!({"metadata": {"ownerReferences": [ghost.controller_owner_ref(&()).unwrap()]}});
    cms.patch(
        "adopted-by-ghost",
        &PatchParams::default(),
        &Patch::Merge(refs),
    )
    .await
    .unwrap();
    for i in 0..5 {
        let data = json!({"data": {"n": i.to_string()}});
        cms.patch("of-live", &PatchParams::default(), &Patch::Merge(data))
            .await
            .unwrap();
    }
    for name in ["of-never", "of-other-uid", "adopted-by-ghost"] {
        eventually(name, || async {
            cms.get_opt(name).await.unwrap().is_none().then_some(())
        })
        .await;
    }
    assert!(cms.get_opt("of-live").await.unwrap().is_some());
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn label_and_field_selectors() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    for (name, app, tier) in [
        ("a", "web", Some("front")),
        ("b", "web", None),
        ("c", "db", Some("back")),
    ] {
        let mut o = cm(name, &[]);
        let mut labels = BTreeMap::from([("app".to_string(), app.to_string())]);
        if let Some(tier) = tier {
            labels.insert("tier".into(), tier.into());
        }
        o.metadata.labels = Some(labels);
        cms.create(&PostParams::default(), &o).await.unwrap();
    }
    let names = |sel: &'static str| {
        let cms = cms.clone();
        async move {
            let mut n: Vec<String> = cms
                .list(&ListParams::default().labels(sel))
                .await
                .unwrap()
                .items
                .iter()
                .map(|o| o.name_any())
                .collect();
            n.sort();
            n
        }
    };
    assert_eq!(names("app=web").await, ["a", "b"]);
    assert_eq!(names("app!=web").await, ["c"]);
    assert_eq!(names("tier in (front,back)").await, ["a", "c"]);
    assert_eq!(names("tier notin (front)").await, ["b", "c"]);
    assert_eq!(names("tier").await, ["a", "c"]);
    assert_eq!(names("!tier").await, ["b"]);
    assert_eq!(names("app=web,tier").await, ["a"]);
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let other_ns: Api<ConfigMap> = Api::all(t.client.clone());
    let in_default = other_ns
        .list(&ListParams::default().fields("metadata.namespace=default"))
        .await
        .unwrap();
    assert_eq!(in_default.items.len(), 3);

    // Pagination.
    let page = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    let token = page.metadata.continue_.clone().expect("continue token");
    let rest = cms
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert!(rest.metadata.continue_.is_none());

    // A watch with a selector sees an object leave the selection as DELETED.
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut w = cms
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "api"}}})),
    )
    .await
    .unwrap();
    match w.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(o) => assert_eq!(o.name_any(), "a"),
        other => panic!("expected DELETED, got {other:?}"),
    }
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn server_side_apply_merges_owns_and_conflicts() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let a1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "labels": {"a": "1"}},
                    "data": {"x": "1", "y": "1"}});
    let o = cms
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&a1))
        .await
        .unwrap();
    assert_eq!(o.data.as_ref().unwrap().len(), 2);
    assert_eq!(o.managed_fields()[0].manager.as_deref(), Some("alice"));

    // Bob sets a field of his own: merged, not replaced.
    let b1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"z": "bob"}});
    let o = cms
        .patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&b1))
        .await
        .unwrap();
    assert_eq!(o.data.as_ref().unwrap().len(), 3);

    // Bob changing Alice's field conflicts unless forced.
    let b2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"z": "bob", "x": "2"}});
    let s = status_of(
        cms.patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&b2))
            .await,
    );
    assert_eq!(s.code, 409);
    assert!(
        s.message.contains("conflict with \"alice\""),
        "{}",
        s.message
    );
    let o = cms
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&b2),
        )
        .await
        .unwrap();
    assert_eq!(o.data.as_ref().unwrap()["x"], "2");

    // Alice drops y from her configuration: y goes; x is Bob's now and stays.
    let a2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "labels": {"a": "1"}}, "data": {}});
    let o = cms
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&a2))
        .await
        .unwrap();
    let data = o.data.unwrap();
    assert!(!data.contains_key("y"));
    assert_eq!(data["x"], "2");
    assert_eq!(data["z"], "bob");

    // An Update by another client takes ownership without conflict.
    cms.patch(
        "ssa",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"z": "carol"}})),
    )
    .await
    .unwrap();
    let b3 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"z": "bob", "x": "2"}});
    let s = status_of(
        cms.patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&b3))
            .await,
    );
    assert_eq!(s.code, 409, "carol's update now owns z");

    // Apply creates.
    let n = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh"}, "data": {"k": "v"}});
    cms.patch("fresh", &PatchParams::apply("alice"), &Patch::Apply(&n))
        .await
        .unwrap();
    assert_eq!(cms.get("fresh").await.unwrap().data.unwrap()["k"], "v");
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn merge_json_and_strategic_patches() {
    let t = start().await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"containers": [
            {"name": "main", "image": "alpine:3", "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "alpine:3"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    // Strategic: containers merge by name.
    let p =
        json!({"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}});
    let o = pods
        .patch("p", &PatchParams::default(), &Patch::Strategic(&p))
        .await
        .unwrap();
    let spec = o.spec.unwrap();
    assert_eq!(spec.containers.len(), 2);
    assert_eq!(spec.containers[0].env.as_ref().unwrap().len(), 2);

    // Merge: the list is replaced.
    let p = json!({"metadata": {"labels": {"b": "2"}}, "spec": {"activeDeadlineSeconds": 5}});
    let o = pods
        .patch("p", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(o.labels().len(), 2);

    // JSON patch, with a failing test op as a precondition.
    let p: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "remove", "path": "/metadata/labels/a"}
    ]))
    .unwrap();
    let o = pods
        .patch("p", &PatchParams::default(), &Patch::Json::<()>(p))
        .await
        .unwrap();
    assert_eq!(o.labels().len(), 1);
    let bad: json_patch::Patch = serde_json::from_value(
        json!([{"op": "test", "path": "/metadata/labels/b", "value": "nope"}]),
    )
    .unwrap();
    let s = status_of(
        pods.patch("p", &PatchParams::default(), &Patch::Json::<()>(bad))
            .await,
    );
    assert_eq!(s.code, 422);
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let t = start().await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "g"},
        "spec": {"containers": [{"name": "c", "image": "alpine:3"}]},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let o = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(
        o.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending"),
        "status is not client-settable on create"
    );
    assert_eq!(o.metadata.generation, Some(1));

    let o = pods
        .patch_status(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .unwrap();
    assert_eq!(o.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(
        o.metadata.generation,
        Some(1),
        "status changes leave generation alone"
    );

    let o = pods
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Failed"}, "spec": {"activeDeadlineSeconds": 9}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        o.status.as_ref().unwrap().phase.as_deref(),
        Some("Running"),
        "main resource ignores status"
    );
    assert_eq!(
        o.metadata.generation,
        Some(2),
        "spec changes bump generation"
    );

    let o = pods
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        o.metadata.generation,
        Some(2),
        "metadata changes leave generation alone"
    );
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn object_meta_round_trips_through_resource_trait() {
    // Guard the assumption the GC test makes about owner references.
    let owner = cm("o", &[]);
    assert!(owner.controller_owner_ref(&()).is_none(), "needs a uid");
    let mut owner = owner;
    owner.meta_mut().uid = Some("u".into());
    assert_eq!(owner.controller_owner_ref(&()).unwrap().uid, "u");
}

#[tokio::test]
async fn leases_for_leader_election() {
    let t = start().await;
    let leases: Api<Lease> = Api::namespaced(t.client.clone(), "kube-system");
    let l: Lease = serde_json::from_value(json!({
        "metadata": {"name": "weft-controller"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}
    }))
    .unwrap();
    let mine = leases.create(&PostParams::default(), &l).await.unwrap();
    // Two candidates race to take over from the same read: one wins.
    let mut b = mine.clone();
    b.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let mut c = mine.clone();
    c.spec.as_mut().unwrap().holder_identity = Some("c".into());
    leases
        .replace("weft-controller", &PostParams::default(), &b)
        .await
        .unwrap();
    let s = status_of(
        leases
            .replace("weft-controller", &PostParams::default(), &c)
            .await,
    );
    assert_eq!(s.code, 409);
    let now = leases.get("weft-controller").await.unwrap();
    assert_eq!(now.spec.unwrap().holder_identity.as_deref(), Some("b"));
    assert!(
        now.metadata.generation.is_none(),
        "leases carry no generation"
    );
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn streaming_list_watcher_and_event_recorder() {
    use kube::runtime::events::{Event as KEvent, EventType, Recorder, Reporter};
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("seen", &[]))
        .await
        .unwrap();

    // sendInitialEvents=true: the initial state arrives as a watch.
    let w = kube::runtime::watcher(
        cms.clone(),
        kube::runtime::watcher::Config::default().streaming_lists(),
    );
    let objs: Vec<ConfigMap> = kube::runtime::WatchStreamExt::applied_objects(w)
        .take(1)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(objs[0].name_any(), "seen");

    // kube-runtime's Recorder writes events.k8s.io/v1 Events.
    let recorder = Recorder::new(
        t.client.clone(),
        Reporter {
            controller: "weft".into(),
            instance: None,
        },
    );
    recorder
        .publish(
            &KEvent {
                type_: EventType::Normal,
                reason: "Reconciled".into(),
                note: Some("ok".into()),
                action: "Reconcile".into(),
                secondary: None,
            },
            &created.object_ref(&()),
        )
        .await
        .unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(t.client.clone(), "default");
    let list = events.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items[0].reason.as_deref(), Some("Reconciled"));
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn watch_ends_at_its_timeout_and_sends_bookmarks_only_when_asked() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let stream = cms
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap();
    let events: Vec<_> = stream.try_collect().await.unwrap();
    assert!(
        events.is_empty(),
        "nothing changed, and the stream closed by itself"
    );
    t.cluster.shutdown().await;
}
