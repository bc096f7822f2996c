//! Every workflow in examples/ through the real `weft run`, each on its own
//! fresh dev cluster: it must end as its `# expect:` line says, with the
//! matching exit code.

use std::path::Path;
use std::process::Command;

#[test]
fn every_example_runs_as_it_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut examples: Vec<_> = std::fs::read_dir(root.join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 7, "{examples:?}");
    for example in examples {
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
    }
}
