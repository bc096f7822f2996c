//! The web console in a real browser: Debian's headless Chromium, driven
//! through ChromeDriver (WebDriver, by fantoccini), against a real `weft
//! dev` process with the auth-token middleware on. Workflows are created
//! with kubectl, as users do, and the page must follow them live. One
//! `weft dev` and one browser serve the whole file; each scenario that
//! fails leaves a screenshot in target/console-screenshots/.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{free_port, kubectl_ok, root};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

const TOKEN: &str = "console-test-token";

/// A `weft dev` process and where it serves.
struct Dev {
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    console: String,
}

/// `weft dev` with the request-id and auth-token middleware, the token
/// `TOKEN` accepted (for the principal `tester`).
async fn weft_dev() -> Dev {
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin.yaml");
    std::fs::write(&admin, "middleware: [request-id, auth-token]\n").unwrap();
    let registry = dir.path().join("registry.yaml");
    let config = json!({"plugins": {"auth-token": {"config": {"tokens": {TOKEN: "tester"}}}}});
    std::fs::write(&registry, config.to_string()).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["dev", "--admin-listen", "127.0.0.1:0", "--admin-config"])
        .arg(&admin)
        .arg("--registry-config")
        .arg(&registry)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("weft dev");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let console = tokio::time::timeout(Duration::from_secs(90), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("console at ") {
                return url.to_string();
            }
        }
        panic!("weft dev ended without printing the console's URL");
    })
    .await
    .expect("weft dev serves within 90 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Dev {
        _child: child,
        kubeconfig: dir.path().join("data/kubeconfig"),
        _dir: dir,
        console,
    }
}

/// ChromeDriver and a headless Chromium session.
struct Browser {
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
    c: Client,
}

