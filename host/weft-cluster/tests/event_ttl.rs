//! Events expire after their last write, as kube-apiserver's `--event-ttl`
//! makes them: one written again keeps living, the others go, in both
//! Event APIs, and kubectl no longer lists them.

mod common;

use std::time::Duration;

use common::{Kubectl, eventually};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::api::events::v1::Event as NewEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

const TTL: Duration = Duration::from_secs(4);

fn core_event(name: &str) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            name: Some("p".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        reason: Some("Tested".into()),
        message: Some(format!("{name} happened")),
        type_: Some("Normal".into()),
        last_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        ..Default::default()
    }
}

#[tokio::test]
async fn events_expire_after_their_last_write_and_one_written_again_lives_on() {
    let t = common::start_with(|dir| {
        let mut c = common::api_only(dir);
        c.event_ttl = TTL;
        c
    })
    .await;
    let core: Api<Event> = Api::namespaced(t.client.clone(), "default");
    let new: Api<NewEvent> = Api::namespaced(t.client.clone(), "default");
    let pp = PostParams::default();
    core.create(&pp, &core_event("kept")).await.unwrap();
    core.create(&pp, &core_event("gone")).await.unwrap();
    let modern = NewEvent {
        metadata: ObjectMeta {
            name: Some("modern".into()),
            ..Default::default()
        },
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        reporting_controller: Some("test".into()),
        reporting_instance: Some("test-1".into()),
        action: Some("Test".into()),
        reason: Some("Tested".into()),
        type_: Some("Normal".into()),
        ..Default::default()
    };
    new.create(&pp, &modern).await.unwrap();

    // "kept" is written again every half second, as a recorder does for a
    // repeating event; the others are not.
    let started = std::time::Instant::now();
    let touch = |n: i32| {
        let core = core.clone();
        async move {
            let patch = serde_json::json!({"count": n,
                "lastTimestamp": k8s_openapi::jiff::Timestamp::now().to_string()});
            core.patch("kept", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };
    let mut n = 1;
    loop {
        let gone = core.get_opt("gone").await.unwrap().is_none();
        let modern = new.get_opt("modern").await.unwrap().is_none();
        if gone && modern {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "events older than {TTL:?} still there: gone {gone}, modern {modern}"
        );
        n += 1;
        touch(n).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        started.elapsed() >= TTL - Duration::from_secs(1),
        "events went before their TTL: {:?}",
        started.elapsed()
    );
    let kept = core.get("kept").await.unwrap();
    assert_eq!(kept.count, Some(n), "the event written again lives on");
    if let Some(k) = Kubectl::new(&t) {
        let out = k.ok(&["get", "events", "-o", "name"]).await;
        assert_eq!(out.trim(), "event/kept", "kubectl lists: {out}");
    }

    // Not written again, it goes too.
    eventually("the last event to expire", || async {
        core.get_opt("kept").await.unwrap().is_none().then_some(())
    })
    .await;
}
