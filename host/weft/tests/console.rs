//! The web console in a real browser: Debian's headless Chromium, driven
//! through ChromeDriver (WebDriver, by fantoccini), against a real `weft
//! dev` process with the auth-token middleware on. Workflows are created
//! with kubectl, as users do, and the page must follow them live. One
//! `weft dev` and one browser serve the whole file; each scenario that
//! fails leaves a screenshot in target/console-screenshots/.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::browser::{browser, find, scenario, text, until};
use common::{kubectl_ok, root};
use fantoccini::Client;
use fantoccini::actions::{InputSource as _, KeyAction, KeyActions};
use fantoccini::key::Key;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

const TOKEN: &str = "console-test-token";

/// A `weft dev` process and where it serves.
struct Dev {
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    console: String,
    /// The admin port's certificate (PEM), when it serves TLS.
    cert: Option<String>,
}

/// `weft dev` with the request-id and auth-token middleware, the token
/// `TOKEN` accepted (for the principal `tester`); with `tls`, the admin
/// port serves TLS with a certificate for 127.0.0.1 made here.
async fn weft_dev(tls: bool) -> Dev {
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin.yaml");
    let mut admin_yaml = "middleware: [request-id, auth-token]\n".to_string();
    let mut cert = None;
    if tls {
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem();
        std::fs::write(dir.path().join("admin.pem"), &pem).unwrap();
        std::fs::write(dir.path().join("admin.key"), key.serialize_pem()).unwrap();
        admin_yaml += &format!(
            "tls: {{cert: {0}/admin.pem, key: {0}/admin.key}}\n",
            dir.path().display()
        );
        cert = Some(pem);
    }
    std::fs::write(&admin, admin_yaml).unwrap();
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
        cert,
    }
}

/// Presses and releases `key` (a `Key` or a character) on whatever has
/// the focus, as a keyboard does (WebDriver actions; no element is
/// clicked or focused first).
async fn press(c: &Client, key: impl Into<char>) -> anyhow::Result<()> {
    let k = key.into();
    let keys = KeyActions::new("keyboard".into())
        .then(KeyAction::Down { value: k })
        .then(KeyAction::Up { value: k });
    c.perform_actions(keys).await?;
    Ok(())
}

/// What the focused element is, as a short JSON description.
const FOCUSED: &str = "const a = document.activeElement;\
    return {testid: a?.dataset?.testid ?? null, node: a?.dataset?.node ?? null,\
            name: a?.dataset?.name ?? null, tag: a?.tagName ?? null};";

/// Presses Tab (at most 60 times) until the focused element has
/// `data-testid=testid`.
async fn tab_to(c: &Client, testid: &str) -> anyhow::Result<Value> {
    for _ in 0..60 {
        press(c, Key::Tab).await?;
        let f = c.execute(FOCUSED, vec![]).await?;
        if f["testid"] == testid {
            return Ok(f);
        }
    }
    anyhow::bail!("Tab never reached a {testid}")
}

/// Whether the focused element shows it has the focus: it matches
/// :focus-visible and draws the focus colour, as an outline (`outline`)
/// or as the stroke of its box (a DAG node).
const VISIBLY_FOCUSED: &str = "const a = document.activeElement;\
    if (!a || !a.matches(':focus-visible')) return 'not :focus-visible';\
    const focus = getComputedStyle(document.body).getPropertyValue('--focus').trim();\
    const probe = document.createElement('i'); probe.style.color = focus;\
    document.body.append(probe); const want = getComputedStyle(probe).color; probe.remove();\
    if (a.matches('[data-testid=dag-node]')) {\
      const s = getComputedStyle(a.querySelector('.dag-box'));\
      return s.stroke === want && parseFloat(s.strokeWidth) >= 2 ? true : `box stroke ${s.stroke} ${s.strokeWidth}`;\
    }\
    const s = getComputedStyle(a);\
    return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1 && s.outlineColor === want\
      ? true : `outline ${s.outlineStyle} ${s.outlineWidth} ${s.outlineColor}`;";

async fn visibly_focused(c: &Client, what: &str) -> anyhow::Result<()> {
    let shown = c.execute(VISIBLY_FOCUSED, vec![]).await?;
    anyhow::ensure!(
        shown == json!(true),
        "{what} is not visibly focused: {shown}"
    );
    Ok(())
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

/// A diamond whose every node takes a second, so its timeline has width.
const TIMED: &str = "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata: {name: timed}
spec:
  nodes:
    - id: split
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'sleep 1']}}
    - id: left
      dependsOn: [split]
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'sleep 1']}}
    - id: right
      dependsOn: [split]
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'sleep 1']}}
    - id: join
      dependsOn: [left, right]
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'sleep 1']}}
";

/// A parent whose `inner` node runs a small diamond as a child Workflow
/// (its first node takes three seconds, so the child is still running
/// when the page opens it) and whose `fan` node is an array of three.
const NESTED: &str = "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata: {name: nested}
spec:
  inputs: {nums: [1, 2, 3]}
  nodes:
    - id: prepare
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo ready']}}
    - id: inner
      dependsOn: [prepare]
      workflow:
        nodes:
          - id: first
            task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'sleep 3']}}
          - id: left
            dependsOn: [first]
            task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo left']}}
          - id: right
            dependsOn: [first]
            task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo right']}}
          - id: last
            dependsOn: [left, right]
            task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo last']}}
    - id: fan
      dependsOn: [prepare]
      inputs: {num: '${item}'}
      array:
        over: ${inputs.nums}
        task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo $WEFT_INPUT_NUM']}}
";

/// Two nodes, deleted by its TTL a second after it succeeds: afterwards
/// it is only in the execution history (`weft dev` keeps one in SQLite).
const SHORT_LIVED: &str = "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata: {name: hist-ttl, labels: {suite: history}}
spec:
  ttlStrategy: {secondsAfterCompletion: 1}
  archiveLogs: true
  nodes:
    - id: first
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo one']}}
    - id: second
      dependsOn: [first]
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo two']}}
";

