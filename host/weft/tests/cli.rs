//! `weft plugin` as a plugin author uses it: the real binary on the real
//! components built from the repo's sources (`make guests`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/port.rs"]
mod port;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The cargo target directory of the scaffolded Rust plugins' own tests:
/// one for every run, outside the work tree (the Makefile's
/// `WEFT_BUILD_CACHE`), so that a later run, from a clean clone too,
/// compiles only the new crate and not its dependencies again.
fn scaffold_target() -> PathBuf {
    let cache = std::env::var_os("WEFT_BUILD_CACHE").map(PathBuf::from);
    let home = || {
        let xdg = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from);
        xdg.unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"))
            .join("weft/build")
    };
    cache.unwrap_or_else(home).join("scaffold")
}

fn pod() -> PathBuf {
    let p = root().join("target/plugins/pod.wasm");
    assert!(p.is_file(), "{} missing: run `make guests`", p.display());
    p
}

fn weft(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run weft")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn inspect_shows_world_exports_digest_and_manifest() {
    let out = weft(&["plugin", "inspect", pod().to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["world"], "k8s-task-plugin");
    assert_eq!(v["name"], "pod");
    assert!(
        v["exports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "weft:plugin/k8s-task@0.1.0")
    );
    assert!(
        v["imports"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i.as_str().unwrap().starts_with("weft:plugin/")),
        "the pod plugin needs nothing but the host's own imports: {}",
        v["imports"]
    );
    let digest = v["digest"].as_str().unwrap();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 7 + 64,
        "{digest}"
    );
    assert_eq!(
        v["size"].as_u64().unwrap(),
        std::fs::metadata(pod()).unwrap().len()
    );
    assert!(
        v["taskTypes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "pod")
    );
}

#[test]
fn test_builds_the_pod_of_the_example_task() {
    let out = weft(&[
        "plugin",
        "test",
        pod().to_str().unwrap(),
        "--task",
        "examples/tasks/hello-pod.json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pod: serde_json::Value = serde_yaml::from_str(&stdout(&out)).expect("YAML");
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["name"], "hello-greet-0");
    assert_eq!(pod["metadata"]["namespace"], "default");
    assert_eq!(pod["metadata"]["labels"]["weft.dev/workflow"], "hello");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "Workflow");
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    let env = pod["spec"]["containers"][0]["env"].as_array().expect("env");
    assert!(
        env.iter()
            .any(|e| e["name"] == "WEFT_INPUT_WHO" && e["value"] == "world"),
        "{env:?}"
    );
}

#[test]
fn test_with_observed_prints_the_phase() {
    let dir = tempfile::tempdir().unwrap();
    let observed = dir.path().join("pod.json");
    std::fs::write(
        &observed,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hello-greet-0","namespace":"default"},
            "status":{"phase":"Succeeded","containerStatuses":[{"name":"main","ready":false,"restartCount":0,
            "image":"busybox:1.36","imageID":"","state":{"terminated":{"exitCode":0,"reason":"Completed",
            "message":"{\"greeted\": \"world\"}"}}}]}}"#,
    )
    .unwrap();
    let out = weft(&[
        "plugin",
        "test",
        pod().to_str().unwrap(),
        "--task",
        "examples/tasks/hello-pod.json",
        "--observed",
        observed.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let info: serde_json::Value = serde_yaml::from_str(&stdout(&out)).expect("YAML");
    assert_eq!(info["phase"], "success");
    assert_eq!(info["outputs"]["greeted"], "world");
}

#[test]
fn bad_input_is_named_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("task.json");
    std::fs::write(&task, r#"{"workflow": "w", "colour": "blue"}"#).unwrap();
    let out = weft(&[
        "plugin",
        "test",
        pod().to_str().unwrap(),
        "--task",
        task.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&task.display().to_string()) && err.contains("colour"),
        "{err}"
    );

    let missing = dir.path().join("nothing.wasm");
    std::fs::write(&missing, b"x").unwrap();
    let out = weft(&["plugin", "inspect", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no manifest"), "{}", stderr(&out));
}

#[test]
fn conformance_passes_the_pod_plugin_and_names_what_others_break() {
    let task = root().join("examples/tasks/hello-pod.json");
    let task = task.to_str().unwrap();
    let out = weft(&[
        "plugin",
        "test",
        pod().to_str().unwrap(),
        "--task",
        task,
        "--conformance",
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out).matches("PASS").count(), 6, "{}", stdout(&out));

    let guest = |name: &str| root().join(format!("target/test-guests/{name}.wasm"));
    let out = weft(&[
        "plugin",
        "test",
        guest("undeclared-kind").to_str().unwrap(),
        "--task",
        task,
        "--conformance",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["declared kinds cover what it builds"], "{report}");

    let out = weft(&[
        "plugin",
        "test",
        guest("loop-forever").to_str().unwrap(),
        "--task",
        task,
        "--conformance",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("FAIL  calls stay within the deadline and memory"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn push_dry_run_prints_the_configmaps_the_loader_reads() {
    let out = weft(&[
        "plugin",
        "push",
        pod().to_str().unwrap(),
        "--dry-run",
        "-n",
        "weft-system",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let docs: Vec<k8s_openapi::api::core::v1::ConfigMap> = text
        .split("\n---\n")
        .map(|d| serde_yaml::from_str(d).expect("a ConfigMap"))
        .collect();
    let head = docs.last().unwrap();
    assert_eq!(head.metadata.name.as_deref(), Some("pod"));
    assert_eq!(head.metadata.namespace.as_deref(), Some("weft-system"));
    assert_eq!(
        head.metadata.labels.as_ref().unwrap()["weft.dev/plugin"],
        "pod"
    );
    let data = head.data.as_ref().unwrap();
    assert!(data["manifest.yaml"].contains("name: pod"), "{data:?}");
    assert!(data["digest"].starts_with("sha256:"), "{data:?}");
    assert!(
        head.binary_data
            .as_ref()
            .unwrap()
            .contains_key("component.wasm")
    );
}

#[test]
fn plugin_log_lines_show_without_flags_and_test_prints_a_per_call_figure() {
    let echo = root().join("target/test-guests/echo.wasm");
    let task = root().join("examples/tasks/hello-pod.json");
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["plugin", "test", echo.to_str().unwrap(), "--task"])
        .arg(&task)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    // The guest's log::info line, at the default verbosity, under its name.
    let line = err
        .lines()
        .find(|l| l.contains("echo call 1"))
        .unwrap_or_else(|| panic!("no plugin log line: {err}"));
    assert!(line.contains("plugin") && line.contains("echo"), "{line}");
    assert!(
        err.contains("build-resource: ") && err.contains("µs per call (median of 21"),
        "{err}"
    );
    assert!(err.contains("peak memory"), "{err}");
}

#[test]
fn push_without_a_kubeconfig_says_what_to_set() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["plugin", "push", pod().to_str().unwrap()])
        .env("HOME", home.path())
        .env("KUBECONFIG", home.path().join("missing"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success());
    assert_eq!(
        err.matches("cannot find a Kubernetes cluster").count(),
        1,
        "said once: {err}"
    );
    assert!(
        err.contains("Set KUBECONFIG") && err.contains(".weft/dev/kubeconfig"),
        "{err}"
    );
}

#[test]
fn weft_dev_outside_the_repository_starts_without_an_error() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["dev", "--admin-listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("admin API at") {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let done = child.wait_with_output().unwrap();
    let err = stderr(&done);
    assert!(
        seen.contains("admin API at"),
        "weft dev did not serve: {seen}{err}"
    );
    assert!(seen.contains("kubeconfig .weft/dev/kubeconfig"), "{seen}");
    assert!(
        !err.contains("ERROR") && !err.contains("target/plugins"),
        "{err}"
    );
}

/// Every `weft ...` command line in the docs' code blocks names only
/// subcommands and flags that exist (the C README once named a flag
/// `weft dev` does not have).
#[test]
fn the_docs_name_only_flags_that_exist() {
    let mut files = vec![root().join("README.md"), root().join("deploy/README.md")];
    for dir in ["docs", "sdk/c", "sdk/python", "sdk/js", "sdk/rust"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                files.push(e.path());
            }
        }
    }
    let mut helps: std::collections::HashMap<Vec<String>, Option<String>> = Default::default();
    let mut help = |path: &[String]| -> Option<String> {
        helps
            .entry(path.to_vec())
            .or_insert_with(|| {
                let out = weft(
                    &[
                        path.iter().map(String::as_str).collect::<Vec<_>>(),
                        vec!["--help"],
                    ]
                    .concat(),
                );
                out.status.success().then(|| stdout(&out))
            })
            .clone()
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Command lines in code blocks (comments cut), and every inline
        // `weft ...` span, in prose or in those comments.
        let mut commands: Vec<String> = Vec::new();
        let mut fenced = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            for (i, span) in line.split('`').enumerate() {
                if i % 2 == 1
                    && let Some(cmd) = span.strip_prefix("weft ")
                {
                    commands.push(cmd.to_string());
                }
            }
            if let Some(cmd) = line.trim_start().strip_prefix("weft ").filter(|_| fenced) {
                commands.push(
                    cmd.split(['#', '|', '>', '&'])
                        .next()
                        .unwrap_or_default()
                        .into(),
                );
            }
        }
        for cmd in &commands {
            let mut path: Vec<String> = Vec::new();
            let mut args_started = false;
            for word in cmd.split_whitespace() {
                let word = word.trim_matches(|c| c == '[' || c == ']');
                if let Some(flag) = word.strip_prefix("--") {
                    let flag = format!("--{}", flag.split('=').next().unwrap());
                    let h = help(&path).unwrap_or_default();
                    checked += 1;
                    if !h.contains(&flag) {
                        problems.push(format!(
                            "{}: `weft {cmd}`: {flag} is not a flag of `weft {}`",
                            file.display(),
                            path.join(" ")
                        ));
                    }
                } else if !args_started
                    && word.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    && !word.starts_with('-')
                {
                    let mut next = path.clone();
                    next.push(word.to_string());
                    if help(&next).is_some() {
                        path = next;
                    } else {
                        args_started = true;
                    }
                } else {
                    args_started = true;
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} flags found: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Runs `cmd` in `dir` and fails the test with its output unless it succeeds.
fn run_ok(dir: &Path, cmd: &str, args: &[&str], envs: &[(&str, &Path)]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_os_str())))
        .output()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} in {}:\n{}{}",
        dir.display(),
        stdout(&out),
        stderr(&out)
    );
    stdout(&out) + &stderr(&out)
}

/// `weft plugin new --world webapi`: each language's web-API scaffold
/// passes its own unit tests, and the Python and JavaScript ones, built by
/// their SDKs, run a job of a real jobs API (the toy server in
/// sdk/python/examples) to success through `weft plugin test`, live. C
/// has no HTTP client: refused with a clear error.
#[test]
fn plugin_new_webapi_scaffolds_plugins_that_run_a_job() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sdk = root().join("sdk");
    let new = |lang: &str, name: &str| {
        let out = weft(&[
            "plugin",
            "new",
            name,
            "--lang",
            lang,
            "--world",
            "webapi",
            "--dir",
            dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).contains("web-API plugin"), "{}", stdout(&out));
        let manifest = std::fs::read_to_string(dir.join(name).join("weft-plugin.yaml")).unwrap();
        assert!(
            manifest.contains("world: webapi-task-plugin")
                && manifest.contains(&format!("taskTypes: [{name}]")),
            "{manifest}"
        );
        dir.join(name)
    };
    let refused = weft(&[
        "plugin",
        "new",
        "c-api",
        "--lang",
        "c",
        "--world",
        "webapi",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("C SDK has no HTTP client"),
        "{}",
        stderr(&refused)
    );

    let rs = new("rust", "rs-api");
    let log = run_ok(
        &rs,
        env!("CARGO"),
        &["test", "-q"],
        &[("CARGO_TARGET_DIR", &scaffold_target())],
    );
    assert!(log.contains("3 passed"), "{log}");

    // The jobs API, on a free port.
    let port = port::free_port();
    /// Killed however the test ends (it holds the test's stderr open).
    struct Server(std::process::Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Server(
        Command::new("python3")
            .arg(sdk.join("python/examples/jobs_server.py"))
            .arg(port.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.0.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains(&port.to_string()), "{line}");
    let out_dir = dir.join("out");
    let run_job = |name: &str, plugin: &Path| {
        let task = plugin.join("task.json");
        // Its own workflow name: each plugin creates its own job.
        let text = std::fs::read_to_string(&task)
            .unwrap()
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"))
            .replace(
                "\"workflow\": \"example\"",
                &format!("\"workflow\": \"{name}\""),
            );
        std::fs::write(&task, text).unwrap();
        let wasm = out_dir.join(format!("{name}.wasm"));
        let out = weft(&[
            "plugin",
            "test",
            wasm.to_str().unwrap(),
            "--task",
            task.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{name}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let report = stdout(&out);
        assert!(
            report.contains("phase: success") && report.contains("accuracy: 0.93"),
            "{name}: {report}"
        );
        assert!(report.contains("- running"), "{name} was polled: {report}");
    };

    let py = new("python", "py-api");
    run_ok(
        &py,
        "python3",
        &["-m", "unittest", "-q"],
        &[("PYTHONPATH", &sdk.join("python"))],
    );
    run_ok(
        &root(),
        "bash",
        &[
            "sdk/python/build.sh",
            py.to_str().unwrap(),
            out_dir.to_str().unwrap(),
        ],
        &[],
    );
    run_job("py-api", &py);

    let js = new("js", "js-api");
    let register = sdk.join("js/testing/register.js");
    run_ok(
        &js,
        "node",
        &["--import", register.to_str().unwrap(), "--test"],
        &[],
    );
    run_ok(
        &root(),
        "bash",
        &[
            "sdk/js/build.sh",
            js.to_str().unwrap(),
            out_dir.to_str().unwrap(),
        ],
        &[],
    );
    run_job("js-api", &js);
}

/// `weft plugin new` as `spin new`: each language's scaffold is a plugin
/// that passes its own unit tests and, built by its SDK, the conformance
/// checks, serving the task type it was named after.
#[test]
fn plugin_new_scaffolds_a_plugin_that_builds_and_passes_conformance() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sdk = root().join("sdk");
    let new = |lang: &str, name: &str| {
        let out = weft(&[
            "plugin",
            "new",
            name,
            "--lang",
            lang,
            "--dir",
            dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).contains("next:"), "{}", stdout(&out));
        let manifest = std::fs::read_to_string(dir.join(name).join("weft-plugin.yaml")).unwrap();
        assert!(manifest.contains(&format!("name: {name}")), "{manifest}");
        assert!(
            manifest.contains(&format!("taskTypes: [{name}]")),
            "{manifest}"
        );
        dir.join(name)
    };
    let conformance = |name: &str, plugin: &Path| {
        let wasm = dir.join("out").join(format!("{name}.wasm"));
        let task = plugin.join("task.json");
        let out = weft(&[
            "plugin",
            "test",
            wasm.to_str().unwrap(),
            "--task",
            task.to_str().unwrap(),
            "--conformance",
        ]);
        assert!(
            out.status.success(),
            "{name}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert!(!stdout(&out).contains("FAIL"), "{}", stdout(&out));
    };
    let out_dir = dir.join("out");
    let out_dir = out_dir.to_str().unwrap();

    let c = new("c", "c-task");
    run_ok(
        &root(),
        "bash",
        &["sdk/c/build.sh", c.to_str().unwrap(), out_dir],
        &[],
    );
    conformance("c-task", &c);

    let py = new("python", "py-task");
    run_ok(
        &py,
        "python3",
        &["-m", "unittest", "-q"],
        &[("PYTHONPATH", &sdk.join("python"))],
    );
    run_ok(
        &root(),
        "bash",
        &["sdk/python/build.sh", py.to_str().unwrap(), out_dir],
        &[],
    );
    conformance("py-task", &py);

    let js = new("js", "js-task");
    let register = sdk.join("js/testing/register.js");
    run_ok(
        &js,
        "node",
        &["--import", register.to_str().unwrap(), "--test"],
        &[],
    );
    run_ok(
        &root(),
        "bash",
        &["sdk/js/build.sh", js.to_str().unwrap(), out_dir],
        &[],
    );
    conformance("js-task", &js);

    // Rust: the crate's own tests, natively (its component build is the
    // guest toolchain's, as for every first-party plugin). One target dir
    // for every run, so that a second run compiles only the new crate.
    let rs = new("rust", "rs-task");
    let cargo_toml = std::fs::read_to_string(rs.join("Cargo.toml")).unwrap();
    assert!(cargo_toml.contains("name = \"rs-task\""), "{cargo_toml}");
    let shared = scaffold_target();
    let log = run_ok(
        &rs,
        env!("CARGO"),
        &["test", "-q"],
        &[("CARGO_TARGET_DIR", &shared)],
    );
    assert!(log.contains("3 passed"), "{log}");

    // A second scaffold of the same name refuses to overwrite it.
    let again = weft(&[
        "plugin",
        "new",
        "c-task",
        "--lang",
        "c",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(1), "{}", stdout(&again));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    let bad = weft(&[
        "plugin",
        "new",
        "Bad_Name",
        "--lang",
        "c",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert!(stderr(&bad).contains("\"Bad_Name\""), "{}", stderr(&bad));
}

/// A mistyped registry config stops `weft controller` before it starts,
/// naming the file and the key (no cluster needed to find out).
#[test]
fn a_bad_registry_config_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("registry.yaml");
    std::fs::write(&file, "enabeld: [pod]\n").unwrap();
    let out = weft(&["controller", "--registry-config", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("registry.yaml") && err.contains("unknown field `enabeld`"),
        "{err}"
    );
    std::fs::write(&file, "plugins: {pod: {config: []}}\n").unwrap();
    let out = weft(&["controller", "--registry-config", file.to_str().unwrap()]);
    assert!(
        stderr(&out).contains("plugins.pod.config"),
        "{}",
        stderr(&out)
    );
}

/// `weft controller --config FILE`: the file's settings under the flags,
/// `--print-config` shows what results, and a bad file stops the start
/// naming the setting (before anything connects to a cluster).
#[test]
fn controller_config_file_is_read_printed_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(
        &good,
        "concurrentReconciles: 3\npluginSpares: 2\npluginKeepResident: 8Mi\npluginPreparerPriority: normal\nleaderElect: true\nkubeApiQps: 20\nfeatureGates: IgnoreStatusUpdates=true\nsyncPeriod: 30m\n",
    )
    .unwrap();
    let g = good.to_str().unwrap();
    let out = weft(&[
        "controller",
        "--config",
        g,
        "--plugin-spares",
        "4",
        "--print-config",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("concurrentReconciles: 3  #"), "{text}");
    assert!(
        text.contains("pluginSpares: 4  #"),
        "the flag overrides the file: {text}"
    );
    assert!(text.contains("leaderElect: true  #"), "{text}");
    assert!(text.contains("pluginKeepResident: 8Mi  #"), "{text}");
    assert!(text.contains("pluginPreparerPriority: normal  #"), "{text}");
    assert!(text.contains("breakerFaults: 5  # default"), "{text}");
    assert!(text.contains("kubeApiQps: 20  #"), "{text}");
    assert!(text.contains("kubeApiBurst: 200  # default"), "{text}");
    assert!(text.contains("syncPeriod: 30m  #"), "{text}");
    assert!(
        text.contains("featureGates: IgnoreStatusUpdates=true  #"),
        "{text}"
    );

    for (body, says) in [
        (
            "concurrentReconcile: 3\n",
            "unknown setting \"concurrentReconcile\"",
        ),
        (
            "breakerWindow: soon\n",
            "breakerWindow: invalid value 'soon' for '--breaker-window",
        ),
        ("- a list\n", "must be a mapping of settings"),
        (
            "featureGates: IgnoreStatusUpdate=true\n",
            "unknown feature gate \"IgnoreStatusUpdate\" (known: IgnoreStatusUpdates",
        ),
        ("kubeApiQps: fast\n", "kubeApiQps: invalid value 'fast'"),
        (
            "pluginKeepResident: lots\n",
            "pluginKeepResident: invalid value 'lots'",
        ),
        (
            "pluginPreparerPriority: lowest\n",
            "\"lowest\" is not a preparer priority (low, idle or normal)",
        ),
        (
            "pluginKeepResident: 2Gi\n",
            "2Gi is more than a plugin instance's memory can be (512Mi)",
        ),
    ] {
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, body).unwrap();
        let out = weft(&["controller", "--config", bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{body}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("config file {}", bad.display())),
            "{err}"
        );
        assert!(err.contains(says), "{body}: {err}");
    }
}
