//! What a caller notices: how many calls get through at once, when the
//! next one does, and who shares a bucket. The clock is passed in, so
//! refill is tested without sleeping. The native state stand-in is one map
//! per test process, so every test uses callers of its own.

use super::*;
use serde_json::json;

const NOW: u64 = 1_750_000_000_000;
const METHOD: &str = "/weft.admin.v1.AdminService/CreateExecution";

fn call(principal: Option<&str>, peer: Option<&str>, config: Value) -> Call {
    Call {
        method: METHOD.into(),
        metadata: principal
            .map(|p| (PRINCIPAL.to_string(), p.to_string()))
            .into_iter()
            .collect(),
        peer: peer.map(str::to_string),
        request: None,
        plugin_config: config,
    }
}

fn config(rate: f64, burst: f64) -> Value {
    json!({"rate": rate, "burst": burst, "overrides": {}, "perMethod": false})
}

fn allowed(v: &Verdict) -> bool {
    match v {
        Verdict::Proceed { set, remove } => set.is_empty() && remove.is_empty(),
        Verdict::Reject { code, .. } => {
            assert_eq!(*code, Code::ResourceExhausted, "{v:?}");
            false
        }
    }
}

fn message(v: Verdict) -> String {
    match v {
        Verdict::Reject {
            code: Code::ResourceExhausted,
            message,
        } => message,
        other => panic!("expected RESOURCE_EXHAUSTED, got {other:?}"),
    }
}

#[test]
fn a_burst_gets_through_then_calls_are_refused() {
    let c = call(Some("burst-alice"), None, config(1.0, 5.0));
    for i in 0..5 {
        assert!(allowed(&limit(&c, NOW)), "call {i} of the burst");
    }
    let m = message(limit(&c, NOW));
    assert!(m.contains("principal burst-alice"), "{m}");
    assert!(m.contains("1 calls/s, burst 5"), "{m}");
    assert!(m.contains("retry after 1000 ms"), "{m}");
}

#[test]
fn the_bucket_refills_over_time() {
    let c = call(Some("refill-bob"), None, config(10.0, 2.0));
    assert!(allowed(&limit(&c, NOW)));
    assert!(allowed(&limit(&c, NOW)));
    assert!(!allowed(&limit(&c, NOW)));
    // 10/s: one token every 100 ms; 40 ms in, 60 ms to go.
    assert!(message(limit(&c, NOW + 40)).contains("retry after 60 ms"));
    assert!(allowed(&limit(&c, NOW + 100)));
    assert!(!allowed(&limit(&c, NOW + 100)));
    // A long pause refills only up to the burst.
    assert!(allowed(&limit(&c, NOW + 60_000)));
    assert!(allowed(&limit(&c, NOW + 60_000)));
    assert!(!allowed(&limit(&c, NOW + 60_000)));
}

#[test]
fn callers_have_buckets_of_their_own() {
    let cfg = config(1.0, 1.0);
    assert!(allowed(&limit(
        &call(Some("own-a"), None, cfg.clone()),
        NOW
    )));
    assert!(!allowed(&limit(
        &call(Some("own-a"), None, cfg.clone()),
        NOW
    )));
    assert!(allowed(&limit(&call(Some("own-b"), None, cfg), NOW)));
}

#[test]
fn without_a_principal_the_peer_address_counts_not_its_port() {
    let cfg = config(1.0, 1.0);
    assert!(allowed(&limit(
        &call(None, Some("10.9.8.7:4000"), cfg.clone()),
        NOW
    )));
    let m = message(limit(&call(None, Some("10.9.8.7:4001"), cfg.clone()), NOW));
    assert!(m.contains("peer 10.9.8.7:") && !m.contains("4001"), "{m}");
    // A principal on the same connection has its own bucket.
    assert!(allowed(&limit(
        &call(Some("peer-carol"), Some("10.9.8.7:4000"), cfg),
        NOW
    )));
}

