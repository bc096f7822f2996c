use super::*;
use crate::admin::request::{fill_from_manifest, parse_spec};

fn caller(p: Option<&str>) -> Caller {
    Caller {
        principal: p.map(str::to_string),
        ..Default::default()
    }
}

#[test]
fn authorization_names_the_principal_and_the_namespace() {
    let a = Authorization {
        principals: [
            ("alice".to_string(), vec!["team-a".to_string()]),
            ("admin".to_string(), vec!["*".to_string()]),
        ]
        .into(),
        kubernetes: None,
    };
    assert!(a.check(&caller(Some("alice")), Some("team-a")).is_ok());
    let e = a.check(&caller(Some("alice")), Some("team-b")).unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    assert!(
        e.message().contains("alice") && e.message().contains("team-b"),
        "{}",
        e.message()
    );
    assert!(a.check(&caller(Some("alice")), None).is_err());
    assert!(a.check(&caller(Some("admin")), None).is_ok());
    assert_eq!(
        a.check(&caller(None), Some("team-a")).unwrap_err().code(),
        tonic::Code::Unauthenticated
    );
    assert_eq!(
        a.check(&caller(Some("mallory")), Some("team-a"))
            .unwrap_err()
            .code(),
        tonic::Code::PermissionDenied
    );
}

#[test]
fn specs_parse_from_json_and_yaml_with_clear_errors() {
    assert!(parse_spec(r#"{"nodes": [{"id": "a", "task": {"type": "pod"}}]}"#).is_ok());
    assert!(parse_spec("nodes:\n- id: a\n  task: {type: pod}\n").is_ok());
    let e = parse_spec("").unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let e = parse_spec("nodes: 7").unwrap_err();
    assert!(e.message().starts_with("spec: "), "{}", e.message());
    // A whole manifest, as kubectl takes it.
    let (spec, meta) = parse_spec(
            "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {generateName: hello-, labels: {team: a}}\nspec:\n  nodes: [{id: a, task: {type: pod}}]\n",
        )
        .unwrap();
    assert_eq!(spec.nodes[0].id, "a");
    let mut req = pb::CreateExecutionRequest::default();
    fill_from_manifest(&mut req, meta.unwrap());
    assert_eq!(
        (req.namespace.as_str(), req.generate_name.as_str()),
        ("default", "hello-")
    );
    assert_eq!(req.labels["team"], "a");
    let e = parse_spec("apiVersion: v1\nkind: Pod\nspec: {}\n").unwrap_err();
    assert!(
        e.message()
            .contains("expected apiVersion weft.dev/v1alpha1, kind Workflow"),
        "{}",
        e.message()
    );
}
