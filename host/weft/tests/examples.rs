//! Every workflow in examples/ as users run it: through the real `weft
//! run`, each on its own fresh dev cluster, and through `kubectl create -f`
//! (kubectl's YAML reader, not ours) against a running controller (on
//! the real control plane too, `WEFT_TEST_CLUSTER=k8s`). Both
//! must end as its `# expect:` line says, and with the outputs its
//! `# expect-output: NODE {json}` lines name (`workflow`: the workflow's own).

mod common;

use common::examples::{check_through_kubectl, examples, expected_outputs};

use std::path::Path;
use std::process::Command;

use kube::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_behaves_the_same_through_kubectl() {
    let env = common::Env::start().await;
    let kubeconfig = env.dir.path().join("kubeconfig");
    let workflows: Api<weft::api::Workflow> = Api::namespaced(env.client.clone(), &env.ns);
    for example in examples() {
        check_through_kubectl(&kubeconfig, &workflows, &example).await;
    }
    env.stop().await;
}

#[test]
fn every_example_runs_as_it_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for example in examples() {
        let text = std::fs::read_to_string(&example).unwrap();
        let expect = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", example.display()));
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args([
                "run",
                example.to_str().unwrap(),
                "--timeout",
                "120s",
                "--data-dir",
            ])
            .arg(dir.path())
            .current_dir(&root)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = example.file_name().unwrap().to_string_lossy();
        match expect.trim() {
            "Succeeded" => {
                assert!(out.status.success(), "{name} failed:\n{stdout}\n{stderr}");
                assert!(stdout.contains("succeeded in"), "{name}:\n{stdout}");
                // A healthy run says nothing alarming.
                assert!(!stderr.contains("WARN"), "{name}:\n{stderr}");
            }
            "Failed" => {
                assert_eq!(
                    out.status.code(),
                    Some(1),
                    "{name} should fail:\n{stdout}\n{stderr}"
                );
                assert!(stdout.contains("Failed after"), "{name}:\n{stdout}");
            }
            other => panic!("{name}: unknown expectation {other:?}"),
        }
        // The outputs it prints, as `  NODE outputs: {json}`.
        for (node, want) in expected_outputs(&text) {
            let line = stdout
                .lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{node} outputs: ")))
                .unwrap_or_else(|| panic!("{name}: no outputs of {node}:\n{stdout}"));
            let got: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(line).unwrap();
            for (k, v) in &want {
                assert_eq!(got.get(k), Some(v), "{name}: node {node}: {line}");
            }
        }
    }
}
