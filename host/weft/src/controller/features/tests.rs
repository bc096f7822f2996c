use super::*;

#[test]
fn defaults_follow_the_stage_and_the_flag_overrides_them() {
    let none = FeatureGates::parse("").unwrap();
    assert!(none.enabled("IgnoreStatusUpdates"), "beta: on by default");
    assert!(none.enabled("CoalesceStatusWrites"));
    let set = FeatureGates::parse("IgnoreStatusUpdates=false, CoalesceStatusWrites=false").unwrap();
    assert!(!set.enabled("IgnoreStatusUpdates"));
    assert!(!set.enabled("CoalesceStatusWrites"));
    assert_eq!(
        set.to_string(),
        "IgnoreStatusUpdates=false,CoalesceStatusWrites=false"
    );
}

#[test]
fn unknown_gates_and_bad_values_are_named() {
    let e = FeatureGates::parse("IgnoreStatusUpdate=true").unwrap_err();
    assert!(
        e.contains("unknown feature gate \"IgnoreStatusUpdate\""),
        "{e}"
    );
    assert!(e.contains("IgnoreStatusUpdates"), "{e}");
    let e = FeatureGates::parse("CoalesceStatusWrites=yes").unwrap_err();
    assert!(e.contains("CoalesceStatusWrites=yes"), "{e}");
    let e = FeatureGates::parse("CoalesceStatusWrites").unwrap_err();
    assert!(e.contains("Name=true"), "{e}");
}
