//! Plugins compiled in a child process (`weft plugin compile-artifact`,
//! `weft_plugin::engine::ChildCompiler`), as `weft controller`, `weft dev`
//! and `weft run` compile them, so that cranelift's working memory never
//! enters the controller's: the real binary and the real pod plugin
//! (`make guests`). A child that cannot do it costs nothing but time: the
//! compile is done in the process; a component it refuses is refused with
//! the compiler's own words.

use std::path::{Path, PathBuf};

use serde_json::json;
use weft_plugin::engine::{ChildCompiler, CompileSource, EngineConfig, PluginEngine};
use weft_plugin::registry::load_file;
use weft_plugin::{Plugin, TaskContext};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pod plugin and its manifest, copied into `dir` (a fresh digest
/// path per test, so nothing comes from another test's cache).
fn pod_in(dir: &Path) -> PathBuf {
    let from = root().join("target/plugins/pod.wasm");
    assert!(
        from.is_file(),
        "{} missing: run `make guests`",
        from.display()
    );
    let to = dir.join("pod.wasm");
    std::fs::copy(&from, &to).unwrap();
    std::fs::copy(from.with_extension("yaml"), to.with_extension("yaml")).unwrap();
    to
}

/// `sh -c SCRIPT`, where the script appends a line to `mark` each time it
/// runs, so a test can count the children.
fn counted(mark: &Path, then: &str) -> ChildCompiler {
    ChildCompiler {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            format!("echo run >> '{}'; {then}", mark.display()),
        ],
    }
}

fn runs(mark: &Path) -> usize {
    std::fs::read_to_string(mark).map_or(0, |s| s.lines().count())
}

fn weft_child() -> String {
    format!(
        "exec '{}' plugin compile-artifact",
        env!("CARGO_BIN_EXE_weft")
    )
}

fn engine(compiler: ChildCompiler, cache: Option<&Path>) -> PluginEngine {
    PluginEngine::new(EngineConfig {
        compiler: Some(compiler),
        cache_dir: cache.map(Path::to_path_buf),
        spares: 0,
        ..EngineConfig::default()
    })
    .expect("engine")
}

/// The pod plugin's build-resource answers with a Pod: the component the
/// engine loaded runs.
fn builds_a_pod(plugin: &Plugin) {
    let Plugin::Task(p) = plugin else {
        panic!("the pod plugin loaded as {plugin:?}");
    };
    let ctx = TaskContext::for_attempt(
        "wf",
        "3f1c9a4e-1111-2222-3333-444455556666",
        "default",
        "main",
        0,
        "pod",
        json!({"container": {"image": "busybox", "command": ["true"]}}),
        json!({}),
    );
    let (built, _) = p.build_resource(&ctx).expect("build-resource");
    assert_eq!(built["kind"], "Pod", "{built}");
}

#[test]
fn a_plugin_compiled_by_a_weft_child_loads_runs_and_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let (mark, cache) = (dir.path().join("mark"), dir.path().join("cache"));
    let wasm = pod_in(dir.path());
    let engine = engine(counted(&mark, &weft_child()), Some(&cache));
    let (plugin, source) = load_file(&engine, &wasm).expect("the pod plugin loads");
    assert_eq!(source, CompileSource::Compiled);
    assert_eq!(runs(&mark), 1, "one child compiled it");
    builds_a_pod(&plugin);
    // The child's artifact is what the cache keeps: a second engine loads
    // it from disk and starts no child.
    let cached: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert_eq!(cached.len(), 1, "the artifact is cached: {cached:?}");
    let again = self::engine(counted(&mark, &weft_child()), Some(&cache));
    let (plugin, source) = load_file(&again, &wasm).expect("loads from the cache");
    assert_eq!(source, CompileSource::Disk);
    assert_eq!(runs(&mark), 1, "no child for a cached artifact");
    builds_a_pod(&plugin);
}

#[test]
fn a_component_the_child_refuses_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("mark");
    let wasm = dir.path().join("bad.wasm");
    // A component header and nothing after it.
    std::fs::write(&wasm, b"\0asm\x0d\0\x01\0garbage").unwrap();
    std::fs::copy(
        root().join("target/plugins/pod.yaml"),
        wasm.with_extension("yaml"),
    )
    .unwrap();
    let engine = engine(counted(&mark, &weft_child()), None);
    let err = load_file(&engine, &wasm).expect_err("must be refused");
    let text = err.to_string();
    assert!(
        text.contains(&wasm.display().to_string()),
        "names the file: {text}"
    );
    assert!(
        text.to_lowercase().contains("invalid") || text.contains("unexpected"),
        "says what is wrong with it: {text}"
    );
    assert_eq!(runs(&mark), 1, "the child ran once");
}

#[test]
fn a_child_that_fails_or_writes_garbage_leaves_the_compile_to_the_process() {
    for (what, then) in [
        ("exits 1", "cat > /dev/null; echo cannot >&2; exit 1"),
        ("is killed", "kill -9 $$"),
        (
            "writes no artifact",
            "cat > /dev/null; echo not-an-artifact",
        ),
        (
            "does not exist",
            "exec /nonexistent/weft plugin compile-artifact",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("mark");
        let wasm = pod_in(dir.path());
        let engine = engine(counted(&mark, then), None);
        let (plugin, source) = load_file(&engine, &wasm)
            .unwrap_or_else(|e| panic!("a child that {what}: the plugin must still load: {e}"));
        assert_eq!(source, CompileSource::Compiled, "{what}");
        assert_eq!(runs(&mark), 1, "{what}: the child ran once");
        builds_a_pod(&plugin);
    }
}
