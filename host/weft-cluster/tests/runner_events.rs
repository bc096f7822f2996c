//! How a node's runs follow the pod events it is given ([`Pods::update`]),
//! with a host that records every status written: a run's own writes come
//! back through the watch later than it makes them, so an old event must
//! never start a pod over.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use weft_cluster::RunnerConfig;
use weft_cluster::runner::{PodHost, Pods};

/// One pod kept in memory; every status write's phase is recorded.
struct Host {
    dir: tempfile::TempDir,
    pod: Mutex<Value>,
    phases: Mutex<Vec<String>>,
    live: Mutex<HashSet<PathBuf>>,
}

impl PodHost for Host {
    fn node_name(&self) -> &str {
        "n1"
    }
    fn data_dir(&self) -> &Path {
        self.dir.path()
    }
    fn service_port(&self) -> String {
        "1".into()
    }
    fn binds(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        "the test host".into()
    }
    fn modify<'a>(
        &'a self,
        _pod: &'a Value,
        status: bool,
        f: Box<dyn FnOnce(&mut Value) + Send + 'a>,
    ) -> BoxFuture<'a, Option<Arc<Value>>> {
        let mut pod = self.pod.lock().unwrap();
        f(&mut pod);
        if status {
            let phase = pod["status"]["phase"].as_str().unwrap_or("").to_string();
            self.phases.lock().unwrap().push(phase);
        }
        std::future::ready(Some(Arc::new(pod.clone()))).boxed()
    }
    fn create_event<'a>(&'a self, _ns: &'a str, _event: Value) -> BoxFuture<'a, ()> {
        std::future::ready(()).boxed()
    }
    fn get<'a>(&'a self, _: &'a str, _: &'a str, _: &'a str) -> BoxFuture<'a, Option<Arc<Value>>> {
        std::future::ready(None).boxed()
    }
    /// A finalizer holds the pod: its deletion does not complete.
    fn finish<'a>(&'a self, _pod: &'a Value) -> BoxFuture<'a, ()> {
        std::future::ready(()).boxed()
    }
    fn live_logs(&self) -> &Mutex<HashSet<PathBuf>> {
        &self.live
    }
}

fn phases(host: &Host) -> Vec<String> {
    host.phases.lock().unwrap().clone()
}

async fn until(host: &Host, what: &str, done: impl Fn(&[String]) -> bool) {
    for _ in 0..200 {
        if done(&phases(host)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what}: phases written {:?}", phases(host));
}

#[tokio::test]
async fn an_old_event_of_a_pod_whose_run_ended_starts_nothing() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u1",
            "annotations": {"weft.dev/simulate": "true", "weft.dev/simulate-duration": "50ms"}},
        "spec": {"nodeName": "n1", "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]},
    });
    let host = Arc::new(Host {
        dir: tempfile::tempdir().unwrap(),
        pod: Mutex::new(pod.clone()),
        phases: Mutex::default(),
        live: Mutex::default(),
    });
    let mut pods = Pods::new(host.clone(), RunnerConfig::default());
    pods.update(&Arc::new(pod.clone()), false);
    until(&host, "the pod ran", |p| {
        p.last().is_some_and(|x| x == "Succeeded")
    })
    .await;
    let running = {
        let mut p = host.pod.lock().unwrap().clone();
        p["status"]["phase"] = "Running".into();
        p
    };

    // Deleted while a finalizer holds it: the run ends, the pod stays.
    let mut deleting = host.pod.lock().unwrap().clone();
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
    deleting["metadata"]["deletionGracePeriodSeconds"] = 0.into();
    pods.update(&Arc::new(deleting), false);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Then an event from before, showing it Running (a watch that lagged
    // and was listed again delivers such): nothing runs again.
    let written = phases(&host);
    pods.update(&Arc::new(running), false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(phases(&host), written, "the pod was run again");

    // Once it is gone and a pod of the same uid came back (it cannot,
    // but the node must not hold the uid forever), the guard is released.
    pods.update(&Arc::new(pod.clone()), true);
    pods.update(&Arc::new(pod), false);
    until(&host, "a new run", |p| p.len() > written.len()).await;
}
