//! `pods/{name}/log`: the files the runner writes, whole or followed.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::api::Cluster;
use crate::runner::{log_path, pod_dir};
use crate::server::{Body, text, text_stream};
use crate::status::{ApiError, ApiResult};

/// Last `n` lines of `data`.
fn tail(data: &[u8], n: usize) -> &[u8] {
    let mut count = 0;
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            count += 1;
            if count == n {
                return &data[i + 1..];
            }
        }
    }
    if n == 0 { &[] } else { data }
}

pub(crate) async fn serve(
    cx: Arc<Cluster>,
    mut shutdown: watch::Receiver<bool>,
    ns: &str,
    name: &str,
    q: &HashMap<String, String>,
) -> ApiResult<hyper::Response<Body>> {
    let pod = cx
        .store
        .get("/pods", ns, name)
        .ok_or_else(|| ApiError::not_found("pods", name))?;
    let names: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            pod["spec"]["initContainers"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    let container = match q.get("container").filter(|c| !c.is_empty()) {
        Some(c) if names.contains(c) => c.clone(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        None if names.len() == 1 => names[0].clone(),
        None => {
            let mains: Vec<&String> = pod["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str())
                .filter_map(|n| names.iter().find(|x| *x == n))
                .collect();
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                mains
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            )));
        }
    };
    let restarts = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .flat_map(|k| pod["status"][*k].as_array().into_iter().flatten())
        .find(|s| s["name"].as_str() == Some(&container))
        .and_then(|s| s["restartCount"].as_u64())
        .unwrap_or(0);
    let previous = matches!(q.get("previous").map(String::as_str), Some("true" | "1"));
    let instance = if previous {
        if restarts == 0 {
            return Err(ApiError::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{name}\" not found"
            )));
        }
        restarts - 1
    } else {
        restarts
    };
    let path = log_path(&pod_dir(&cx.data_dir, &pod), &container, instance);
    let Ok(mut file) = std::fs::File::open(&path) else {
        return Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        )));
    };
    let mut data = Vec::new();
    file.read_to_end(&mut data)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut first: Vec<u8> = match q.get("tailLines").and_then(|t| t.parse::<usize>().ok()) {
        Some(n) => tail(&data, n).to_vec(),
        None => data.clone(),
    };
    let limit = q.get("limitBytes").and_then(|l| l.parse::<usize>().ok());
    if let Some(l) = limit {
        first.truncate(l);
    }
    let follow = matches!(q.get("follow").map(String::as_str), Some("true" | "1"));
    if !follow || previous {
        return Ok(text(first));
    }
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let mut pos = data.len() as u64;
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Bytes::from(first)).await.is_err() {
            return;
        }
        loop {
            let live = cx
                .live_logs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&path);
            let mut chunk = Vec::new();
            if file.seek(SeekFrom::Start(pos)).is_ok() {
                let _ = file.read_to_end(&mut chunk);
            }
            if !chunk.is_empty() {
                pos += chunk.len() as u64;
                if tx.send(Bytes::from(chunk)).await.is_err() {
                    return;
                }
                continue;
            }
            if !live {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    Ok(text_stream(rx))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tail_lines() {
        assert_eq!(super::tail(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(super::tail(b"a\nb\nc\n", 5), b"a\nb\nc\n");
    }
}
