//! The examples/ as users run them, shared by the dev-cluster and the
//! real-control-plane suites: each is created with `kubectl create -f`
//! (kubectl's YAML reader, not ours) against a running controller and must
//! end as its `# expect:` line says, with the outputs its
//! `# expect-output: NODE {json}` lines name (`workflow`: the workflow's own).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::Api;

pub fn examples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut examples: Vec<_> = std::fs::read_dir(root.join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 8, "{examples:?}");
    examples
}

/// (node, outputs it must include) from `# expect-output:` lines.
pub fn expected_outputs(text: &str) -> Vec<(String, serde_json::Map<String, serde_json::Value>)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# expect-output: "))
        .map(|l| {
            let (node, json) = l.split_once(' ').expect("NODE {json}");
            (
                node.to_string(),
                serde_json::from_str(json).expect("outputs JSON"),
            )
        })
        .collect()
}

/// Creates `example` with kubectl and checks how it ends; returns the
/// Workflow's name.
pub async fn check_through_kubectl(
    kubeconfig: &Path,
    workflows: &Api<weft::api::Workflow>,
    example: &Path,
) -> String {
    let text = std::fs::read_to_string(example).unwrap();
    let name = example.file_name().unwrap().to_string_lossy().to_string();
    let expect = text
        .lines()
        .find_map(|l| l.strip_prefix("# expect: "))
        .unwrap()
        .trim();
    let out = super::kubectl(
        kubeconfig,
        &["create", "-f", example.to_str().unwrap(), "-o", "name"],
        None,
    )
    .await;
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One Workflow, after the templates it launches; or a
    // CronWorkflow, whose first Workflow is followed.
    let created = String::from_utf8_lossy(&out.stdout);
    let wf = match created
        .lines()
        .find_map(|l| l.strip_prefix("workflow.weft.dev/"))
    {
        Some(wf) => wf.to_string(),
        None => {
            let cron = created
                .lines()
                .find_map(|l| l.strip_prefix("cronworkflow.weft.dev/"))
                .unwrap_or_else(|| panic!("{name}: created no Workflow: {created}"));
            first_launch(workflows, kubeconfig, cron).await
        }
    };
    let mut done = None;
    for _ in 0..1200 {
        let w = workflows.get(&wf).await.unwrap();
        if w.status.as_ref().is_some_and(|s| s.phase.is_terminal()) {
            done = Some(w);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = done.unwrap_or_else(|| panic!("{name} ({wf}) did not finish"));
    let status = done.status.as_ref().unwrap();
    assert_eq!(
        format!("{:?}", status.phase),
        expect,
        "{name}: {:#?}",
        status.nodes
    );
    for (node, want) in expected_outputs(&text) {
        let got = match node.as_str() {
            "workflow" => status.outputs.clone().unwrap_or_default(),
            _ => status.nodes[&node].outputs.clone().unwrap_or_default(),
        };
        for (k, v) in &want {
            assert_eq!(got.get(k), Some(v), "{name}: node {node} outputs {got:?}");
        }
    }
    wf
}

/// The first Workflow a CronWorkflow launched; the CronWorkflow is then
/// suspended, so it launches nothing more during the other examples.
async fn first_launch(
    workflows: &Api<weft::api::Workflow>,
    kubeconfig: &Path,
    cron: &str,
) -> String {
    let lp = kube::api::ListParams::default().labels(&format!("weft.dev/cron-workflow={cron}"));
    for _ in 0..300 {
        if let Some(wf) = workflows.list(&lp).await.unwrap().items.first() {
            let patch = r#"{"spec": {"suspend": true}}"#;
            let args = ["patch", "cronworkflow", cron, "--type=merge", "-p", patch];
            assert!(
                super::kubectl(kubeconfig, &args, None)
                    .await
                    .status
                    .success()
            );
            return kube::ResourceExt::name_any(wf);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("cronworkflow {cron} launched nothing in 30 s");
}
