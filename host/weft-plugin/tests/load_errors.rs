//! Bad plugins are refused at load with an error that names the file and
//! the problem, and a directory with bad plugins still loads its good ones.

mod common;

use std::path::Path;

use common::{component, engine};
use weft_plugin::{
    Registry,
    registry::{DirError, load_file, load_file_with_manifest},
};

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
}

fn pod_manifest() -> String {
    std::fs::read_to_string(component("plugins", "pod").with_extension("yaml"))
        .expect("pod manifest")
}

fn load_error(dir: &Path, file: &str, bytes: &[u8], manifest: &str) -> String {
    let wasm = dir.join(file);
    std::fs::write(&wasm, bytes).unwrap();
    std::fs::write(wasm.with_extension("yaml"), manifest).unwrap();
    let err = load_file(&engine(), &wasm).expect_err("must be refused");
    let text = err.to_string();
    assert!(
        text.contains(&wasm.display().to_string()),
        "the error must name the file: {text}"
    );
    text
}

#[test]
fn garbage_is_not_webassembly() {
    let dir = tempfile::tempdir().unwrap();
    let text = load_error(
        dir.path(),
        "garbage.wasm",
        b"#!/bin/sh\necho hi\n",
        &pod_manifest(),
    );
    assert!(text.contains("not a WebAssembly binary"), "{text}");
}

#[test]
fn a_core_module_is_not_a_component() {
    let dir = tempfile::tempdir().unwrap();
    // The smallest valid core module: magic and version 1.
    let text = load_error(dir.path(), "core.wasm", b"\0asm\x01\0\0\0", &pod_manifest());
    assert!(
        text.contains("core WebAssembly module, not a component"),
        "{text}"
    );
}

#[test]
fn a_truncated_component_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(component("plugins", "pod")).unwrap();
    let text = load_error(
        dir.path(),
        "cut.wasm",
        &bytes[..bytes.len() / 2],
        &pod_manifest(),
    );
    assert!(text.contains("invalid component"), "{text}");
}

#[test]
fn a_component_of_the_wrong_world_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A middleware component presented as a task plugin.
    let bytes = std::fs::read(component("test-guests", "mw-test")).unwrap();
    let text = load_error(dir.path(), "mw.wasm", &bytes, &pod_manifest());
    assert!(
        text.contains("does not implement world k8s-task-plugin")
            && text.contains("weft:plugin/k8s-task@0.1.0"),
        "{text}"
    );
}

#[test]
fn a_malformed_manifest_names_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("pod.wasm");
    copy(&component("plugins", "pod"), &wasm);
    let cases = [
        ("name: [unclosed\n", "is malformed"),
        (
            "name: pod\nversion: 0.1.0\nworld: k8s-task-plugin\ntaskTypes: [pod]\nresources: [{apiVersion: v1, kind: Pod}]\nlimits: {memory: lots}\n",
            "limits.memory",
        ),
        (
            "name: Pod_Plugin\nversion: 0.1.0\nworld: k8s-task-plugin\ntaskTypes: [pod]\nresources: [{apiVersion: v1, kind: Pod}]\n",
            "name",
        ),
        (
            "name: pod\nversion: one\nworld: k8s-task-plugin\ntaskTypes: [pod]\nresources: [{apiVersion: v1, kind: Pod}]\n",
            "version",
        ),
        (
            "name: pod\nversion: 0.1.0\nworld: k8s-task-plugin\nresources: [{apiVersion: v1, kind: Pod}]\n",
            "taskTypes",
        ),
        (
            "name: pod\nversion: 0.1.0\nworld: k8s-task-plugin\ntaskTypes: [pod]\nresources: [{apiVersion: v1, kind: Pod}]\nsurprise: 1\n",
            "unknown field `surprise`",
        ),
    ];
    for (manifest, problem) in cases {
        let path = dir.path().join("pod.yaml");
        std::fs::write(&path, manifest).unwrap();
        let err = load_file_with_manifest(&engine(), &wasm, &path).expect_err(manifest);
        assert!(matches!(err, DirError::Manifest(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&path.display().to_string()),
            "names the file: {text}"
        );
        assert!(
            text.contains(problem),
            "names the problem {problem:?}: {text}"
        );
    }
}

#[test]
fn a_directory_loads_its_good_plugins_and_reports_the_bad() {
    let dir = tempfile::tempdir().unwrap();
    let pod = component("plugins", "pod");
    copy(&pod, &dir.path().join("pod.wasm"));
    copy(&pod.with_extension("yaml"), &dir.path().join("pod.yaml"));
    std::fs::write(dir.path().join("broken.wasm"), b"nope").unwrap();
    std::fs::write(
        dir.path().join("broken.yaml"),
        pod_manifest().replace("name: pod", "name: broken"),
    )
    .unwrap();
    copy(&pod, &dir.path().join("orphan.wasm"));

    let registry = Registry::default();
    let errors = registry.load_dir(&engine(), dir.path());
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{texts:#?}");
    assert!(
        texts
            .iter()
            .any(|t| t.contains("broken.wasm") && t.contains("not a WebAssembly")),
        "{texts:#?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("orphan.wasm") && t.contains("no manifest")),
        "{texts:#?}"
    );
    assert!(registry.task_plugin("pod").is_ok());
    let unknown = registry
        .task_plugin("spark")
        .expect_err("nothing serves spark");
    assert!(unknown.to_string().contains("spark"), "{unknown}");
}
