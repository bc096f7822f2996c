use super::*;

fn greeter() -> WorkflowTemplate {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/template.yaml"
    ))
    .unwrap();
    let doc = serde_yaml::Deserializer::from_str(&text).next().unwrap();
    let mut t: WorkflowTemplate = serde::Deserialize::deserialize(doc).unwrap();
    t.metadata.namespace = Some("default".into());
    t
}

#[test]
fn the_description_shows_what_a_launch_gives() {
    let out = describe(&greeter(), SystemTime::now());
    let lines: Vec<&str> = out.lines().map(str::trim_end).collect();
    let has = |want: &str| {
        assert!(lines.contains(&want), "no line {want:?} in:\n{out}");
    };
    has("Name:        greeter");
    has("  NAME    TYPE      DEFAULT    FIXED    DESCRIPTION");
    has("  env     string    -          \"prod\"   where it runs");
    has("  times   integer   1          -        how many times");
    has("  who     string    required   -        whom to greet");
    has("  greeting   ${nodes.greet.outputs.greeting}");
    has("  greet   pod    -");
    has("Launch: weft submit --from template/greeter -p who=VALUE");
}

#[test]
fn the_list_counts_inputs_and_nodes() {
    let out = render_list(vec![greeter()], SystemTime::now());
    assert_eq!(
        out,
        "NAME      INPUTS   NODES   AGE\ngreeter   3        1       -\n"
    );
}
