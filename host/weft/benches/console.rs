//! The console with a 2,000-node workflow, measured in the browser with
//! the Performance API: Debian's headless Chromium (through ChromeDriver)
//! opens the workflow's page while it is suspended (first meaningful
//! paint: the `weft:dag-painted` mark the page sets once the DAG is
//! drawn), then the workflow runs 20 layers of 100 simulated pods of 1 s
//! each, so about 100 nodes change a second, while the page is measured:
//! frames per second, long tasks, and how long a click on a node takes to
//! open its panel. The reference in the same run: the same page for the
//! 4-node diamond.
//! `cargo bench -p weft --bench console` (after `make guests`; needs
//! chromium and chromedriver, `make browser`).

mod common;

use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use weft::api::Workflow;

const LAYERS: usize = 20;
const WIDTH: usize = 100;

/// `LAYERS` x `WIDTH` simulated pods of 1 s, each depending on the node
/// above it; suspended until the page is open.
fn big() -> Value {
    let task = json!({"type": "pod", "config": {"image": "busybox", "command": ["true"],
        "annotations": {"weft.dev/simulate": "true", "weft.dev/simulate-duration": "1s"}}});
    let nodes: Vec<Value> = (0..LAYERS * WIDTH)
        .map(|i| {
            let deps: Vec<String> = (i >= WIDTH)
                .then(|| format!("n{}", i - WIDTH))
                .into_iter()
                .collect();
            json!({"id": format!("n{i}"), "dependsOn": deps, "task": task})
        })
        .collect();
    json!({"suspend": true, "nodes": nodes})
}

fn diamond() -> Value {
    let t = common::simulated_task();
    json!({"suspend": true, "nodes": [
        {"id": "split", "task": t},
        {"id": "left", "dependsOn": ["split"], "task": t},
        {"id": "right", "dependsOn": ["split"], "task": t},
        {"id": "join", "dependsOn": ["left", "right"], "task": t}]})
}

async fn browser() -> anyhow::Result<(tokio::process::Child, tempfile::TempDir, Client)> {
    let port = common::free_port();
    let driver = tokio::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let profile = tempfile::tempdir()?;
    let caps = json!({"goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
        format!("--user-data-dir={}", profile.path().display())]}});
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    for _ in 0..100 {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        if let Ok(c) = ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            return Ok((driver, profile, c));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no WebDriver session")
}

/// Milliseconds from navigation to the page's `weft:dag-painted` mark.
async fn first_paint(c: &Client, url: &str) -> anyhow::Result<f64> {
    c.goto(url).await?;
    let script = "const m = performance.getEntriesByName('weft:dag-painted'); \
                  return m.length ? m[0].startTime : null;";
    for _ in 0..600 {
        if let Some(ms) = c.execute(script, vec![]).await?.as_f64() {
            return Ok(ms);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("{url}: no weft:dag-painted mark within 12 s")
}

/// Starts counting frames and long tasks in the page.
const WATCH: &str = "window.__perf = {frames: 0, long: []};
  new PerformanceObserver(l => l.getEntries().forEach(e => __perf.long.push(e.duration)))
    .observe({type: 'longtask', buffered: false});
  (function tick() { __perf.frames++; requestAnimationFrame(tick); })();
  window.__perf.since = performance.now();";

/// How long a click on node `id` takes to show its panel, in ms, timed
/// in the page (the click dispatched there: most nodes of 2,000 are
/// outside the viewport, where WebDriver refuses to click).
async fn click_to_panel(c: &Client, id: &str) -> anyhow::Result<f64> {
    let script = "const [id, done] = arguments;
      const t0 = performance.now();
      document.querySelector(`[data-testid=dag-node][data-node=${id}]`)
        .dispatchEvent(new MouseEvent('click', {bubbles: true}));
      (function poll() {
        if (document.querySelector(`[data-testid=node-panel][data-node=${id}]`)) {
          done(performance.now() - t0);
        } else { requestAnimationFrame(poll); }
      })();";
    let ms = c.execute_async(script, vec![json!(id)]).await?;
    ms.as_f64()
        .ok_or_else(|| anyhow::anyhow!("click on {id}: {ms}"))
}

async fn resume(api: &kube::Api<Workflow>, name: &str) -> anyhow::Result<()> {
    let patch = json!({"spec": {"suspend": false}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn create(api: &kube::Api<Workflow>, name: &str, spec: Value) -> anyhow::Result<()> {
    let spec: weft_dag::WorkflowSpec = serde_json::from_value(spec)?;
    let wf = Workflow::new(name, weft::api::WorkflowResourceSpec { spec });
    api.create(&Default::default(), &wf).await?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = common::simulated().await?;
    let config = weft::admin::AdminConfig {
        listen: "127.0.0.1:0".parse()?,
        middleware: Some(vec![]),
        ..Default::default()
    };
    let server = weft::admin::serve(
        &config,
        sim.client.clone(),
        sim.registry.clone(),
        sim.ctx.metrics.clone(),
        std::future::pending(),
    )
    .await?;
    let console = server.console_url();
    let api: kube::Api<Workflow> = kube::Api::namespaced(sim.client.clone(), "default");
    create(&api, "diamond", diamond()).await?;
    create(&api, "big", big()).await?;
    let (_driver, _profile, c) = browser().await?;

    let small = first_paint(&c, &format!("{console}workflows/default/diamond")).await?;
    let large = first_paint(&c, &format!("{console}workflows/default/big")).await?;
    println!("first meaningful paint: diamond (4 nodes) {small:.0} ms, 2,000 nodes {large:.0} ms");

    c.execute(WATCH, vec![]).await?;
    resume(&api, "big").await?;
    let started = Instant::now();
    let mut clicks = Vec::new();
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(LAYERS as u64) {
        let node = format!("n{}", (i * 137) % (LAYERS * WIDTH));
        clicks.push(click_to_panel(&c, &node).await?);
        i += 1;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let perf = c
        .execute(
            "const secs = (performance.now() - __perf.since) / 1000;
             const updates = performance.getEntriesByName('weft:update-applied').length;
             return {fps: __perf.frames / secs, long: __perf.long, updates, secs};",
            vec![],
        )
        .await?;
    let succeeded = c
        .execute(
            "return document.querySelectorAll('[data-testid=dag-node][data-phase=Succeeded]').length;",
            vec![],
        )
        .await?;
    clicks.sort_by(f64::total_cmp);
    let long: Vec<f64> = perf["long"]
        .as_array()
        .map(|l| l.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    println!(
        "while ~{WIDTH} nodes change a second ({:.0} s): {:.1} frames/s, {} long tasks (longest {:.0} ms, {:.0} ms in all), {} updates applied, {succeeded} nodes green at the end",
        perf["secs"].as_f64().unwrap_or_default(),
        perf["fps"].as_f64().unwrap_or_default(),
        long.len(),
        long.iter().copied().fold(0.0, f64::max),
        long.iter().sum::<f64>(),
        perf["updates"]
    );
    println!(
        "click on a node -> its panel shown (timed in the page): p50 {:.0} ms, max {:.0} ms over {} clicks",
        clicks[clicks.len() / 2],
        clicks.last().copied().unwrap_or_default(),
        clicks.len()
    );
    c.close().await?;
    sim.shutdown().await;
    Ok(())
}
