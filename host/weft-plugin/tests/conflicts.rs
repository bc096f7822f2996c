//! Two plugins claiming one task type, with real components: the owner is
//! decided the same way every time (operator default, then priority, then
//! the first to claim, then the name), the loser is reported, and a new
//! version that would lose a task type is detected before it is published.

mod common;

use common::{component, engine};
use weft_plugin::{Manifest, Plugin, PluginEngine, Registry, RegistryConfig};

fn plugin(engine: &PluginEngine, name: &str, task_types: &str, priority: i32) -> Plugin {
    let text = format!(
        "name: {name}\nversion: 0.1.0\nworld: k8s-task-plugin\ntaskTypes: [{task_types}]\npriority: {priority}\nresources: [{{apiVersion: v1, kind: Pod}}]\n"
    );
    let manifest = Manifest::parse(&text, "test").unwrap();
    let bytes = std::fs::read(component("test-guests", "echo")).unwrap();
    Plugin::load(engine, &bytes, manifest, name).unwrap().0
}

fn owner(r: &Registry, task_type: &str) -> String {
    r.task_plugin(task_type).unwrap().name().to_string()
}

#[test]
fn the_plugin_that_claimed_first_owns_the_task_type_and_the_other_is_reported() {
    let engine = engine();
    let r = Registry::default();
    r.set_claimed_at("later", 2_000);
    r.set_claimed_at("early", 1_000);
    r.publish(plugin(&engine, "later", "job, extra", 0));
    r.publish(plugin(&engine, "early", "job", 0));
    assert_eq!(owner(&r, "job"), "early");
    assert_eq!(
        owner(&r, "extra"),
        "later",
        "an uncontested type still serves"
    );
    let snap = r.snapshot();
    let c = &snap.conflicts()["job"];
    assert_eq!(
        (c.winner.as_str(), c.losers.clone()),
        ("early", vec!["later".to_string()])
    );
    assert_eq!(c.why, "it was loaded first");
    assert!(
        c.to_string()
            .contains("\"job\" is claimed by early and later"),
        "{c}"
    );
}

#[test]
fn a_higher_priority_wins_and_the_operator_default_wins_over_priority() {
    let engine = engine();
    let r = Registry::default();
    r.set_claimed_at("first", 1);
    r.set_claimed_at("urgent", 2);
    r.publish(plugin(&engine, "first", "job", 0));
    r.publish(plugin(&engine, "urgent", "job", 10));
    assert_eq!(owner(&r, "job"), "urgent");
    assert_eq!(r.snapshot().conflicts()["job"].why, "higher priority 10");

    let config = RegistryConfig {
        default_for_task_types: [("job".to_string(), "first".to_string())].into(),
        ..Default::default()
    };
    let r = Registry::new(config);
    r.publish(plugin(&engine, "first", "job", 0));
    r.publish(plugin(&engine, "urgent", "job", 10));
    assert_eq!(owner(&r, "job"), "first");
    assert_eq!(
        r.snapshot().conflicts()["job"].why,
        "the operator's defaultForTaskTypes"
    );
}

#[test]
fn would_lose_detects_a_newcomer_and_an_upgrade_that_claims_an_owned_type() {
    let engine = engine();
    let r = Registry::default();
    r.set_claimed_at("js-job", 1_000);
    r.publish(plugin(&engine, "js-job", "job", 0));
    let newcomer = plugin(&engine, "py-job", "job", 0);
    let c = r
        .snapshot()
        .would_lose(newcomer.manifest(), 2_000)
        .expect("a later claim loses");
    assert_eq!((c.task_type.as_str(), c.winner.as_str()), ("job", "js-job"));
    let urgent = plugin(&engine, "py-job", "job", 5);
    assert_eq!(r.snapshot().would_lose(urgent.manifest(), 2_000), None);

    // An upgrade of js-job keeps its original claim time, so it keeps
    // winning even though it is published after py-job's claim.
    r.set_claimed_at("py-job", 2_000);
    r.publish(plugin(&engine, "py-job", "other", 0));
    let upgrade = plugin(&engine, "py-job", "other, job", 0);
    assert!(r.snapshot().would_lose(upgrade.manifest(), 3_000).is_some());
    let js2 = plugin(&engine, "js-job", "job", 0);
    assert_eq!(r.snapshot().would_lose(js2.manifest(), 9_000), None);
}

#[test]
fn loading_marks_task_types_until_the_guard_drops() {
    let r = std::sync::Arc::new(Registry::default());
    assert_eq!(r.loading("job"), None);
    let a = r.begin_loading("py-job", &["job".into()]);
    let b = r.begin_loading("py-job", &["job".into()]);
    assert_eq!(r.loading("job").as_deref(), Some("py-job"));
    drop(a);
    assert_eq!(
        r.loading("job").as_deref(),
        Some("py-job"),
        "one load still runs"
    );
    drop(b);
    assert_eq!(r.loading("job"), None);
}
