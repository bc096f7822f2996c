//! The sandbox suite: purpose-built guests that misbehave in every way a
//! plugin can, each run through the real host. Every fault must end as a
//! typed failure within twice the plugin's deadline, and the same engine
//! must serve the next call correctly. Each faulting call runs in a spare
//! instance prepared ahead of time, as the host serves calls, and so does
//! the call after it.

mod common;

use std::time::Instant;

use common::{engine, guest_ctx, task_plugin, wait_for_spare};
use serde_json::{Value, json};
use weft_plugin::{CallError, FailureKind, PluginEngine, TaskPlugin};

/// Runs build-resource of a misbehaving guest, checks the failure with
/// `expect`, the time against the deadline, and then that a good plugin on
/// the same engine still works (twice, so a poisoned pool slot would show).
fn misbehave(engine: &PluginEngine, guest: &str, expect: impl Fn(&CallError) -> bool) -> CallError {
    let plugin = task_plugin(engine, "test-guests", guest);
    let deadline = plugin.manifest().limits.deadline;
    wait_for_spare(&plugin);
    let start = Instant::now();
    let err = plugin
        .build_resource(&guest_ctx())
        .expect_err("a misbehaving guest must fail");
    let took = start.elapsed();
    assert!(expect(&err), "{guest}: unexpected failure: {err:?}");
    assert!(
        took <= deadline * 2,
        "{guest}: failed after {took:?}, more than twice its deadline of {deadline:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(guest),
        "{guest}: error does not name the plugin: {text}"
    );
    assert!(
        text.contains("build-resource"),
        "{guest}: error does not name the call: {text}"
    );
    still_serves(engine);
    // The faulty plugin itself is still callable (and still fails the same
    // way) in the next spare, which the fault did not touch.
    wait_for_spare(&plugin);
    let again = plugin
        .build_resource(&guest_ctx())
        .expect_err("fails again");
    assert_eq!(again.metric_label(), err.metric_label());
    still_serves(engine);
    err
}

fn still_serves(engine: &PluginEngine) {
    let echo = task_plugin(engine, "test-guests", "echo");
    let ctx = common::ctx("test", json!({"x": 1}), json!({"greeting": "hi"}));
    wait_for_spare(&echo);
    let (pod, _) = echo
        .build_resource(&ctx)
        .expect("echo serves after a fault");
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["namespace"], "team-a");
}

#[test]
fn endless_loop_is_stopped_at_its_deadline() {
    let engine = engine();
    let err = misbehave(&engine, "loop-forever", |e| {
        matches!(e, CallError::Deadline { .. })
    });
    assert_eq!(err.kind(), FailureKind::System);
    assert!(err.retryable());
    assert!(err.to_string().contains("deadline"), "{err}");
}

#[test]
fn allocating_without_end_is_out_of_memory() {
    let engine = engine();
    let err = misbehave(&engine, "oom", |e| {
        matches!(e, CallError::OutOfMemory { .. })
    });
    assert_eq!(err.kind(), FailureKind::System);
    assert!(err.to_string().contains("out of memory"), "{err}");
}

#[test]
fn unbounded_recursion_is_a_stack_overflow() {
    let engine = engine();
    let err = misbehave(&engine, "recurse", |e| {
        matches!(e, CallError::StackOverflow { .. })
    });
    assert_eq!(err.kind(), FailureKind::System);
}

#[test]
fn a_panic_is_a_trap_that_carries_the_panic_message() {
    let engine = engine();
    let err = misbehave(&engine, "panic", |e| matches!(e, CallError::Trap { .. }));
    assert!(
        err.to_string().contains("guest panicked on purpose"),
        "the trap should carry the guest's panic message: {err}"
    );
    assert_eq!(err.kind(), FailureKind::System);
}

#[test]
fn a_hundred_megabytes_of_output_is_refused() {
    let engine = engine();
    let err = misbehave(
        &engine,
        "big-output",
        |e| matches!(e, CallError::OutputTooLarge { size, .. } if *size >= 100_000_000),
    );
    assert!(
        !err.retryable(),
        "a plugin that breaks its limits will do so again"
    );
}

#[test]
fn an_undeclared_kind_is_forbidden() {
    let engine = engine();
    let err = misbehave(&engine, "undeclared-kind", |e| {
        matches!(e, CallError::Forbidden { .. })
    });
    let text = err.to_string();
    assert!(
        text.contains("Deployment") && text.contains("v1/Pod"),
        "{text}"
    );
}

#[test]
fn another_namespace_is_forbidden() {
    let engine = engine();
    let err = misbehave(&engine, "other-namespace", |e| {
        matches!(e, CallError::Forbidden { .. })
    });
    let text = err.to_string();
    assert!(
        text.contains("kube-system") && text.contains("team-a"),
        "{text}"
    );
}

