//! tests/history.rs's bed: a cluster, a database of the file's
//! PostgreSQL and a `weft controller` recording into it.

use std::time::{Duration, Instant};

use kube::Api;
use serde_json::{Value, json};
use sqlx::Row;
use weft::admin::pb;
use weft::api::Workflow;

use super::EventKey;
use super::common;

/// A test's bed: a cluster, its database and a controller recording into
/// it (started again after a kill), serving the admin API (request ids
/// only, no authentication) at `admin`.
pub struct HistoryBed {
    pub bed: common::cluster::Bed,
    pub url: String,
    pub controller: Option<common::ControllerProcess>,
    pub starts: u32,
    pub admin: String,
    pub admin_config: std::path::PathBuf,
}

pub type AdminClient = pb::admin_service_client::AdminServiceClient<tonic::transport::Channel>;

impl HistoryBed {
    pub async fn start(url: String) -> HistoryBed {
        let bed = common::cluster::Bed::start().await;
        let port = common::free_port();
        let admin_config = bed.path("admin.yaml");
        let config = json!({"listen": format!("127.0.0.1:{port}"), "middleware": ["request-id"]});
        std::fs::write(&admin_config, config.to_string()).unwrap();
        let mut t = HistoryBed {
            bed,
            url,
            controller: None,
            starts: 0,
            admin: format!("http://127.0.0.1:{port}"),
            admin_config,
        };
        t.start_controller();
        t
    }

    pub fn start_controller(&mut self) {
        self.starts += 1;
        let identity = format!("history-{}", self.starts);
        let config = self.admin_config.to_str().unwrap();
        let args = ["--history-db", self.url.as_str(), "--admin-config", config];
        self.controller = Some(self.bed.controller(&identity, &args));
    }

    /// An admin API client, once the controller serves it.
    pub async fn client(&self) -> AdminClient {
        for _ in 0..600 {
            if let Ok(c) = AdminClient::connect(self.admin.clone()).await {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no admin API at {}", self.admin);
    }

    /// `weft ARGS --admin URL`, as a user runs it; its stdout.
    pub async fn weft_ok(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--admin", &self.admin]);
        common::weft_ok(&self.bed.kubeconfig, &all).await
    }

    pub fn id(&self, name: &str) -> Option<pb::ExecutionId> {
        Some(pb::ExecutionId {
            namespace: self.bed.ns.clone(),
            name: name.into(),
            ..Default::default()
        })
    }

    pub fn kill_controller(&mut self) {
        if let Some(mut c) = self.controller.take() {
            c.kill();
        }
    }

    pub fn controller(&self) -> &common::ControllerProcess {
        self.controller.as_ref().unwrap()
    }

    pub fn api(&self) -> Api<Workflow> {
        Api::namespaced(self.bed.client.clone(), &self.bed.ns)
    }

    pub async fn create(&self, name: &str, spec: Value) {
        let wf = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": self.bed.ns, "labels": {"team": "ml"}},
            "spec": spec});
        let text = wf.to_string();
        common::kubectl_ok(&self.bed.kubeconfig, &["create", "-f", "-"], Some(&text)).await;
    }

    pub async fn finish(&self, name: &str) -> Workflow {
        common::wait_workflow(&self.api(), name, |w| {
            w.status.as_ref().is_some_and(|s| s.phase.is_terminal())
        })
        .await
    }

    /// The event rows of workflow `uid`, sorted, duplicates kept (the key
    /// makes them impossible; the count shows it).
    pub async fn events(&self, uid: &str) -> Vec<EventKey> {
        let pool = common::postgres::pool(&self.url).await;
        let rows = sqlx::query(
            "SELECT kind, node, attempt, phase FROM events WHERE workflow_uid = $1 \
             ORDER BY kind, node, attempt, phase",
        )
        .bind(uid)
        .fetch_all(&pool)
        .await
        .unwrap();
        pool.close().await;
        rows.iter()
            .map(|r| {
                let attempt: i32 = r.get("attempt");
                (
                    r.get("kind"),
                    r.get("node"),
                    i64::from(attempt),
                    r.get("phase"),
                )
            })
            .collect()
    }

    /// The archived object of `uid`, once it is there (up to `secs`).
    pub async fn archived(&self, uid: &str, secs: u64) -> Value {
        let pool = common::postgres::pool(&self.url).await;
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let row = sqlx::query("SELECT workflow FROM executions WHERE uid = $1")
                .bind(uid)
                .fetch_optional(&pool)
                .await
                .unwrap();
            if let Some(r) = row {
                pool.close().await;
                return serde_json::from_str(r.get::<&str, _>("workflow")).unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "{uid} not archived in {secs} s; controller log:\n{}",
                self.controller
                    .as_ref()
                    .map(|c| c.log())
                    .unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn stop(mut self) {
        self.kill_controller();
        self.bed.stop().await;
    }
}
