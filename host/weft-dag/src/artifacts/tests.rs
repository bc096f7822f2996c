use serde_json::json;

use super::*;
use crate::expr::Scope;

fn task(v: serde_json::Value) -> TaskSpec {
    serde_json::from_value(v).expect("a task")
}

fn fields(t: &TaskSpec) -> Vec<String> {
    problems(t)
        .into_iter()
        .map(|(f, w)| format!("{f}: {w}"))
        .collect()
}

#[test]
fn a_well_formed_declaration_has_no_problems() {
    let t = task(json!({"type": "pod",
        "inputs": {"artifacts": [
            {"name": "data", "path": "/in/data.csv", "from": "${nodes.prep.outputs.artifacts.data}"},
            {"name": "ref", "path": "/in/ref", "url": "https://example.com/ref.txt"}]},
        "outputs": {"artifacts": [{"name": "model", "path": "/out/model"}],
                    "parameters": [{"name": "score", "path": "/out/score.json"}]}}));
    assert_eq!(fields(&t), Vec::<String>::new());
    assert!(t.has_io());
    assert!(!task(json!({"type": "pod"})).has_io());
}

#[test]
fn each_bad_declaration_is_named() {
    let t = task(json!({"type": "pod",
        "inputs": {"artifacts": [
            {"name": "a", "path": "rel/path", "from": "${nodes.x.outputs.artifacts.a}"},
            {"name": "a", "path": "/in/b", "from": "nodes.x"},
            {"name": "c d", "path": "/in/c", "url": "ftp://x"},
            {"name": "e", "path": "/in/e"},
            {"name": "f", "path": "/weft/io/f", "url": "https://x/f"}]},
        "outputs": {"artifacts": [{"name": "o", "path": "/in/b"}],
                    "parameters": [{"name": "artifacts", "path": "/out/p"}]}}));
    let got = fields(&t);
    let want = [
        "inputs.artifacts[0].path: \"rel/path\" is not an absolute path",
        "inputs.artifacts[1].name: \"a\" is declared twice",
        "inputs.artifacts[1].from: \"nodes.x\" is not a ${...} expression",
        "inputs.artifacts[2].name: \"c d\" is not a name",
        "inputs.artifacts[2].url: \"ftp://x\" is not an http(s) URL",
        "inputs.artifacts[3]: give exactly one of `from` and `url`",
        "inputs.artifacts[4].path: \"/weft/io/f\" is under /weft/io",
        "outputs.artifacts[0].path: \"/in/b\" is used twice",
        "outputs.parameters[0].name: \"artifacts\" is where output artifacts go",
    ];
    for w in want {
        assert!(got.iter().any(|g| g.starts_with(w)), "{w} not in {got:#?}");
    }
    assert_eq!(got.len(), want.len(), "{got:#?}");
}

#[test]
fn from_resolves_to_the_upstream_artifact() {
    let t = task(json!({"type": "pod", "inputs": {"artifacts": [
        {"name": "data", "path": "/in/d", "from": "${nodes.prep.outputs.artifacts.out}"},
        {"name": "web", "path": "/in/w", "url": "https://example.com/w"}]}}));
    let art =
        json!({"key": "ns/wf/uid/prep/0/out", "digest": "sha256:ab", "size": 3, "kind": "file"});
    let scope = Scope {
        nodes: serde_json::from_value(json!({"prep": {"phase": "Succeeded",
            "outputs": {"artifacts": {"out": art}}}}))
        .unwrap(),
        ..Scope::default()
    };
    let got = resolve(&t, &scope).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0].source,
        ArtifactSource::Stored(serde_json::from_value(art).unwrap())
    );
    assert_eq!(got[0].cache_identity(), "sha256:ab");
    assert_eq!(
        got[1].source,
        ArtifactSource::Url("https://example.com/w".into())
    );
}

#[test]
fn from_that_is_not_an_artifact_names_it() {
    let t = task(json!({"type": "pod", "inputs": {"artifacts": [
        {"name": "data", "path": "/in/d", "from": "${nodes.prep.outputs.n}"}]}}));
    let scope = Scope {
        nodes: serde_json::from_value(json!({"prep": {"phase": "Succeeded", "outputs": {"n": 4}}}))
            .unwrap(),
        ..Scope::default()
    };
    let err = resolve(&t, &scope).unwrap_err();
    assert!(
        err.starts_with("input artifact data: ${nodes.prep.outputs.n} gives 4, not an artifact"),
        "{err}"
    );
    let t = task(json!({"type": "pod", "inputs": {"artifacts": [
        {"name": "data", "path": "/in/d", "from": "${nodes.prep.outputs.artifacts.gone}"}]}}));
    let err = resolve(&t, &scope).unwrap_err();
    assert!(
        err.starts_with("input artifact data: ${nodes.prep.outputs.artifacts.gone}: "),
        "{err}"
    );
}