/// A workflow holding the namespace's mutex `db` for a while (long
/// enough for the Locks page to see it and a second one line up).
fn mutex_db(name: &str, secs: u32) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata: {{name: {name}}}
spec:
  synchronization: {{mutex: {{name: db}}}}
  nodes:
    - id: work
      task: {{type: pod, config: {{image: busybox:1.36, command: [sh, -c, 'sleep {secs}']}}}}
"
    )
}

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

/// A node's stored artifacts in its panel: name, kind, size and digest,
/// and a download through the data proxy (`weft dev`'s local repository
/// answers a path on the server, which the panel shows).
async fn node_panel_lists_artifacts(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    let task = json!({"type": "pod", "config": {"podSpec": {
        "volumes": [{"name": "work", "emptyDir": {}}],
        "containers": [{"name": "main", "image": "busybox:1.36",
            "volumeMounts": [{"name": "work", "mountPath": "/work"}],
            "command": ["sh", "-c", "printf 'hello\\n' > /work/out.txt"]}]}},
        "outputs": {"artifacts": [{"name": "out", "path": "/work/out.txt"}]}});
    let wf = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "with-artifacts"}, "spec": {"nodes": [{"id": "make", "task": task}]}});
    kubectl_create(&dev.kubeconfig, &wf.to_string()).await;
    c.goto(&format!(
        "{}workflows/default/with-artifacts/nodes/make",
        dev.console
    ))
    .await?;
    until(
        c,
        "the artifact is listed",
        "return document.querySelector('[data-artifact=out]') !== null;",
    )
    .await?;
    let row = text(c, "[data-artifact=out]").await?;
    anyhow::ensure!(
        row.contains("out") && row.contains("6 B") && row.contains("sha256:"),
        "name, size and digest: {row:?}"
    );
    find(c, "[data-artifact=out] [data-testid=artifact-download]")
        .await?
        .click()
        .await?;
    until(
        c,
        "the download link answers",
        "return document.querySelector('[data-artifact=out]')?.textContent.includes('on the server: /');",
    )
    .await?;
    let row = text(c, "[data-artifact=out]").await?;
    anyhow::ensure!(row.contains("/make/0/out"), "the key's path: {row:?}");
    nothing_left_the_host(c).await
}

