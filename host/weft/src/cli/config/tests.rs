use super::*;

fn file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

fn argv(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

#[test]
fn names_convert_both_ways() {
    assert_eq!(kebab("concurrentReconciles"), "concurrent-reconciles");
    assert_eq!(camel("leader-elect-namespace"), "leaderElectNamespace");
}

#[test]
fn file_settings_come_before_the_flags_that_override_them() {
    let f = file("concurrentReconciles: 4\nnoHotload: true\npluginNamespace: [a, b]\n");
    let path = f.path().to_str().unwrap();
    let out = expand(argv(&[
        "weft",
        "controller",
        "--config",
        path,
        "--concurrent-reconciles",
        "2",
    ]))
    .unwrap();
    let out: Vec<String> = out
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        out[2..6],
        [
            "--concurrent-reconciles=4",
            "--no-hotload",
            "--plugin-namespace=a",
            "--plugin-namespace=b"
        ]
    );
    assert_eq!(
        out.last().unwrap(),
        "2",
        "the command line comes last and wins"
    );
}

#[test]
fn printed_settings_read_back_as_a_config_file() {
    let matches = super::super::Cli::command().get_matches_from([
        "weft",
        "controller",
        "--concurrent-reconciles",
        "7",
    ]);
    let Some(("controller", sub)) = matches.subcommand() else {
        panic!("no controller subcommand")
    };
    let printed = print(sub);
    assert!(
        printed.contains("concurrentReconciles: 7  # flag or config file"),
        "{printed}"
    );
    assert!(
        printed.contains("breakerWindow: 60s  # default"),
        "{printed}"
    );
    let out = expand_file(&printed).unwrap();
    assert!(
        out.iter().any(|a| a == "--concurrent-reconciles=7"),
        "{out:?}"
    );
}

/// `weft controller --config F` with F holding `text`.
fn expand_file(text: &str) -> Result<Vec<OsString>, String> {
    let f = file(text);
    let path = f.path().to_str().unwrap();
    expand(argv(&["weft", "controller", "--config", path]))
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    for (text, says) in [
        (
            "concurrentReconcile: 4\n",
            "unknown setting \"concurrentReconcile\"",
        ),
        (
            "concurrentReconciles: many\n",
            "concurrentReconciles: invalid value 'many'",
        ),
        ("noHotload: 3\n", "noHotload: is a switch"),
    ] {
        let e = expand_file(text).unwrap_err();
        assert!(e.contains(says), "{text}: {e}");
    }
}
