use super::*;
use serde_json::json;

fn big(i: usize) -> Value {
    json!({"metadata": {"name": "w"}, "status": {"i": i, "pad": "x".repeat(10_000)}})
}

/// History holds serialized records within its byte limit, and a watch
/// resuming from it gets every change back as it was written.
#[tokio::test]
async fn history_is_kept_serialized_within_its_byte_limit() {
    let dir = tempfile::tempdir().unwrap();
    let limits = HistoryLimits {
        events: 1_000,
        bytes: 50_000,
    };
    let store = Store::open(dir.path(), limits).unwrap();
    let start = store.revision();
    for i in 0..20 {
        let mut txn = store.begin();
        txn.put("/configmaps", "default", "w", big(i));
        txn.commit().await.unwrap();
    }
    let mut txn = store.begin();
    txn.delete("/configmaps", "default", "w");
    txn.commit().await.unwrap();

    let (bytes, kept) = {
        let hub = lock(&store.hub);
        (hub.bytes, hub.history.len())
    };
    assert!(bytes <= limits.bytes, "{bytes} bytes kept");
    assert_eq!(kept, 4, "four 10 kB records fit in 50 kB");
    assert!(
        store.subscribe_from(start).is_err(),
        "older changes are compacted"
    );

    let resumed: Vec<WatchEvent> = store
        .subscribe_from(store.compacted())
        .unwrap()
        .backlog
        .iter()
        .filter_map(Past::event)
        .collect();
    let got: Vec<_> = resumed
        .iter()
        .map(|e| (e.kind, e.object["status"]["i"].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (EventKind::Modified, json!(17)),
            (EventKind::Modified, json!(18)),
            (EventKind::Modified, json!(19)),
            (EventKind::Deleted, json!(19)),
        ]
    );
    assert!(
        resumed
            .iter()
            .all(|e| e.name == "w" && e.gr == "/configmaps")
    );
}
