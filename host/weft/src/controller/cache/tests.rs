use super::*;

fn entry(created: SystemTime, max_age: Option<&str>, bytes: usize) -> CacheEntry {
    CacheEntry {
        created_at: weft_dag::status::timestamp(created),
        max_age: max_age.map(str::to_string),
        outputs: serde_json::from_value(json!({"x": "y".repeat(bytes)})).unwrap(),
        ..Default::default()
    }
}

#[test]
fn expired_then_oldest_entries_make_room() {
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let mut current = std::collections::BTreeMap::new();
    current.insert("expired".to_string(), entry(now - hour, Some("1m"), 10));
    current.insert("old".to_string(), entry(now - 3 * hour, None, 400 * 1024));
    current.insert("new".to_string(), entry(now - hour, None, 400 * 1024));
    let w = CacheWrite {
        task_type: "pod".into(),
        key: "k".into(),
        entry: entry(now, None, 200 * 1024),
    };
    assert_eq!(evictions(&current, &[&w], now), ["expired", "old"]);
    let small = CacheWrite {
        entry: entry(now, None, 10),
        ..w
    };
    assert_eq!(evictions(&current, &[&small], now), ["expired"]);
    assert_eq!(object_name("Spark_App"), "weft-cache-spark-app");
}
