//! `pods/{name}/log`: the files a node's runner writes, whole or followed.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::api::Cluster;
use crate::body::{Body, text, text_stream};
use crate::runner::{log_path, pod_dir};
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

/// A container's log as asked for: what there is now, and where to go on
/// reading when following.
pub struct LogRead {
    /// The log (or its tail, or its first `limitBytes`).
    pub first: Vec<u8>,
    /// With `follow`: the open file, the offset read so far and its path.
    pub follow: Option<(std::fs::File, u64, PathBuf)>,
}

/// Why a log cannot be read: the API's answer (400 or 404) and its message.
#[derive(Debug)]
pub struct LogError {
    /// 404 for a pod that does not exist, else 400 (as kube-apiserver).
    pub code: u16,
    /// The message kube-apiserver would give.
    pub message: String,
}

fn bad(message: String) -> LogError {
    LogError { code: 400, message }
}

/// Reads the log of the container the query names (`container`,
/// `previous`, `tailLines`, `limitBytes`, `follow`) of `pod`, from the files
/// a node writes under `data_dir`: the dev cluster's API and `weft node`'s
/// kubelet endpoint answer alike.
pub fn read(
    data_dir: &Path,
    pod: &Value,
    q: &HashMap<String, String>,
) -> Result<LogRead, LogError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let container = container(pod, q)?;
    let restarts = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .flat_map(|k| pod["status"][*k].as_array().into_iter().flatten())
        .find(|s| s["name"].as_str() == Some(&container))
        .and_then(|s| s["restartCount"].as_u64())
        .unwrap_or(0);
    let previous = matches!(q.get("previous").map(String::as_str), Some("true" | "1"));
    let instance = if previous {
        if restarts == 0 {
            return Err(bad(format!(
                "previous terminated container \"{container}\" in pod \"{name}\" not found"
            )));
        }
        restarts - 1
    } else {
        restarts
    };
    let path = log_path(&pod_dir(data_dir, pod), &container, instance);
    let Ok(mut file) = std::fs::File::open(&path) else {
        return Err(bad(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        )));
    };
    let mut data = Vec::new();
    file.read_to_end(&mut data)
        .map_err(|e| bad(e.to_string()))?;
    let mut first: Vec<u8> = match q.get("tailLines").and_then(|t| t.parse::<usize>().ok()) {
        Some(n) => tail(&data, n).to_vec(),
        None => data.clone(),
    };
    if let Some(l) = q.get("limitBytes").and_then(|l| l.parse::<usize>().ok()) {
        first.truncate(l);
    }
    let follow = matches!(q.get("follow").map(String::as_str), Some("true" | "1"));
    let follow = (follow && !previous).then_some((file, data.len() as u64, path));
    Ok(LogRead { first, follow })
}

/// The container the query names, or the pod's only one.
fn container(pod: &Value, q: &HashMap<String, String>) -> Result<String, LogError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let mains: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    let inits = pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten();
    let names: Vec<String> = mains
        .iter()
        .cloned()
        .chain(inits.filter_map(|c| c["name"].as_str().map(String::from)))
        .collect();
    match q.get("container").filter(|c| !c.is_empty()) {
        Some(c) if names.contains(c) => Ok(c.clone()),
        Some(c) => Err(bad(format!("container {c} is not valid for pod {name}"))),
        None if names.len() == 1 => Ok(names[0].clone()),
        None => Err(bad(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            mains.join(" ")
        ))),
    }
}

/// Sends `first`, then what is appended to the file while `live` says a
/// container still writes it, until the receiver goes or `shutdown`.
pub async fn follow(
    read: LogRead,
    live: impl Fn(&Path) -> bool + Send + 'static,
    tx: mpsc::Sender<Bytes>,
    mut shutdown: watch::Receiver<bool>,
) {
    if !read.first.is_empty() && tx.send(Bytes::from(read.first)).await.is_err() {
        return;
    }
    let Some((mut file, mut pos, path)) = read.follow else {
        return;
    };
    loop {
        let live = live(&path);
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
}

pub(crate) async fn serve(
    cx: Arc<Cluster>,
    shutdown: watch::Receiver<bool>,
    ns: &str,
    name: &str,
    q: &HashMap<String, String>,
) -> ApiResult<hyper::Response<Body>> {
    let pod = cx
        .store
        .get("/pods", ns, name)
        .ok_or_else(|| ApiError::not_found("pods", name))?;
    let read = read(&cx.data_dir, &pod, q).map_err(|e| ApiError::bad_request(e.message))?;
    if read.follow.is_none() {
        return Ok(text(read.first));
    }
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let live = move |p: &Path| {
        cx.live_logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(p)
    };
    tokio::spawn(follow(read, live, tx, shutdown));
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