async fn browser() -> Browser {
    let port = free_port();
    let driver = tokio::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver (Debian's chromium-driver; `make test` installs it)");
    let profile = tempfile::tempdir().unwrap();
    // The flags keep Chromium from calling home: this machine's network
    // is closed, and the test checks that the page asks nothing outside.
    let args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ];
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.push(format!("--user-data-dir={}", profile.path().display()));
    let caps = json!({"goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}});
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    let url = format!("http://127.0.0.1:{port}");
    let mut last = None;
    for _ in 0..100 {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(c) => {
                return Browser {
                    _driver: driver,
                    _profile: profile,
                    c,
                };
            }
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no WebDriver session: {last:?}");
}

/// Waits for `css` to match.
async fn find(c: &Client, css: &str) -> anyhow::Result<fantoccini::elements::Element> {
    c.wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(css))
        .await
        .map_err(|e| anyhow::anyhow!("{css}: {e}"))
}

/// Runs `script` until it returns true (30 s at most).
async fn until(c: &Client, what: &str, script: &str) -> anyhow::Result<()> {
    for _ in 0..300 {
        if c.execute(script, vec![]).await?.as_bool() == Some(true) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{what}: not within 30 s")
}

/// The text of `css`.
async fn text(c: &Client, css: &str) -> anyhow::Result<String> {
    Ok(find(c, css).await?.text().await?)
}

/// Every resource the page fetched came from its own origin.
async fn nothing_left_the_host(c: &Client) -> anyhow::Result<()> {
    let names = c
        .execute(
            "return performance.getEntriesByType('resource').map(e => e.name)\
               .filter(n => !n.startsWith(location.origin));",
            vec![],
        )
        .await?;
    anyhow::ensure!(names == json!([]), "requests outside the host: {names}");
    Ok(())
}

/// Runs one scenario; on failure keeps a screenshot and fails the test.
async fn scenario<F: std::future::Future<Output = anyhow::Result<()>>>(
    c: &Client,
    name: &str,
    f: F,
) {
    if let Err(e) = f.await {
        let dir = root().join("target/console-screenshots");
        let _ = std::fs::create_dir_all(&dir);
        let shot = dir.join(format!("{name}.png"));
        if let Ok(png) = c.screenshot().await {
            let _ = std::fs::write(&shot, png);
        }
        panic!("{name}: {e:#}\n(screenshot: {})", shot.display());
    }
}

fn kubectl_create(kc: &Path, manifest: &str) -> impl std::future::Future<Output = String> {
    let (kc, manifest) = (kc.to_path_buf(), manifest.to_string());
    async move { kubectl_ok(&kc, &["create", "-f", "-"], Some(&manifest)).await }
}

/// examples/diamond.yaml under a fixed name, suspended so the page can be
/// opened before anything runs.
fn suspended_diamond() -> String {
    let text = std::fs::read_to_string(root().join("examples/diamond.yaml")).unwrap();
    text.replace("generateName: diamond-", "name: diamond-live")
        .replace("spec:\n  nodes:", "spec:\n  suspend: true\n  nodes:")
}

const FAILING: &str = "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata: {name: fails}
spec:
  nodes:
    - id: bad
      task:
        type: pod
        config: {image: busybox:1.36, command: [sh, -c, 'echo step one done; echo about to fail; exit 3']}
";

const GATED: &str = "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata: {name: gated}
spec:
  nodes:
    - id: build
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo built']}}
    - id: ship-it
      dependsOn: [build]
      gate: {approval: {message: 'ship it?'}}
    - id: deploy
      dependsOn: [ship-it]
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo deployed']}}
";

/// Without a token the console is refused; with one it works, and keeps
/// it for the session.
async fn token_is_required(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    c.goto(&dev.console).await?;
    find(c, "[data-testid=auth-required]").await?;
    find(c, "[data-testid=token-input]")
        .await?
        .send_keys(TOKEN)
        .await?;
    find(c, "[data-testid=token-submit]").await?.click().await?;
    until(
        c,
        "the list loads once the token is given",
        "return !document.querySelector('[data-testid=auth-required]');",
    )
    .await?;
    let kept = c
        .execute(
            "const has = s => Object.values(s).some(v => v.includes(arguments[0]));\
             return has(sessionStorage) && !has(localStorage);",
            vec![json!(TOKEN)],
        )
        .await?;
    anyhow::ensure!(
        kept == json!(true),
        "the token is kept for the session only"
    );
    Ok(())
}

async fn list_shows_a_submitted_workflow(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    let hello = std::fs::read_to_string(root().join("examples/hello.yaml"))?;
    let out = kubectl_create(&dev.kubeconfig, &hello).await;
    let name = out
        .split_whitespace()
        .next()
        .and_then(|s| s.strip_prefix("workflow.weft.dev/"))
        .ok_or_else(|| anyhow::anyhow!("kubectl said {out:?}"))?
        .to_string();
    c.goto(&dev.console).await?;
    let row = format!("[data-testid=workflow-row][data-name='{name}']");
    find(c, &row).await?;
    until(
        c,
        "the row turns Succeeded without a reload",
        &format!("return document.querySelector(\"{row}\")?.dataset.phase === 'Succeeded';"),
    )
    .await?;
    nothing_left_the_host(c).await
}

async fn diamond_turns_green_live(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    kubectl_create(&dev.kubeconfig, &suspended_diamond()).await;
    c.goto(&format!("{}workflows/default/diamond-live", dev.console))
        .await?;
    find(c, "[data-testid=dag-node][data-node=join]").await?;
    let edges = c
        .execute(
            "return [...document.querySelectorAll('[data-testid=dag-edge]')]\
               .map(e => e.dataset.from + '>' + e.dataset.to).sort();",
            vec![],
        )
        .await?;
    let want = json!(["left>join", "right>join", "split>left", "split>right"]);
    anyhow::ensure!(edges == want, "edges {edges}, want {want}");
    let phases = "return [...document.querySelectorAll('[data-testid=dag-node]')]\
                    .map(n => n.dataset.phase);";
    let before = c.execute(phases, vec![]).await?;
    anyhow::ensure!(
        before == json!(["Pending", "Pending", "Pending", "Pending"]),
        "a suspended workflow's nodes: {before}"
    );
    c.execute("window.__sameDocument = true;", vec![]).await?;
    let resume = r#"{"spec":{"suspend":false}}"#;
    kubectl_ok(
        &dev.kubeconfig,
        &[
            "patch",
            "workflow",
            "diamond-live",
            "--type=merge",
            "-p",
            resume,
        ],
        None,
    )
    .await;
    until(
        c,
        "every node turns Succeeded",
        "return [...document.querySelectorAll('[data-testid=dag-node]')]\
           .every(n => n.dataset.phase === 'Succeeded');",
    )
    .await?;
    let same = c
        .execute("return window.__sameDocument === true;", vec![])
        .await?;
    anyhow::ensure!(same == json!(true), "the page reloaded");
    let phase = text(c, "[data-testid=workflow-phase]").await?;
    anyhow::ensure!(phase.contains("Succeeded"), "header says {phase:?}");
    nothing_left_the_host(c).await
}

async fn failing_node_shows_message_and_log(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    kubectl_create(&dev.kubeconfig, FAILING).await;
    c.goto(&format!("{}workflows/default/fails/nodes/bad", dev.console))
        .await?;
    until(
        c,
        "the node shows Failed",
        "return document.querySelector('[data-testid=node-phase]')?.textContent.includes('Failed');",
    )
    .await?;
    let message = text(c, "[data-testid=node-message]").await?;
    anyhow::ensure!(
        message.contains('3'),
        "the message names the exit code: {message:?}"
    );
    until(
        c,
        "the log tail shows",
        "return document.querySelector('[data-testid=node-log]')?.textContent.includes('about to fail');",
    )
    .await?;
    nothing_left_the_host(c).await
}

async fn approving_a_gate_finishes_the_workflow(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    kubectl_create(&dev.kubeconfig, GATED).await;
    c.goto(&format!(
        "{}workflows/default/gated/nodes/ship-it",
        dev.console
    ))
    .await?;
    find(c, "[data-testid=gate-approve]").await?.click().await?;
    until(
        c,
        "the workflow succeeds after the approval",
        "return document.querySelector('[data-testid=workflow-phase]')?.textContent.includes('Succeeded');",
    )
    .await?;
    let wf = kubectl_ok(
        &dev.kubeconfig,
        &["get", "workflow", "gated", "-o", "json"],
        None,
    )
    .await;
    let wf: Value = serde_json::from_str(&wf)?;
    anyhow::ensure!(
        wf["status"]["nodes"]["deploy"]["phase"] == "Succeeded",
        "deploy ran: {}",
        wf["status"]["nodes"]
    );
    let events = kubectl_ok(
        &dev.kubeconfig,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=GateApproved",
            "-o",
            "json",
        ],
        None,
    )
    .await;
    anyhow::ensure!(
        events.contains("gate ship-it approved by tester"),
        "the approval is recorded with who gave it: {events}"
    );
    nothing_left_the_host(c).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    let dev = weft_dev().await;
    let b = browser().await;
    let c = &b.c;
    scenario(c, "token_is_required", token_is_required(c, &dev)).await;
    scenario(c, "list", list_shows_a_submitted_workflow(c, &dev)).await;
    scenario(c, "diamond", diamond_turns_green_live(c, &dev)).await;
    scenario(
        c,
        "failing_node",
        failing_node_shows_message_and_log(c, &dev),
    )
    .await;
    scenario(c, "gate", approving_a_gate_finishes_the_workflow(c, &dev)).await;
    b.c.clone().close().await.unwrap();
}
