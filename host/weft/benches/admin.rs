//! Admin API latency: GetExecution over a real socket with a real tonic
//! client, with no Wasm middleware, with the four first-party plugins
//! chained (request-id, auth-token, rate-limit, audit; built by `make
//! guests`) and, as their floor, four copies of the `empty-mw` test guest
//! (a middleware that proceeds without reading the call; four versions, so
//! each keeps its own spares as four plugins do), and one copy alone. The
//! call reads a Workflow from the embedded dev cluster over HTTP, the same
//! in every case, so the difference is the chain.
//! `cargo bench -p weft --bench admin`; `CALLS` overrides 4,000 calls per
//! case, `PREPARER=normal|idle` sets the instance preparer's priority.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tonic::Request;
use weft::admin::{AdminConfig, pb};
use weft_plugin::Plugin;

type Client = pb::admin_service_client::AdminServiceClient<tonic::transport::Channel>;

fn configure(registry: &weft_plugin::Registry, name: &str, config: serde_json::Value) {
    let snapshot = registry.snapshot();
    let Some(Plugin::Middleware(m)) = snapshot.plugins().get(name) else {
        panic!("{name} is not in target/plugins: run `make guests`");
    };
    let mut m = (**m).clone();
    m.set_config_overrides(config.as_object().unwrap());
    registry.upsert(Plugin::Middleware(Arc::new(m)));
}

async fn calls(client: &mut Client, token: Option<&str>, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut req = Request::new(pb::GetExecutionRequest {
            id: Some(pb::ExecutionId {
                namespace: "default".into(),
                name: "bench".into(),
                ..Default::default()
            }),
        });
        if let Some(t) = token {
            req.metadata_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let t = Instant::now();
        client.get_execution(req).await.expect("GetExecution");
        out.push(t.elapsed());
    }
    out
}

/// The first-party plugins and four copies of the empty middleware
/// (`empty-mw-1` … `empty-mw-4`) in one directory for the loader.
fn plugin_dir(root: &Path, dir: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(root.join("target/plugins"))? {
        let path = entry?.path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap()))?;
    }
    let guests = root.join("target/test-guests");
    let manifest = std::fs::read_to_string(guests.join("empty-mw.yaml"))
        .map_err(|e| anyhow::anyhow!("target/test-guests/empty-mw.yaml: {e}: run `make guests`"))?;
    for i in 1..=4 {
        let name = format!("empty-mw-{i}");
        std::fs::copy(
            guests.join("empty-mw.wasm"),
            dir.join(format!("{name}.wasm")),
        )?;
        let yaml = manifest.replace("name: empty-mw", &format!("name: {name}"));
        std::fs::write(dir.join(format!("{name}.yaml")), yaml)?;
    }
    Ok(())
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir()?;
    let cluster = weft::dev::start(dir.path()).await?;
    let client = weft::runtime::client_for(&cluster.base_url())?;
    weft::runtime::install_crd(&client).await?;
    let plugins = tempfile::tempdir()?;
    plugin_dir(&root, plugins.path())?;
    // `PREPARER=normal` or `idle`: the preparer at that priority, for an
    // A/B with the default (low) in one build.
    let sizing = weft::runtime::PluginSizing {
        preparer_priority: std::env::var("PREPARER")
            .unwrap_or_else(|_| "low".into())
            .parse()
            .map_err(anyhow::Error::msg)?,
        ..Default::default()
    };
    let (_engine, registry) = weft::runtime::load_plugins_with(
        plugins.path(),
        Some(&root.join("target/weft-test-cache")),
        Default::default(),
        sizing,
    )?;
    configure(
        &registry,
        "auth-token",
        json!({"tokens": {"bench-token": "bench"}}),
    );
    configure(&registry, "rate-limit", json!({"rate": 1e9, "burst": 1e9}));
    let metrics = Arc::new(weft::controller::metrics::Metrics::default());
    let spec: weft_dag::WorkflowSpec = serde_json::from_value(
        json!({"nodes": [{"id": "a", "task": {"type": "pod", "config": {"image": "x"}}}]}),
    )?;
    kube::Api::<weft::api::Workflow>::namespaced(client.clone(), "default")
        .create(
            &Default::default(),
            &weft::api::Workflow::new("bench", weft::api::WorkflowResourceSpec { spec }),
        )
        .await?;

    // (name, chain, bearer token): interleaved below, so drift on a shared
    // machine hits all alike. One empty middleware against four splits the
    // floor into the chain's fixed cost and each plugin's share.
    let cases: [(&str, Vec<&str>, Option<&str>); 4] = [
        ("no Wasm middleware", vec![], None),
        (
            "four first-party plugins",
            vec!["request-id", "auth-token", "rate-limit", "audit"],
            Some("bench-token"),
        ),
        ("one empty middleware", vec!["empty-mw-1"], None),
        (
            "four empty middleware (floor)",
            vec!["empty-mw-1", "empty-mw-2", "empty-mw-3", "empty-mw-4"],
            None,
        ),
    ];
    let mut clients = Vec::new();
    for (_, chain, _) in &cases {
        let config = AdminConfig {
            listen: "127.0.0.1:0".parse()?,
            middleware: Some(chain.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        let server = weft::admin::serve(
            &config,
            client.clone(),
            registry.clone(),
            metrics.clone(),
            std::future::pending(),
        )
        .await?;
        clients.push(Client::connect(format!("http://{}", server.addr)).await?);
    }
    // Warm up connections, the engine's instance pool and the API path.
    for (c, (_, _, token)) in clients.iter_mut().zip(&cases) {
        calls(c, *token, 200).await;
    }
    let mut times = vec![Vec::new(); cases.len()];
    for _ in 0..10 {
        for ((c, (_, _, token)), t) in clients.iter_mut().zip(&cases).zip(&mut times) {
            t.extend(calls(c, *token, n / 10).await);
        }
    }
    times.iter_mut().for_each(|t| t.sort());
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("GetExecution, {n} calls per case, sequential, one client");
    println!("| chain | p50 | p90 | p99 |");
    println!("|---|---|---|---|");
    for ((name, _, _), d) in cases.iter().zip(&times) {
        println!(
            "| {name} | {:.0} µs | {:.0} µs | {:.0} µs |",
            us(pct(d, 0.5)),
            us(pct(d, 0.9)),
            us(pct(d, 0.99))
        );
    }
    let reference = &times[0];
    for ((name, _, _), d) in cases.iter().zip(&times).skip(1) {
        println!(
            "added by {name}: p50 {:.0} µs, p99 {:.0} µs",
            us(pct(d, 0.5)) - us(pct(reference, 0.5)),
            us(pct(d, 0.99)) - us(pct(reference, 0.99))
        );
    }
    // Where the time goes: each plugin's mean call time, from the metrics.
    let text = metrics.render();
    for plugin in [
        "request-id",
        "auth-token",
        "rate-limit",
        "audit",
        "empty-mw-1",
    ] {
        for call in ["on-request", "on-outcome"] {
            let series = format!(r#"{{plugin="{plugin}",call="{call}"}}"#);
            let get = |what: &str| {
                text.lines()
                    .find(|l| {
                        l.starts_with(&format!("weft_plugin_call_duration_seconds_{what}{series}"))
                    })
                    .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            };
            if let (Some(sum), Some(count)) = (get("sum"), get("count")) {
                println!(
                    "{plugin} {call}: mean {:.1} µs over {count} calls",
                    sum / count * 1e6
                );
            }
        }
    }
    cluster.shutdown().await;
    Ok(())
}