#[test]
fn without_principal_or_peer_everyone_shares_the_anonymous_bucket() {
    // Its own rate so that no other test's anonymous calls interfere.
    let cfg = json!({"overrides": {"anonymous": {"rate": 0.001, "burst": 1}}});
    let first = limit(&call(None, None, cfg.clone()), NOW);
    let second = limit(&call(None, None, cfg), NOW);
    assert!(allowed(&first));
    assert!(message(second).contains("anonymous callers"));
}

#[test]
fn overrides_give_a_principal_its_own_limit() {
    let cfg = json!({"rate": 1, "burst": 1, "overrides": {"ovr-robot": {"burst": 3}}});
    for _ in 0..3 {
        assert!(allowed(&limit(
            &call(Some("ovr-robot"), None, cfg.clone()),
            NOW
        )));
    }
    let m = message(limit(&call(Some("ovr-robot"), None, cfg.clone()), NOW));
    assert!(m.contains("1 calls/s, burst 3"), "{m}");
    assert!(allowed(&limit(
        &call(Some("ovr-human"), None, cfg.clone()),
        NOW
    )));
    assert!(!allowed(&limit(&call(Some("ovr-human"), None, cfg), NOW)));
}

#[test]
fn per_method_buckets_are_separate() {
    let cfg = json!({"rate": 1, "burst": 1, "perMethod": true});
    let mut c = call(Some("pm-dave"), None, cfg);
    assert!(allowed(&limit(&c, NOW)));
    let m = message(limit(&c, NOW));
    assert!(m.contains(METHOD), "{m}");
    c.method = "/weft.admin.v1.AdminService/GetExecution".into();
    assert!(allowed(&limit(&c, NOW)));
}

#[test]
fn the_outcome_phase_is_not_counted() {
    let mut c = call(Some("phase-erin"), None, config(1.0, 1.0));
    c.metadata.insert(PHASE.into(), "outcome".into());
    for _ in 0..3 {
        assert!(allowed(&limit(&c, NOW)));
    }
}

#[test]
fn a_bad_config_refuses_calls_with_internal() {
    for cfg in [
        json!({"rate": 0}),
        json!({"burst": 0.5}),
        json!({"rate": -1}),
        json!({"overrides": {"x": {"rate": 0}}}),
        json!({"burts": 3}),
    ] {
        match limit(&call(Some("cfg-frank"), None, cfg.clone()), NOW) {
            Verdict::Reject {
                code: Code::Internal,
                message,
            } => assert!(message.contains("misconfigured"), "{message}"),
            other => panic!("{cfg}: expected INTERNAL, got {other:?}"),
        }
    }
}

#[test]
fn take_is_a_plain_token_bucket() {
    let limit = Limit {
        rate: 2.0,
        burst: 3.0,
    };
    let b = take(None, limit, NOW).unwrap();
    assert_eq!(b.tokens, 2.0);
    // A clock that goes back neither refills nor moves the bucket back.
    let b = take(Some(b), limit, NOW - 5_000).unwrap();
    assert_eq!((b.tokens, b.at_millis), (1.0, NOW));
    let b = take(Some(b), limit, NOW).unwrap();
    assert_eq!(take(Some(b), limit, NOW), Err(500));
    assert_eq!(take(Some(b), limit, NOW + 250), Err(250));
    assert_eq!(ttl_millis(limit), 2_500);
}

#[test]
fn buckets_round_trip_through_state_bytes() {
    let b = Bucket {
        tokens: 3.25,
        at_millis: NOW,
    };
    assert_eq!(Bucket::decode(&b.encode()), Some(b));
    assert_eq!(Bucket::decode(b"garbage"), None);
}

#[test]
fn peer_hosts_drop_the_port() {
    assert_eq!(peer_host("10.0.0.1:5555"), "10.0.0.1");
    assert_eq!(peer_host("[::1]:5555"), "::1");
    assert_eq!(peer_host("::1"), "::1");
}
