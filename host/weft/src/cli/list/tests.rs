use super::*;
use serde_json::json;

#[test]
fn durations_read_as_kubectl_prints_them() {
    let cases = [
        (0, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (182, "3m2s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (2 * 3600 + 5 * 60 + 3 * 3600, "5h5m"),
        (7200 * 4, "8h"),
        (47 * 3600, "47h"),
        (50 * 3600, "2d2h"),
        (8 * 86400, "8d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(Duration::from_secs(secs)), want, "{secs}s");
    }
}

fn wf(name: &str, ns: &str, created: &str, status: serde_json::Value) -> Workflow {
    serde_json::from_value(json!({
        "apiVersion": "weft.dev/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
        "spec": {},
        "status": status,
    }))
    .unwrap()
}

#[test]
fn the_table_is_newest_first_with_durations() {
    let now = humantime::parse_rfc3339("2025-01-01T12:00:00Z").unwrap();
    let rows = vec![
        wf(
            "old",
            "a",
            "2025-01-01T08:00:00Z",
            json!({"phase": "Succeeded", "progress": "3/3",
                       "startedAt": "2025-01-01T08:00:01Z", "finishedAt": "2025-01-01T08:03:03Z"}),
        ),
        wf(
            "new",
            "b",
            "2025-01-01T11:59:55Z",
            json!({"phase": "Running", "progress": "0/1", "startedAt": "2025-01-01T11:59:56Z"}),
        ),
        wf("unseen", "b", "2025-01-01T11:59:59Z", json!(null)),
    ];
    let out = render(rows.clone(), false, now);
    assert_eq!(
        out,
        "NAME     PHASE       PROGRESS   AGE   DURATION   MESSAGE\n\
             unseen   Pending     -          1s    -\n\
             new      Running     0/1        5s    4s\n\
             old      Succeeded   3/3        4h    3m2s\n"
    );
    let all = render(rows, true, now);
    assert!(all.starts_with("NAMESPACE   NAME"), "{all}");
    let waiting = wf(
        "queued",
        "b",
        "2025-01-01T11:59:58Z",
        json!({"phase": "Pending", "message": format!("waiting for mutex/db, held by old (1/1); {}", "x".repeat(90))}),
    );
    let out = render(vec![waiting], false, now);
    let row = out.lines().nth(1).unwrap();
    assert!(row.starts_with("queued   Pending   -          2s    -          waiting for mutex/db, held by old (1/1); x"), "{out}");
    assert!(row.ends_with("x…") && row.chars().count() < 160, "{out}");
    assert!(all.contains("\na           old "), "{all}");
}