/// A node whose pod is gone (pod GC) still shows its log: the archived
/// copy (`archiveLogs`) that StreamNodeLogs serves from the store.
async fn archived_log_shows_after_pod_gc(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    let task = json!({"type": "pod", "config": {"image": "busybox:1.36",
        "command": ["sh", "-c", "echo archived hello"]}});
    let wf = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "archived"},
        "spec": {"archiveLogs": true, "podGC": {"strategy": "OnPodCompletion"},
                 "nodes": [{"id": "say", "task": task}]}});
    kubectl_create(&dev.kubeconfig, &wf.to_string()).await;
    let mut gone = false;
    for _ in 0..150 {
        let pods = common::kubectl_ok(
            &dev.kubeconfig,
            &[
                "get",
                "pods",
                "-l",
                "weft.dev/workflow=archived",
                "-o",
                "name",
            ],
            None,
        )
        .await;
        let phase = common::kubectl_ok(
            &dev.kubeconfig,
            &[
                "get",
                "workflow",
                "archived",
                "-o",
                "jsonpath={.status.phase}",
            ],
            None,
        )
        .await;
        if phase == "Succeeded" && pods.trim().is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    anyhow::ensure!(gone, "the workflow did not succeed with its pod collected");
    c.goto(&format!(
        "{}workflows/default/archived/nodes/say",
        dev.console
    ))
    .await?;
    until(
        c,
        "the archived log shows",
        "return document.querySelector('[data-testid=node-log]')?.textContent.includes('archived hello');",
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

/// The Plugins link leads (in place) to the loaded plugins: the pod task
/// plugin and the auth-token middleware with their digests, and the pod
/// plugin's calls counted from the workflows run so far.
async fn plugins_page_lists_the_loaded_plugins(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    c.goto(&dev.console).await?;
    find(c, "[data-testid=workflow-row]").await?;
    c.execute("window.__sameDocument = true;", vec![]).await?;
    find(c, "nav[aria-label=Main] a[href='/plugins']")
        .await?
        .click()
        .await?;
    let pod = "[data-testid=plugin-row][data-name=pod]";
    let auth = "[data-testid=plugin-row][data-name=auth-token]";
    find(c, pod).await?;
    find(c, auth).await?;
    let here = c
        .execute(
            "return [location.pathname, window.__sameDocument === true,\
               document.querySelector(\"nav a[href='/plugins']\").getAttribute('aria-current')];",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        here == json!(["/plugins", true, "page"]),
        "the link navigates in place and marks itself current: {here}"
    );
    let row = |css: &str| {
        format!(
            "const r = document.querySelector(\"{css}\");\
             const t = id => r.querySelector(`[data-testid=${{id}}]`);\
             return {{kind: t('plugin-kind').textContent, types: t('plugin-task-types').textContent,\
                     short: t('plugin-digest').textContent, digest: t('plugin-digest').title}};"
        )
    };
    let digest_ok = |r: &Value| {
        let (short, full) = (r["short"].as_str(), r["digest"].as_str());
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        match (
            short.and_then(|s| s.strip_prefix("sha256:")),
            full.and_then(|s| s.strip_prefix("sha256:")),
        ) {
            (Some(s), Some(f)) => hex(s, 12) && hex(f, 64) && f.starts_with(s),
            _ => false,
        }
    };
    let p = c.execute(&row(pod), vec![]).await?;
    anyhow::ensure!(
        p["kind"] == "task"
            && p["types"]
                .as_str()
                .is_some_and(|t| t.split(", ").any(|t| t == "pod")),
        "the pod plugin's row: {p}"
    );
    anyhow::ensure!(digest_ok(&p), "the pod plugin's digest: {p}");
    let a = c.execute(&row(auth), vec![]).await?;
    anyhow::ensure!(a["kind"] == "middleware", "the auth-token row: {a}");
    anyhow::ensure!(digest_ok(&a), "the auth-token digest: {a}");
    // The page re-lists every 5 s; the workflows of the earlier scenarios
    // called the pod plugin.
    until(
        c,
        "the pod plugin's calls are counted",
        &format!(
            "return Number(document.querySelector(\"{pod} [data-testid=plugin-calls]\")\
               ?.textContent) > 0;"
        ),
    )
    .await?;
    nothing_left_the_host(c).await
}

/// A workflow's timeline once it succeeded: one Succeeded bar per node,
/// each inside its track, and every node's bar starting no earlier than
/// the bars of the nodes it depends on end (the dependencies are read from
/// the page's own graph). With `instant` nodes (that took no time) a
/// dependency's bar may be drawn past its end: a bar is at least
/// max(2 px, 0.2 % of the track) wide.
async fn timeline_in_order(c: &Client, dev: &Dev, name: &str, instant: bool) -> anyhow::Result<()> {
    c.goto(&format!("{}workflows/default/{name}", dev.console))
        .await?;
    until(
        c,
        &format!("{name} shows Succeeded"),
        "return document.querySelector('[data-testid=workflow-phase]')?.textContent.includes('Succeeded');",
    )
    .await?;
    find(c, "[data-testid=dag-edge]").await?;
    let edges = c
        .execute(
            "return [...document.querySelectorAll('[data-testid=dag-edge]')]\
               .map(e => [e.dataset.from, e.dataset.to]);",
            vec![],
        )
        .await?;
    let nodes = c
        .execute(
            "return [...document.querySelectorAll('[data-testid=dag-node]')]\
               .map(n => n.dataset.node).sort();",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        nodes == json!(["join", "left", "right", "split"])
            && edges.as_array().is_some_and(|e| e.len() == 4),
        "{name}'s graph: {nodes} {edges}"
    );
    find(c, "[data-testid=view-timeline]")
        .await?
        .click()
        .await?;
    until(
        c,
        "the timeline tab is selected and shows four bars",
        "return document.querySelector('[data-testid=view-timeline]').getAttribute('aria-selected') === 'true'\
           && document.querySelectorAll('[data-testid=timeline-bar]').length === 4\
           && !document.querySelector('[data-testid=dag-node]');",
    )
    .await?;
    let bars = c
        .execute(
            "const out = {};\
             for (const b of document.querySelectorAll('[data-testid=timeline-bar]')) {\
               const r = b.getBoundingClientRect(), t = b.parentElement.getBoundingClientRect();\
               out[b.dataset.node] = {phase: b.dataset.phase, left: r.left, right: r.right,\
                 trackLeft: t.left, trackRight: t.right};\
             }\
             return out;",
            vec![],
        )
        .await?;
    let bars = bars
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("bars: {bars}"))?;
    let mut names: Vec<&str> = bars.keys().map(String::as_str).collect();
    names.sort();
    anyhow::ensure!(
        names == ["join", "left", "right", "split"],
        "one bar per node: {names:?}"
    );
    let f = |b: &Value, k: &str| b[k].as_f64().unwrap_or(f64::NAN);
    for (node, b) in bars {
        anyhow::ensure!(b["phase"] == "Succeeded", "{node}'s bar: {b}");
        anyhow::ensure!(
            f(b, "left") >= f(b, "trackLeft") - 0.5
                && f(b, "right") <= f(b, "trackRight") + 0.5
                && f(b, "right") > f(b, "left"),
            "{node}'s bar lies in its track: {b}"
        );
    }
    for e in edges.as_array().into_iter().flatten() {
        let (from, to) = (e[0].as_str().unwrap_or(""), e[1].as_str().unwrap_or(""));
        let (Some(a), Some(b)) = (bars.get(from), bars.get(to)) else {
            anyhow::bail!("the edge {e} joins nodes without bars");
        };
        let track = f(a, "trackRight") - f(a, "trackLeft");
        let slack = if instant {
            (track * 0.002).max(2.0) + 0.5
        } else {
            0.5
        };
        anyhow::ensure!(
            f(b, "left") >= f(a, "left") - 0.5 && f(b, "left") >= f(a, "right") - slack,
            "{name}: {to} (from {:.1}px) starts before {from} ends ({:.1}px)",
            f(b, "left"),
            f(a, "right")
        );
    }
    nothing_left_the_host(c).await
}

/// The diamond of the earlier scenario ran within one second (status
/// times have whole seconds): its bars are all but empty, yet one per
/// node and inside their tracks. A diamond whose nodes take a second each
/// then shows the order exactly: each bar starts where its dependencies'
/// bars end or later, and after them.
async fn timeline_orders_the_diamond(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    kubectl_create(&dev.kubeconfig, TIMED).await;
    timeline_in_order(c, dev, "diamond-live", true).await?;
    timeline_in_order(c, dev, "timed", false).await?;
    let starts = c
        .execute(
            "const l = n => document.querySelector(`[data-testid=timeline-bar][data-node=${n}]`)\
               .getBoundingClientRect().left;\
             return [l('split') < l('left'), l('split') < l('right'), l('left') < l('join'), l('right') < l('join')];",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        starts == json!([true, true, true, true]),
        "a node that waited for a one-second node starts later: {starts}"
    );
    Ok(())
}

/// Keyboard only: Tab to the workflow list, arrows to the diamond, Enter
/// opens it; Tab into the graph, an arrow to the next rank, Enter opens
/// that node's panel and Escape closes it, the focus back on the box.
/// Whatever has the focus shows it.
async fn keyboard_opens_and_closes(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    c.goto(&dev.console).await?;
    let target = "[data-testid=workflow-row][data-name=diamond-live]";
    find(c, target).await?;
    let first = tab_to(c, "workflow-row").await?;
    visibly_focused(c, "the first row Tab reaches").await?;
    let want = c
        .execute(
            &format!("return Number(document.querySelector(\"{target}\").dataset.index);"),
            vec![],
        )
        .await?
        .as_i64();
    let mut at = c
        .execute(
            "return Number(document.activeElement.dataset.index);",
            vec![],
        )
        .await?
        .as_i64();
    let (Some(want), Some(start)) = (want, at) else {
        anyhow::bail!("row indices: {first}");
    };
    let key = if want > start { Key::Down } else { Key::Up };
    for _ in 0..want.abs_diff(start) {
        let before = at.unwrap_or(-1);
        press(c, key).await?;
        at = c
            .execute(
                "return Number(document.activeElement.dataset.index);",
                vec![],
            )
            .await?
            .as_i64();
        anyhow::ensure!(
            at.is_some_and(|i| i.abs_diff(before) == 1),
            "an arrow moves the focus one row: {before} to {at:?}"
        );
    }
    let f = c.execute(FOCUSED, vec![]).await?;
    anyhow::ensure!(f["name"] == "diamond-live", "arrows reach the diamond: {f}");
    visibly_focused(c, "the diamond's row").await?;
    press(c, Key::Enter).await?;
    until(
        c,
        "Enter opens the workflow",
        "return location.pathname === '/workflows/default/diamond-live'\
           && !!document.querySelector('[data-testid=dag-node]');",
    )
    .await?;

    let f = tab_to(c, "dag-node").await?;
    anyhow::ensure!(f["node"] == "split", "Tab reaches the first box: {f}");
    visibly_focused(c, "the split box").await?;
    press(c, Key::Down).await?;
    let f = c.execute(FOCUSED, vec![]).await?;
    let node = f["node"].as_str().unwrap_or("").to_string();
    anyhow::ensure!(
        node == "left" || node == "right",
        "Down goes to the next rank: {f}"
    );
    visibly_focused(c, &format!("the {node} box")).await?;
    let split_box = c
        .execute(
            "return getComputedStyle(document.querySelector(\
               '[data-testid=dag-node][data-node=split] .dag-box')).strokeWidth;",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        split_box != json!("3px"),
        "the box left behind no longer looks focused: {split_box}"
    );
    press(c, Key::Enter).await?;
    let panel = format!("[data-testid=node-panel][data-node={node}]");
    find(c, &panel).await?;
    let path = c.execute("return location.pathname;", vec![]).await?;
    anyhow::ensure!(
        path == json!(format!("/workflows/default/diamond-live/nodes/{node}")),
        "Enter opens the node: {path}"
    );
    until(
        c,
        "the panel shows the node Succeeded",
        "return document.querySelector('[data-testid=node-phase]')?.textContent.includes('Succeeded');",
    )
    .await?;
    press(c, Key::Escape).await?;
    until(
        c,
        "Escape closes the panel",
        "return !document.querySelector('[data-testid=node-panel]')\
           && location.pathname === '/workflows/default/diamond-live';",
    )
    .await?;
    let f = c.execute(FOCUSED, vec![]).await?;
    anyhow::ensure!(
        f["testid"] == "dag-node" && f["node"] == node.as_str(),
        "the focus stays on the box: {f}"
    );
    visibly_focused(c, "the box after Escape").await?;
    nothing_left_the_host(c).await
}

/// The nodes drawn inside the open group of `inner`: path, id, phase,
/// and whether the box lies inside the group's body.
const INNER_NODES: &str = "const g = document.querySelector('[data-testid=dag-group][data-group=inner]');\
    if (!g) return null;\
    const body = g.querySelector('.dag-group-body').getBoundingClientRect();\
    const within = r => r.left >= body.left - 1 && r.right <= body.right + 1\
                     && r.top >= body.top - 1 && r.bottom <= body.bottom + 1;\
    return [...g.querySelectorAll('.dag-group-inner [data-testid=dag-node]')].map(n => ({\
      path: n.dataset.node, id: n.dataset.id, phase: n.dataset.phase,\
      inside: within(n.getBoundingClientRect())})).sort((a, b) => a.path < b.path ? -1 : 1);";

/// Focuses the DAG box at `path` (as a click or Tab would) for the keys
/// that follow.
async fn focus_box(c: &Client, path: &str) -> anyhow::Result<()> {
    let found = c
        .execute(
            "const b = document.querySelector(`[data-testid=dag-node][data-node=\"${arguments[0]}\"]`);\
             b?.focus(); return document.activeElement === b;",
            vec![json!(path)],
        )
        .await?;
    anyhow::ensure!(found == json!(true), "no box {path} to focus");
    Ok(())
}

/// A sub-workflow node opens in place: its child Workflow's nodes and
/// edges are drawn inside the parent's graph, in a group, and follow the
/// child live until they all succeed; `-` inside the group closes it, the
/// focus back on its header. The open group is in the URL (a deep link
/// opens it; the mouse closes it), a node inside opens on the child's own
/// page, and the array node opens to its items and closes by key too.
async fn sub_workflow_opens_in_place(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    kubectl_create(&dev.kubeconfig, NESTED).await;
    let page = format!("{}workflows/default/nested", dev.console);
    c.goto(&page).await?;
    // Expandable once the child Workflow exists; still the link to its page.
    find(
        c,
        "[data-testid=dag-node][data-node=inner][aria-expanded=false]",
    )
    .await?;
    let child = c
        .execute(
            "return document.querySelector('[data-node=inner] [data-testid=child-workflow-link]')\
               ?.getAttribute('href');",
            vec![],
        )
        .await?;
    let child = child
        .as_str()
        .and_then(|h| h.strip_prefix("/workflows/default/"))
        .ok_or_else(|| anyhow::anyhow!("the child's link: {child}"))?
        .to_string();
    c.execute("window.__sameDocument = true;", vec![]).await?;

    focus_box(c, "inner").await?;
    press(c, '+').await?;
    until(
        c,
        "+ opens the group with the child's four nodes",
        &format!("const n = (() => {{ {INNER_NODES} }})(); return n !== null && n.length === 4;"),
    )
    .await?;
    let nodes = c.execute(INNER_NODES, vec![]).await?;
    let ids: Vec<&str> = nodes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str())
        .collect();
    anyhow::ensure!(
        ids == ["first", "last", "left", "right"]
            && nodes
                .as_array()
                .into_iter()
                .flatten()
                .all(|n| n["inside"] == true
                    && n["path"].as_str()
                        == Some(&format!("inner/{}", n["id"].as_str().unwrap_or(""))[..])),
        "the child's nodes, inside the group: {nodes}"
    );
    anyhow::ensure!(
        nodes
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["phase"] != "Succeeded"),
        "the child is still running when opened: {nodes}"
    );
    let edges = c
        .execute(
            "return [...document.querySelectorAll('[data-group=inner] [data-testid=dag-edge]')]\
               .map(e => e.dataset.from + '>' + e.dataset.to).sort();",
            vec![],
        )
        .await?;
    let want = json!([
        "inner/first>inner/left",
        "inner/first>inner/right",
        "inner/left>inner/last",
        "inner/right>inner/last"
    ]);
    anyhow::ensure!(edges == want, "the child's edges {edges}, want {want}");
    let state = c
        .execute(
            "return [location.search, document.activeElement?.dataset?.node ?? null,\
               document.querySelector('[data-testid=dag-node][data-node=inner]').getAttribute('aria-expanded'),\
               document.querySelector('[data-group=inner] [data-testid=child-workflow-link]') !== null];",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        state == json!(["?expand=inner", "inner", "true", true]),
        "open in the URL, the focus kept on the header, the child's link kept: {state}"
    );
    until(
        c,
        "the child's nodes turn Succeeded without a reload",
        &format!(
            "const n = (() => {{ {INNER_NODES} }})();\
             return n !== null && n.length === 4 && n.every(x => x.phase === 'Succeeded');"
        ),
    )
    .await?;

    // Into the group by arrow, then `-` closes it from inside.
    press(c, Key::Down).await?;
    let f = c.execute(FOCUSED, vec![]).await?;
    anyhow::ensure!(
        f["node"] == "inner/first",
        "Down from the header reaches the child's first node: {f}"
    );
    visibly_focused(c, "a node inside the group").await?;
    press(c, '-').await?;
    until(
        c,
        "- closes the group",
        "return !document.querySelector('[data-testid=dag-group]')\
           && !document.querySelector('[data-node^=\"inner/\"]')\
           && location.search === ''\
           && document.querySelector('[data-node=inner]').getAttribute('aria-expanded') === 'false';",
    )
    .await?;
    let f = c.execute(FOCUSED, vec![]).await?;
    anyhow::ensure!(f["node"] == "inner", "the focus is back on the header: {f}");
    let n = c
        .execute(
            "return [...document.querySelectorAll('[data-testid=dag-node]')].map(n => n.dataset.node).sort();",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        n == json!(["fan", "inner", "prepare"]),
        "closed, one box again: {n}"
    );

    // The array: Space opens it to its three items, and closes it.
    focus_box(c, "fan").await?;
    press(c, ' ').await?;
    until(
        c,
        "Space opens the array to three succeeded items",
        "const chips = [...document.querySelectorAll('[data-node=fan] .dag-chips rect')];\
         return chips.length === 3 && chips.every(r => r.dataset.phase === 'Succeeded');",
    )
    .await?;
    press(c, ' ').await?;
    until(
        c,
        "Space closes the array",
        "return !document.querySelector('[data-node=fan] .dag-chips')\
           && document.querySelector('[data-node=fan]').getAttribute('aria-expanded') === 'false';",
    )
    .await?;
    let same = c
        .execute("return window.__sameDocument === true;", vec![])
        .await?;
    anyhow::ensure!(same == json!(true), "the page reloaded");

    // A deep link opens the group; the toggle closes it with the mouse.
    c.goto(&format!("{page}?expand=inner")).await?;
    until(
        c,
        "the linked group opens, its nodes Succeeded",
        &format!(
            "const n = (() => {{ {INNER_NODES} }})();\
             return n !== null && n.length === 4 && n.every(x => x.phase === 'Succeeded');"
        ),
    )
    .await?;
    find(c, "[data-testid=dag-node][data-node=inner] [data-toggle]")
        .await?
        .click()
        .await?;
    until(
        c,
        "a click on the toggle closes the group",
        "return !document.querySelector('[data-testid=dag-group]') && location.search === '';",
    )
    .await?;

    // A node inside opens on its own workflow's page.
    c.goto(&format!("{page}?expand=inner")).await?;
    find(c, "[data-testid=dag-node][data-node='inner/last']").await?;
    focus_box(c, "inner/last").await?;
    press(c, Key::Enter).await?;
    find(c, "[data-testid=node-panel][data-node=last]").await?;
    let path = c.execute("return location.pathname;", vec![]).await?;
    anyhow::ensure!(
        path == json!(format!("/workflows/default/{child}/nodes/last")),
        "Enter on a child's node opens it on the child's page: {path}"
    );
    nothing_left_the_host(c).await
}

