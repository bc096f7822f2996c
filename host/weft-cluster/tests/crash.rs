//! Killing the server process (SIGKILL, no shutdown) loses no acknowledged
//! write. The server runs in a child process: this test binary re-runs
//! itself with `crash_child_server`, which is ignored in normal runs.

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const DIR_ENV: &str = "WEFT_CLUSTER_CRASH_DIR";

/// The child: serves until killed, announcing its address in a file.
#[tokio::test]
#[ignore = "run by killing_the_process_loses_no_acknowledged_write"]
async fn crash_child_server() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let cluster = weft_cluster::DevCluster::start(api_only(std::path::Path::new(&dir)))
        .await
        .unwrap();
    let tmp = format!("{dir}/addr.tmp");
    std::fs::write(&tmp, cluster.addr().to_string()).unwrap();
    std::fs::rename(&tmp, format!("{dir}/addr")).unwrap();
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn killing_the_process_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child_server", "--ignored", "--nocapture"])
        .env(DIR_ENV, dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = eventually("child server up", || async {
        std::fs::read_to_string(dir.path().join("addr")).ok()
    })
    .await;
    let client =
        kube::Client::try_from(kube::Config::new(format!("http://{addr}").parse().unwrap()))
            .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let writer = cms.clone();

    // Write concurrently; kill the process while writes are in flight.
    let writes = futures::stream::iter(0..100_000)
        .map(move |i: u64| {
            let cms = writer.clone();
            async move {
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))
                        .unwrap();
                cms.create(&PostParams::default(), &cm)
                    .await
                    .ok()
                    .map(|_| i)
            }
        })
        .buffer_unordered(16);
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let collector = {
        let acked = acked.clone();
        tokio::spawn(async move {
            writes
                .for_each(|r| {
                    if let Some(i) = r {
                        acked.lock().unwrap().push(i);
                    }
                    async {}
                })
                .await;
        })
    };
    eventually("some writes acknowledged", || async {
        (acked.lock().unwrap().len() > 300).then_some(())
    })
    .await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let acked: Vec<u64> = acked.lock().unwrap().clone();
    collector.abort();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let t = weft_cluster::DevCluster::start(api_only(dir.path()))
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client_for(&t), "default");
    let stored: std::collections::HashSet<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let lost: Vec<&u64> = acked
        .iter()
        .filter(|i| !stored.contains(&format!("cm-{i}")))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    t.shutdown().await;
}
