use super::*;

/// A finished workflow of `n` nodes, each with a small output, as the
/// scheduler leaves it (one second apart).
fn finished(n: usize) -> WorkflowStatus {
    let start = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_780_000_000);
    let nodes = (0..n)
        .map(|i| {
            let at = start + std::time::Duration::from_secs(i as u64);
            let node = NodeStatus {
                phase: NodePhase::Succeeded,
                started_at: Some(timestamp(at)),
                finished_at: Some(timestamp(at + std::time::Duration::from_secs(3))),
                outputs: Some(serde_json::json!({"rows": i}).as_object().cloned().unwrap()),
                ..Default::default()
            };
            (format!("n-{}-{}", i / 100, i % 100), node)
        })
        .collect();
    WorkflowStatus {
        phase: WorkflowPhase::Succeeded,
        started_at: Some(timestamp(start)),
        progress: Some(format!("{n}/{n}")),
        nodes,
        ..Default::default()
    }
}

#[test]
fn small_statuses_keep_their_nodes_as_a_map() {
    let status = finished(100);
    let v = serde_json::to_value(&status).unwrap();
    assert!(v["nodes"]["n-0-7"]["outputs"]["rows"] == 7, "{v}");
    assert!(v.get("compressedNodes").is_none());
    assert_eq!(serde_json::from_value::<WorkflowStatus>(v).unwrap(), status);
}

#[test]
fn a_10k_node_status_is_written_compressed_and_read_back_whole() {
    let status = finished(10_000);
    let plain = serde_json::to_vec(
        &WorkflowStatus::serialize(&status, serde_json::value::Serializer).unwrap(),
    )
    .unwrap();
    let written = serde_json::to_vec(&status).unwrap();
    eprintln!(
        "10,000 nodes: {} bytes as a map, {} bytes written",
        plain.len(),
        written.len()
    );
    assert!(written.len() <= 512 << 10, "{} bytes", written.len());
    let v: Value = serde_json::from_slice(&written).unwrap();
    assert!(
        v.get("nodes").is_none(),
        "nodes left beside compressedNodes"
    );
    assert_eq!(v["progress"], "10000/10000", "the rest stays readable");
    let back: WorkflowStatus = serde_json::from_slice(&written).unwrap();
    assert_eq!(back, status);
    assert_eq!(back.compressed_nodes, None);
}

#[test]
fn a_100k_node_status_fits_one_object() {
    let status = finished(100_000);
    let written = serde_json::to_vec(&status).unwrap();
    eprintln!("100,000 nodes: {} bytes written", written.len());
    assert!(written.len() <= 1536 << 10, "{} bytes", written.len());
    let back: WorkflowStatus = serde_json::from_slice(&written).unwrap();
    assert_eq!(back, status);
}

#[test]
fn every_time_field_survives_compression() {
    let mut status = finished(3_000);
    let node = status.nodes.get_mut("n-0-1").unwrap();
    node.phase = NodePhase::Retrying;
    node.retry_at = Some("2026-05-28T20:26:42.120Z".into());
    node.waiting_since = Some("2026-05-28T20:20:00Z".into());
    node.attempt_started_at = Some("1999-01-01T00:00:00.005Z".into());
    node.items = vec![ItemStatus {
        attempt_started_at: Some("2026-05-28T20:26:40.999Z".into()),
        retry_at: Some("not a time".into()),
        ..Default::default()
    }];
    let v = serde_json::to_value(&status).unwrap();
    assert!(v["compressedNodes"].is_string(), "{}", v["progress"]);
    assert_eq!(serde_json::from_value::<WorkflowStatus>(v).unwrap(), status);
}

#[test]
fn compressed_nodes_without_offsets_are_read() {
    // As weft wrote them before times became offsets: the plain map.
    use std::io::Write as _;
    let status = finished(3);
    let map = serde_json::to_vec(&status.nodes).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&map).unwrap();
    let packed = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        gz.finish().unwrap(),
    );
    let v = serde_json::json!({"phase": "Succeeded", "compressedNodes": packed});
    let back: WorkflowStatus = serde_json::from_value(v).unwrap();
    assert_eq!(back.nodes, status.nodes);
}

#[test]
fn unreadable_compressed_nodes_are_named() {
    let v = serde_json::json!({"phase": "Running", "compressedNodes": "not base64!"});
    let e = serde_json::from_value::<WorkflowStatus>(v)
        .unwrap_err()
        .to_string();
    assert!(e.contains("status.compressedNodes is not base64"), "{e}");
    let v = serde_json::json!({"phase": "Running", "compressedNodes": "aGVsbG8="});
    let e = serde_json::from_value::<WorkflowStatus>(v)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not gzip"), "{e}");
}
