use super::*;

#[test]
fn strategic_merges_containers_by_name() {
    let orig = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}]},
            {"name": "b", "image": "y"}]}});
    let patch = json!({"spec": {"containers": [
            {"name": "a", "env": [{"name": "B", "value": "2"}]},
            {"name": "b", "$patch": "delete"}]}});
    let out = strategic_merge(&orig, &patch);
    assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 1);
    assert_eq!(out["spec"]["containers"][0]["image"], "x");
    assert_eq!(
        out["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn fields_v1_round_trip() {
    let obj = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["x"]},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let paths = leaf_paths(&obj);
    assert_eq!(from_fields_v1(&to_fields_v1(&paths)), paths);
    assert!(paths.contains(&vec![
        "f:metadata".into(),
        "f:finalizers".into(),
        "v:\"x\"".into()
    ]));
}

#[test]
fn apply_removes_fields_the_manager_dropped() {
    let a1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                        "data": {"a": "1", "b": "2"}});
    let o1 = server_side_apply(None, &a1, "m", false, Scope::All, "v1", "t").unwrap();
    let a2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                        "data": {"a": "1"}});
    let o2 = server_side_apply(Some(&o1), &a2, "m", false, Scope::All, "v1", "t").unwrap();
    assert_eq!(o2["data"], json!({"a": "1"}));
}

#[test]
fn apply_conflicts_with_another_manager() {
    let a1 = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
    let o1 = server_side_apply(None, &a1, "m1", false, Scope::All, "v1", "t").unwrap();
    let a2 = json!({"metadata": {"name": "c"}, "data": {"a": "2"}});
    let err = server_side_apply(Some(&o1), &a2, "m2", false, Scope::All, "v1", "t").unwrap_err();
    assert_eq!(err.code, 409);
    let o2 = server_side_apply(Some(&o1), &a2, "m2", true, Scope::All, "v1", "t").unwrap();
    assert_eq!(o2["data"]["a"], "2");
    // m1 lost the field, so dropping it from m1's config leaves it alone.
    let a3 = json!({"metadata": {"name": "c"}, "data": {}});
    let o3 = server_side_apply(Some(&o2), &a3, "m1", false, Scope::All, "v1", "t").unwrap();
    assert_eq!(o3["data"]["a"], "2");
}

#[test]
fn the_same_number_written_differently_is_no_conflict() {
    // kustomize writes `minimum: 0` where Weft's CRD says `0.0`.
    let a1 = json!({"metadata": {"name": "c"}, "spec": {"minimum": 0.0}});
    let o1 = server_side_apply(None, &a1, "m1", false, Scope::All, "v1", "t").unwrap();
    let a2 = json!({"metadata": {"name": "c"}, "spec": {"minimum": 0}});
    assert!(server_side_apply(Some(&o1), &a2, "m2", false, Scope::All, "v1", "t").is_ok());
    let a3 = json!({"metadata": {"name": "c"}, "spec": {"minimum": 1}});
    let err = server_side_apply(Some(&o1), &a3, "m2", false, Scope::All, "v1", "t").unwrap_err();
    assert_eq!(err.code, 409);
}