/// A run its TTL deleted, through the History page: the name-prefix and
/// phase filters (kept in the URL, so a reload keeps them) list it as
/// archived, a start-time bound past it lists nothing, and its row opens
/// the workflow page as for a live run: the DAG with its nodes' phases,
/// the archived badge, a node's panel with its attempts' history, spec
/// and archived log, the timeline. The page by name alone (no uid) shows the archived copy too
/// once its watch finds the Workflow gone, without an error.
async fn history_opens_an_archived_run(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    kubectl_create(&dev.kubeconfig, SHORT_LIVED).await;
    let mut gone = false;
    for _ in 0..600 {
        let out = common::kubectl(
            &dev.kubeconfig,
            &["get", "workflow", "hist-ttl", "-o", "name"],
            None,
        )
        .await;
        if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::ensure!(gone, "hist-ttl was not deleted by its TTL within 120 s");

    c.goto(&dev.console).await?;
    find(c, "[data-testid=workflow-row]").await?;
    c.execute("window.__sameDocument = true;", vec![]).await?;
    find(c, "nav[aria-label=Main] a[href='/history']")
        .await?
        .click()
        .await?;
    find(c, "[data-testid=history-prefix]")
        .await?
        .send_keys("hist-")
        .await?;
    find(c, "[data-testid=history-phase]")
        .await?
        .select_by_value("Succeeded")
        .await?;
    let row = "[data-testid=history-row][data-name=hist-ttl]";
    until(
        c,
        "the filtered history lists hist-ttl as archived, and only matching runs",
        &format!(
            "const rows = [...document.querySelectorAll('[data-testid=history-row]')];\
             const r = document.querySelector(\"{row}\");\
             const q = new URLSearchParams(location.search);\
             return q.get('prefix') === 'hist-' && q.get('phase') === 'Succeeded'\
               && r !== null && r.dataset.archived === 'true' && r.dataset.phase === 'Succeeded'\
               && r.querySelector('[data-testid=archived-marker]') !== null\
               && rows.every(x => x.dataset.name.startsWith('hist-') && x.dataset.phase === 'Succeeded');"
        ),
    )
    .await?;
    let here = c
        .execute(
            "return [location.pathname, window.__sameDocument === true,\
               document.querySelector(\"nav a[href='/history']\").getAttribute('aria-current')];",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        here == json!(["/history", true, "page"]),
        "the History link navigates in place and marks itself current: {here}"
    );

    // The URL is the filtered view: a reload keeps the filters.
    c.refresh().await?;
    find(c, row).await?;
    let form = c
        .execute(
            "const v = id => document.querySelector(`[data-testid=${id}]`).value;\
             return [v('history-prefix'), v('history-phase')];",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        form == json!(["hist-", "Succeeded"]),
        "the reloaded form shows the URL's filters: {form}"
    );

    // A start-time bound after every run lists nothing, and says so.
    let filtered = c.current_url().await?;
    c.goto(&format!(
        "{}history?prefix=hist-&after=2999-01-01T00%3A00%3A00Z",
        dev.console
    ))
    .await?;
    find(c, "[data-testid=history-empty]").await?;
    let after = c
        .execute(
            "return [document.querySelectorAll('[data-testid=history-row]').length,\
               document.querySelector('[data-testid=history-after]').value];",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        after[0] == 0
            && after[1]
                .as_str()
                .is_some_and(|v| v.starts_with("2999-01-01T") || v.starts_with("2998-12-31T")),
        "no run started after 2999, the bound shown in local time: {after}"
    );

    // The row opens the archived run by its uid.
    c.goto(filtered.as_str()).await?;
    let uid = find(c, row)
        .await?
        .attr("data-uid")
        .await?
        .unwrap_or_default();
    anyhow::ensure!(!uid.is_empty(), "the row carries the run's uid");
    find(c, row).await?.click().await?;
    until(
        c,
        "the row opens the archived run's page, its nodes Succeeded",
        "const n = [...document.querySelectorAll('[data-testid=dag-node]')];\
         return location.pathname === '/workflows/default/hist-ttl'\
           && n.length === 2 && n.every(x => x.dataset.phase === 'Succeeded')\
           && document.querySelector('[data-testid=archived-badge]') !== null;",
    )
    .await?;
    let page = c
        .execute(
            "return {search: location.search,\
               phase: document.querySelector('[data-testid=workflow-phase]').textContent,\
               nodes: [...document.querySelectorAll('[data-testid=dag-node]')].map(n => n.dataset.node).sort(),\
               edges: [...document.querySelectorAll('[data-testid=dag-edge]')].map(e => e.dataset.from + '>' + e.dataset.to),\
               actions: [...document.querySelectorAll('[data-testid^=action-]')].map(b => b.dataset.testid),\
               error: document.querySelector('[data-testid=error]')?.textContent ?? null};",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        page["search"] == json!(format!("?uid={uid}"))
            && page["phase"] == "Succeeded"
            && page["nodes"] == json!(["first", "second"])
            && page["edges"] == json!(["first>second"])
            && page["actions"] == json!(["action-resubmit"])
            && page["error"].is_null(),
        "the archived run's page: {page}"
    );

    // A node's panel: its record and its attempt's history.
    focus_box(c, "second").await?;
    press(c, Key::Enter).await?;
    find(c, "[data-testid=node-panel][data-node=second]").await?;
    until(
        c,
        "the panel shows the node Succeeded with its history",
        "const ev = [...document.querySelectorAll('[data-testid=node-history-event]')];\
         return document.querySelector('[data-testid=node-phase]')?.textContent.includes('Succeeded')\
           && ev.some(e => e.dataset.attempt === '1' && e.dataset.phase === 'Succeeded')\
           && ev.some(e => e.dataset.phase === 'Running');",
    )
    .await?;
    // The rest of the panel as for a live run, from the history: the
    // node's spec and its archived log; only its Events are gone.
    until(
        c,
        "the archived panel shows the node's spec and log, and says where its Events went",
        "const t = id => document.querySelector(`[data-testid=${id}]`)?.textContent ?? '';\
         return t('node-log').includes('two') && t('node-spec').includes('echo two')\
           && t('node-events').includes('go with their Workflow');",
    )
    .await?;
    let path = c
        .execute("return location.pathname + location.search;", vec![])
        .await?;
    anyhow::ensure!(
        path == json!(format!(
            "/workflows/default/hist-ttl/nodes/second?uid={uid}"
        )),
        "the node's link keeps the uid: {path}"
    );
    press(c, Key::Escape).await?;
    find(c, "[data-testid=view-timeline]")
        .await?
        .click()
        .await?;
    until(
        c,
        "the timeline has a Succeeded bar per node",
        "const b = [...document.querySelectorAll('[data-testid=timeline-bar]')];\
         return b.length === 2 && b.every(x => x.dataset.phase === 'Succeeded');",
    )
    .await?;

    // By name alone, with a node's panel open: the watch finds the
    // Workflow gone and the page shows the archived copy instead, with no
    // error (the panel asks nothing of the live Workflow) and no retrying.
    c.goto(&format!(
        "{}workflows/default/hist-ttl/nodes/first",
        dev.console
    ))
    .await?;
    until(
        c,
        "the page by name shows the archived run and the node's history",
        "return document.querySelector('[data-testid=archived-badge]') !== null\
           && document.querySelectorAll('[data-testid=dag-node][data-phase=Succeeded]').length === 2\
           && document.querySelector('.watch-status')?.textContent === 'archived'\
           && document.querySelector('[data-testid=node-phase]')?.textContent.includes('Succeeded')\
           && [...document.querySelectorAll('[data-testid=node-history-event]')]\
                .some(e => e.dataset.phase === 'Succeeded');",
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let error = c
        .execute(
            "return document.querySelector('[data-testid=error]')?.textContent ?? null;",
            vec![],
        )
        .await?;
    anyhow::ensure!(error.is_null(), "no error for a gone Workflow: {error}");
    nothing_left_the_host(c).await
}

/// What the Locks page shows of `mutex/db`: its heading and count, the
/// holders, the waiters in their line (position, name, priority), every
/// workflow link, and whether the names read in that order.
const MUTEX_DB: &str = "const s = document.querySelector(\"[data-testid=lock][data-lock='mutex/db']\");\
    if (!s) return null;\
    const t = s.innerText;\
    return {title: s.querySelector('h2')?.textContent,\
      held: s.querySelector('[data-testid=lock-held]')?.textContent,\
      holders: [...s.querySelectorAll('[data-testid=lock-holder]')].map(r => r.dataset.workflow),\
      waiters: [...s.querySelectorAll('[data-testid=lock-waiter]')].map(w =>\
        [w.dataset.position, w.dataset.workflow, w.querySelector('[data-testid=waiter-priority]')?.textContent]),\
      links: [...s.querySelectorAll('[data-testid=claim-workflow]')].map(a => [a.textContent, a.getAttribute('href')]),\
      inOrder: t.indexOf('mutex/db') >= 0 && t.indexOf('mutex/db') < t.indexOf('lock-holder')\
        && t.indexOf('lock-holder') < t.indexOf('lock-waiter')};";

/// The Locks link leads (in place) to the default namespace's locks: a
/// workflow holding the mutex `db` shows as its holder, and a second one
/// created then appears, without a reload, first in its line; the
/// waiter's name opens its workflow; the workflow list's Lock column
/// says which of the two holds `mutex/db` and which waits for it.
async fn locks_page_shows_holder_and_line(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    kubectl_create(&dev.kubeconfig, &mutex_db("lock-holder", 25)).await;
    c.goto(&dev.console).await?;
    find(c, "[data-testid=workflow-row]").await?;
    c.execute("window.__sameDocument = true;", vec![]).await?;
    find(c, "nav[aria-label=Main] a[href='/locks']")
        .await?
        .click()
        .await?;
    until(
        c,
        "mutex/db shows lock-holder holding it",
        &format!(
            "const m = (() => {{ {MUTEX_DB} }})();\
             return m !== null && m.held === 'held 1/1' && m.holders.join() === 'lock-holder';"
        ),
    )
    .await?;
    kubectl_create(&dev.kubeconfig, &mutex_db("lock-waiter", 1)).await;
    until(
        c,
        "lock-waiter lines up behind lock-holder without a reload",
        &format!(
            "const m = (() => {{ {MUTEX_DB} }})();\
             return m !== null && m.holders.join() === 'lock-holder' && m.waiters.length === 1;"
        ),
    )
    .await?;
    let m = c.execute(MUTEX_DB, vec![]).await?;
    anyhow::ensure!(
        m["title"] == "mutex/db"
            && m["held"] == "held 1/1"
            && m["holders"] == json!(["lock-holder"])
            && m["waiters"] == json!([["1", "lock-waiter", "priority 0"]])
            && m["links"]
                == json!([
                    ["lock-holder", "/workflows/default/lock-holder"],
                    ["lock-waiter", "/workflows/default/lock-waiter"]
                ])
            && m["inOrder"] == true,
        "mutex/db, its holder and its waiter in line: {m}"
    );
    let here = c
        .execute(
            "return [location.pathname + location.search, window.__sameDocument === true,\
               document.querySelector(\"nav a[href='/locks']\").getAttribute('aria-current'),\
               document.querySelector('[data-testid=error]')?.textContent ?? null];",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        here == json!(["/locks", true, "page", null]),
        "the Locks link navigates in place, marks itself current, no error: {here}"
    );
    // The workflow list says the same in its Lock column, then back.
    find(c, "nav[aria-label=Main] a:first-child")
        .await?
        .click()
        .await?;
    until(
        c,
        "the list's Lock column: lock-holder holds mutex/db, lock-waiter waits for it",
        "const cell = n => document.querySelector(\
           `[data-testid=workflow-row][data-name=${n}] [data-testid=workflow-lock]`);\
         const h = cell('lock-holder'), w = cell('lock-waiter');\
         return window.__sameDocument === true && !!h && !!w\
           && h.textContent === 'holds mutex/db'\
           && w.textContent === 'waits for mutex/db'\
           && w.title.startsWith('waiting for mutex/db, held by lock-holder');",
    )
    .await?;
    find(c, "nav[aria-label=Main] a[href^='/locks']")
        .await?
        .click()
        .await?;
    find(
        c,
        "[data-testid=lock-waiter][data-workflow=lock-waiter] [data-testid=claim-workflow]",
    )
    .await?
    .click()
    .await?;
    until(
        c,
        "the waiter's name opens its workflow in place",
        "return location.pathname === '/workflows/default/lock-waiter'\
           && window.__sameDocument === true\
           && !!document.querySelector('[data-testid=dag-node][data-node=work]');",
    )
    .await?;
    nothing_left_the_host(c).await
}

/// The theme button flips <html data-theme> and the page's colours, and
/// the choice is remembered across a reload.
async fn theme_toggle_switches_and_persists(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    c.goto(&dev.console).await?;
    find(c, "[data-testid=workflow-row]").await?;
    let look = "return {theme: document.documentElement.dataset.theme,\
                  bg: getComputedStyle(document.body).backgroundColor,\
                  saved: localStorage.getItem('weft.theme'),\
                  button: document.querySelector('[data-testid=theme-toggle]').textContent};";
    let before = c.execute(look, vec![]).await?;
    let old = before["theme"].as_str().unwrap_or("").to_string();
    anyhow::ensure!(
        old == "light" || old == "dark",
        "a theme applies from the start: {before}"
    );
    let new = if old == "dark" { "light" } else { "dark" };
    find(c, "[data-testid=theme-toggle]").await?.click().await?;
    let after = c.execute(look, vec![]).await?;
    anyhow::ensure!(
        after["theme"] == new && after["saved"] == new,
        "the toggle switches to {new} and remembers it: {before} then {after}"
    );
    anyhow::ensure!(
        after["bg"] != before["bg"],
        "the background changes: {before} then {after}"
    );
    // The dark background is the darker one.
    let lum = |v: &Value| -> f64 {
        v.as_str()
            .unwrap_or("")
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .split(|c: char| !c.is_ascii_digit() && c != '.')
            .filter_map(|n| n.parse::<f64>().ok())
            .take(3)
            .sum()
    };
    let (dark, light) = if new == "dark" {
        (&after, &before)
    } else {
        (&before, &after)
    };
    anyhow::ensure!(
        lum(&dark["bg"]) < lum(&light["bg"]),
        "dark is darker: {dark} vs {light}"
    );
    c.refresh().await?;
    find(c, "[data-testid=workflow-row]").await?;
    let reloaded = c.execute(look, vec![]).await?;
    anyhow::ensure!(
        reloaded["theme"] == new
            && reloaded["bg"] == after["bg"]
            && reloaded["button"] == after["button"],
        "the theme survives a reload: {after} then {reloaded}"
    );
    // And back, so the browser is left as it was found.
    find(c, "[data-testid=theme-toggle]").await?.click().await?;
    let back = c.execute(look, vec![]).await?;
    anyhow::ensure!(
        back["theme"] == old.as_str()
            && back["bg"] == before["bg"]
            && back["saved"] == old.as_str(),
        "toggling again restores {old}: {back}"
    );
    nothing_left_the_host(c).await
}

/// The console of an admin port that serves TLS: the page, its files and
/// its gRPC-Web calls all go over https to the same origin, as HTTP/2
/// (ALPN); the token prompt and the live list work as over plain HTTP.
/// A client that offers only HTTP/1.1 by ALPN (an Ingress re-encrypting
/// to its backend, `curl --http1.1`) is served too.
async fn console_over_tls(c: &Client, dev: &Dev) -> anyhow::Result<()> {
    let origin = dev
        .console
        .strip_suffix('/')
        .filter(|o| o.starts_with("https://127.0.0.1:"))
        .ok_or_else(|| anyhow::anyhow!("weft dev printed the console at {}", dev.console))?
        .to_string();
    let hello = std::fs::read_to_string(root().join("examples/hello.yaml"))?;
    let out = kubectl_create(&dev.kubeconfig, &hello).await;
    let name = out
        .split_whitespace()
        .next()
        .and_then(|s| s.strip_prefix("workflow.weft.dev/"))
        .ok_or_else(|| anyhow::anyhow!("kubectl said {out:?}"))?
        .to_string();
    c.goto(&dev.console).await?;
    find(c, "[data-testid=token-input]")
        .await?
        .send_keys(TOKEN)
        .await?;
    find(c, "[data-testid=token-submit]").await?.click().await?;
    let row = format!("[data-testid=workflow-row][data-name='{name}']");
    until(
        c,
        "the submitted workflow's row turns Succeeded",
        &format!("return document.querySelector(\"{row}\")?.dataset.phase === 'Succeeded';"),
    )
    .await?;
    let requests = c
        .execute(
            "return [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]\
               .map(e => ({name: e.name, type: e.initiatorType ?? 'navigation', protocol: e.nextHopProtocol}));",
            vec![],
        )
        .await?;
    let requests = requests.as_array().cloned().unwrap_or_default();
    anyhow::ensure!(
        requests.iter().any(|r| r["type"] == "fetch"
            && r["name"]
                .as_str()
                .is_some_and(|n| n.contains("/weft.admin.v1.AdminService/"))),
        "the gRPC-Web calls are among the requests: {requests:?}"
    );
    for r in &requests {
        anyhow::ensure!(
            r["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("{origin}/")))
                && r["protocol"] == "h2",
            "every request goes to {origin} over HTTP/2: {r}"
        );
    }
    nothing_left_the_host(c).await?;
    let port: u16 = origin.rsplit(':').next().unwrap_or("").parse()?;
    let cert = dev.cert.as_deref().unwrap_or("");
    let (alpn, head, body) = get_over_http1_tls(port, cert).await?;
    anyhow::ensure!(
        alpn.as_deref() == Some(&b"http/1.1"[..])
            && head.starts_with("HTTP/1.1 200")
            && body.contains("<div id=\"root\""),
        "an HTTP/1.1-only client gets the console: ALPN {alpn:?}, {head:?}"
    );
    Ok(())
}

/// GET / over TLS offering only `http/1.1` by ALPN, trusting `cert_pem`:
/// the protocol the server chose, the response head and body.
async fn get_over_http1_tls(
    port: u16,
    cert_pem: &str,
) -> anyhow::Result<(Option<Vec<u8>>, String, String)> {
    use rustls_pki_types::pem::PemObject as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let server = rustls_pki_types::ServerName::try_from("127.0.0.1")?;
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(server, tcp)
        .await?;
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    tls.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await?;
    let mut response = Vec::new();
    // The server may close without close_notify once it answered.
    let _ = tls.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok((alpn, head.to_string(), body.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    // The second `weft dev` serves its admin port (and so the console)
    // over TLS; both start while the browser does.
    let (dev, tls_dev, b) = tokio::join!(weft_dev(false), weft_dev(true), browser());
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
    scenario(c, "artifacts", node_panel_lists_artifacts(c, &dev)).await;
    scenario(c, "archived_log", archived_log_shows_after_pod_gc(c, &dev)).await;
    scenario(c, "plugins", plugins_page_lists_the_loaded_plugins(c, &dev)).await;
    scenario(c, "timeline", timeline_orders_the_diamond(c, &dev)).await;
    scenario(c, "keyboard", keyboard_opens_and_closes(c, &dev)).await;
    scenario(c, "sub_workflow", sub_workflow_opens_in_place(c, &dev)).await;
    scenario(c, "history", history_opens_an_archived_run(c, &dev)).await;
    scenario(c, "locks", locks_page_shows_holder_and_line(c, &dev)).await;
    scenario(c, "theme", theme_toggle_switches_and_persists(c, &dev)).await;
    scenario(c, "tls", console_over_tls(c, &tls_dev)).await;
    b.c.clone().close().await.unwrap();
}
