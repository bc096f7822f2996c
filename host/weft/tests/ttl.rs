//! `ttlStrategy` with a real `weft controller` process against the dev
//! cluster, driven with kubectl: a finished Workflow and its pods are
//! deleted within 2 s of their due time, by outcome; one that fell due
//! while no controller ran goes as soon as one is back; the controller's
//! default applies to Workflows that set none. One cluster for the file:
//! the dev cluster, or kube-apiserver and its garbage collector with
//! `WEFT_TEST_CLUSTER=k8s`.

mod common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use common::{ControllerProcess, kubectl};
use kube::Api;
use weft::api::Workflow;

fn workflow(name: &str, ttl: &str, command: &str) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}}}\nspec:\n{ttl}  nodes:\n    - {{id: step, task: {{type: pod, config: {{image: busybox:1.36, command: [sh, -c, '{command}']}}}}}}\n"
    )
}

async fn create(kubeconfig: &Path, yaml: &str) {
    let out = kubectl(kubeconfig, &["create", "-f", "-"], Some(yaml)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// When the Workflow finished (its status), once it has.
async fn finished_at(api: &Api<Workflow>, name: &str) -> SystemTime {
    for _ in 0..600 {
        let status = api.get(name).await.unwrap().status;
        if let Some(at) = status.and_then(|s| s.finished_at) {
            return humantime::parse_rfc3339(&at).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} did not finish");
}

/// Waits until the Workflow and its pods are gone; when that happened.
async fn gone(client: &kube::Client, name: &str, secs: u64) -> SystemTime {
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let lp = kube::api::ListParams::default().labels(&format!("weft.dev/workflow={name}"));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut wf_gone = None;
    while Instant::now() < deadline {
        if wf_gone.is_none() && api.get_opt(name).await.unwrap().is_none() {
            wf_gone = Some(SystemTime::now());
        }
        if let Some(at) = wf_gone
            && pods.list(&lp).await.unwrap().items.is_empty()
        {
            return at;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} (or its pods) still there after {secs} s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_workflows_go_at_their_time_to_live() {
    let cluster = common::cluster::TestCluster::start().await;
    let (kc, client) = (cluster.kubeconfig.clone(), cluster.client.clone());
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let mut controller = ControllerProcess::start(&kc, "ttl", &[]);
    controller.metrics().await;

    // By outcome: success after 2 s; a failure with only a success TTL stays.
    let ttl = "  ttlStrategy: {secondsAfterSuccess: 2, secondsAfterFailure: 3}\n";
    create(&kc, &workflow("quick", ttl, "echo hi")).await;
    create(&kc, &workflow("broken", ttl, "exit 1")).await;
    let kept = "  ttlStrategy: {secondsAfterSuccess: 1}\n";
    create(&kc, &workflow("kept", kept, "exit 1")).await;
    for (name, secs) in [("quick", 2), ("broken", 3)] {
        let done = finished_at(&api, name).await;
        let at = gone(&client, name, 30).await;
        let late = at.duration_since(done).unwrap();
        // finishedAt has one-second precision: due is at most 1 s early.
        assert!(
            late <= Duration::from_secs(secs + 2)
                && late + Duration::from_secs(1) >= Duration::from_secs(secs),
            "{name} deleted {late:?} after it finished, due after {secs} s"
        );
    }
    finished_at(&api, "kept").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        api.get_opt("kept").await.unwrap().is_some(),
        "no TTL for failures: kept"
    );

    // Due while no controller runs: deleted as soon as one is back, and
    // the default TTL applies to a Workflow that sets none.
    let ttl = "  ttlStrategy: {secondsAfterCompletion: 3}\n";
    create(&kc, &workflow("later", ttl, "echo hi")).await;
    create(&kc, &workflow("plain", "", "echo hi")).await;
    finished_at(&api, "later").await;
    finished_at(&api, "plain").await;
    controller.kill();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        api.get_opt("later").await.unwrap().is_some(),
        "no controller, nothing deleted"
    );
    let controller = ControllerProcess::start(&kc, "ttl-2", &["--default-ttl-after-completion=1s"]);
    controller.metrics().await;
    let back = SystemTime::now();
    for name in ["later", "plain"] {
        let at = gone(&client, name, 30).await;
        let took = at.duration_since(back).unwrap_or_default();
        assert!(
            took <= Duration::from_secs(2),
            "{name} deleted {took:?} after the controller was back"
        );
    }
    // The failure nobody gave a TTL now has the default one.
    gone(&client, "kept", 10).await;
}
