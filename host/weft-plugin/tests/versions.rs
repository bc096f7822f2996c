//! Versions in the registry, with real components: publishing keeps the
//! replaced version for pinned workflows and rollback, pruning unloads what
//! nobody pins, the breaker rolls a trapping version back.

mod common;

use std::time::Duration;

use common::{component, ctx, engine};
use serde_json::json;
use weft_plugin::{
    Manifest, Pinning, Plugin, PluginEngine, Registry, breaker::BreakerConfig, engine::Digest,
};

const FLAKY: &str = "name: flaky\nversion: 0.1.0\nworld: k8s-task-plugin\ntaskTypes: [flaky]\nresources: [{apiVersion: v1, kind: Pod}]\n";

/// A guest as plugin `flaky`; `salt` appends a custom section so the same
/// guest gives distinct digests.
fn flaky(engine: &PluginEngine, guest: &str, salt: &str) -> Plugin {
    let mut bytes = std::fs::read(component("test-guests", guest)).unwrap();
    if !salt.is_empty() {
        // A component-level custom section: id 0, size, name, payload.
        let name = b"weft-salt";
        let payload = salt.as_bytes();
        let size = 1 + name.len() + payload.len();
        assert!(size < 128 && name.len() < 128);
        bytes.extend([0, size as u8, name.len() as u8]);
        bytes.extend(name);
        bytes.extend(payload);
    }
    let manifest = Manifest::parse(FLAKY, "test").unwrap();
    Plugin::load(engine, &bytes, manifest, guest).unwrap().0
}

fn served(r: &Registry, pins: &[Digest]) -> Digest {
    r.task_plugin_pinned("flaky", pins).unwrap().digest()
}

#[test]
fn publish_keeps_the_old_version_for_pins_and_prune_unloads_it() {
    let engine = engine();
    let r = Registry::default();
    let v1 = flaky(&engine, "echo", "1");
    let v2 = flaky(&engine, "echo", "2");
    let v3 = flaky(&engine, "echo", "3");
    let (d1, d2, d3) = (v1.digest(), v2.digest(), v3.digest());
    assert_eq!(r.publish(v1), None);
    assert_eq!(r.publish(v2), Some(d1));
    assert_eq!(r.publish(v3), Some(d2));
    assert_eq!(served(&r, &[]), d3, "new work gets the newest");
    assert_eq!(served(&r, &[d1]), d1, "a pinned workflow keeps its version");
    assert_eq!(r.snapshot().history("flaky"), &[d1, d2]);

    // d2 is the rollback target and stays; d1 goes once unpinned.
    assert!(r.prune(|_, d| d == d1).is_empty());
    assert_eq!(r.prune(|_, _| false), vec![("flaky".to_string(), d1)]);
    assert_eq!(
        served(&r, &[d1]),
        d3,
        "an unloaded pin falls back to current"
    );
    assert_eq!(served(&r, &[d2]), d2);

    r.set_pinning("flaky", Pinning::Latest);
    assert_eq!(served(&r, &[d2]), d3, "always latest ignores pins");
}

#[test]
fn withdraw_serves_pins_only_then_unloads() {
    let engine = engine();
    let r = Registry::default();
    let v1 = flaky(&engine, "echo", "w");
    let d1 = v1.digest();
    r.publish(v1);
    assert_eq!(r.withdraw("flaky"), Some(d1));
    let err = r.task_plugin_pinned("flaky", &[]).unwrap_err().to_string();
    assert!(
        err.contains("no plugin serves task type \"flaky\""),
        "{err}"
    );
    assert_eq!(served(&r, &[d1]), d1, "the pinned workflow finishes");
    assert_eq!(r.prune(|_, _| false).len(), 1);
    assert!(r.task_plugin_pinned("flaky", &[d1]).is_err());
    assert!(r.snapshot().retained().is_empty());
}

#[test]
fn the_breaker_rolls_a_trapping_version_back() {
    let engine = engine();
    let r = Registry::default();
    r.set_breaker(BreakerConfig {
        max_faults: 2,
        window: Duration::from_secs(60),
    });
    let trips = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = trips.clone();
    r.on_trip(move |t| seen.lock().unwrap().push(t.clone()));
    let good = flaky(&engine, "echo", "");
    let bad = flaky(&engine, "panic", "");
    let (dg, db) = (good.digest(), bad.digest());
    r.publish(good);
    r.publish(bad);
    let task = ctx("flaky", json!({}), json!({}));
    for i in 0..3 {
        let p = r.task_plugin("flaky").unwrap();
        assert_eq!(p.digest(), db, "call {i} still on the bad version");
        let err = p.build_resource(&task).unwrap_err();
        assert!(err.is_fault(), "{err}");
        r.record_call(&p, Some(&err));
    }
    assert_eq!(
        served(&r, &[db]),
        dg,
        "rolled back, pins on the bad one too"
    );
    let trips = trips.lock().unwrap();
    assert_eq!(trips.len(), 1);
    assert_eq!((trips[0].from, trips[0].to), (db, Some(dg)));
    assert!(trips[0].last_error.contains("panicked"), "{:?}", trips[0]);
    assert_eq!(r.trips()["flaky"].faults, 3);
    let p = r.task_plugin("flaky").unwrap();
    assert!(p.build_resource(&task).is_ok());
}