/// The escape guest calls WASI 0.2's interfaces (those a Python or
/// JavaScript guest reaches through wasi-libc) for the filesystem, the
/// network, name resolution, the environment and the arguments, and
/// reports each outcome in an annotation. Every attempt must be denied,
/// and nothing of the host may appear in what it returns.
#[test]
fn filesystem_network_dns_and_environment_are_denied() {
    let engine = engine();
    let plugin = task_plugin(&engine, "test-guests", "escape");
    let (pod, _) = plugin
        .build_resource(&guest_ctx())
        .expect("escape reports its attempts");
    let annotations = pod["metadata"]["annotations"]
        .as_object()
        .expect("the escape guest reports in annotations");
    let mut attempts: Vec<&str> = annotations
        .keys()
        .filter_map(|k| k.strip_prefix("escape.weft.dev/"))
        .collect();
    attempts.sort_unstable();
    assert_eq!(
        attempts,
        [
            "args",
            "connect",
            "env",
            "initial-cwd",
            "listen",
            "preopens",
            "read-file",
            "resolve",
            "udp-bind"
        ],
        "every attempt is reported: {annotations:?}"
    );
    for (attempt, outcome) in annotations {
        let outcome = outcome.as_str().unwrap_or_default();
        assert!(
            outcome.starts_with("denied") || outcome.starts_with("empty"),
            "{attempt} was not denied: {outcome}"
        );
    }
    let text = pod.to_string();
    for leak in ["root:x:0:0", "/root", "RUST_", "CARGO"] {
        assert!(!text.contains(leak), "host detail {leak:?} leaked: {text}");
    }
    if let Ok(path) = std::env::var("PATH") {
        assert!(!text.contains(&path), "the host's PATH leaked");
    }
    still_serves(&engine);
}

/// A well-behaved plugin's state survives across calls (instances do not).
#[test]
fn state_outlives_the_instance() {
    let engine = engine();
    let echo = task_plugin(&engine, "test-guests", "echo");
    let ctx = common::ctx("test", json!({}), json!({"a": "b"}));
    let calls: Vec<Value> = (0..3)
        .map(|_| echo.build_resource(&ctx).expect("echo").0)
        .collect();
    let counts: Vec<&Value> = calls
        .iter()
        .map(|p| &p["metadata"]["annotations"]["echo.weft.dev/calls"])
        .collect();
    assert_eq!(counts, [&json!("1"), &json!("2"), &json!("3")]);
}

/// Faults of many calls in a row never exhaust the instance pool.
#[test]
fn repeated_faults_do_not_exhaust_the_pool() {
    let engine = engine();
    let plugin = task_plugin(&engine, "test-guests", "panic");
    for _ in 0..300 {
        assert!(matches!(
            plugin.build_resource(&guest_ctx()),
            Err(CallError::Trap { .. })
        ));
    }
    still_serves(&engine);
}

/// Waits until `plugin` has `n` spares ready (the preparer runs apart).
fn wait_for_spares(plugin: &TaskPlugin, n: usize) {
    let start = std::time::Instant::now();
    while plugin.spares_ready() != n {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{}: {} spares ready after 30 s, expected {n}",
            plugin.name(),
            plugin.spares_ready()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Calls `plugin` until its version counts as cheap (a refill makes two
/// spares). The preparer judges a version by the fastest instance it has
/// made; the first ones, in fresh pool slots, can take longer than that
/// threshold on a loaded machine (a debug build on a slow VM: a clean-clone
/// CI run saw only one spare for 30 s without calls), so it may take a few
/// calls, as it does in a controller.
fn until_cheap(plugin: &TaskPlugin, ctx: &weft_plugin::TaskContext) {
    let start = Instant::now();
    while plugin.spares_ready() < 2 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{}: still {} spares after 30 s of calls, expected 2 (a cheap version)",
            plugin.name(),
            plugin.spares_ready()
        );
        if plugin.spares_ready() == 1 {
            plugin.build_resource(ctx).expect("served from a spare");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A Rust guest's instance is cheap to make, so its version keeps one
/// spare more than asked and wakes the preparer every other call: after
/// one call the used instance waits and one spare is still ready; after
/// the next, both are replaced.
#[test]
fn spares_are_prepared_ahead_in_batches_and_never_with_spares_off() {
    let with = engine();
    let echo = task_plugin(&with, "test-guests", "echo");
    let ctx = common::ctx("test", json!({}), json!({}));
    until_cheap(&echo, &ctx);
    for round in 0..3 {
        wait_for_spares(&echo, 2);
        echo.build_resource(&ctx).expect("served from a spare");
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(
            echo.spares_ready(),
            1,
            "round {round}: one call must not wake the preparer while a spare is ready"
        );
        echo.build_resource(&ctx)
            .expect("served from the other spare");
    }
    wait_for_spares(&echo, 2);
    let cache = common::repo_root().join("target/weft-test-cache");
    let without = PluginEngine::new(weft_plugin::EngineConfig {
        cache_dir: Some(cache),
        spares: 0,
        ..weft_plugin::EngineConfig::default()
    })
    .expect("engine");
    let echo = task_plugin(&without, "test-guests", "echo");
    echo.build_resource(&ctx).expect("instantiated inline");
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(echo.spares_ready(), 0, "spares: 0 prepares nothing");
}
