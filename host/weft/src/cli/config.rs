//! `weft controller --config FILE` and `--print-config`: the controller's
//! flags as a YAML file (each flag's long name in camelCase, e.g.
//! `concurrentReconciles: 4`), flags on the command line overriding it;
//! and the effective settings printed back in the same form.
//!
//! The file is turned into flags placed before the command line's (clap
//! lets a later flag override an earlier one), so a setting means exactly
//! what its flag means and is checked by the same parser.

use std::ffi::OsString;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory};

/// The subcommand that reads a config file.
const SUBCOMMAND: &str = "controller";

/// `argv` with the settings of `--config FILE` (if the controller
/// subcommand has one) inserted as flags right after `controller`. The
/// error names the file and the setting.
pub fn expand(argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some(at) = argv.iter().position(|a| a == SUBCOMMAND) else {
        return Ok(argv);
    };
    let Some(file) = config_path(&argv[at + 1..]) else {
        return Ok(argv);
    };
    let flags = file_flags(Path::new(&file))?;
    let mut out = argv[..=at].to_vec();
    out.extend(flags.into_iter().map(OsString::from));
    out.extend(argv[at + 1..].iter().cloned());
    Ok(out)
}

/// The value of `--config` among the subcommand's arguments.
fn config_path(args: &[OsString]) -> Option<OsString> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            return it.next().cloned();
        }
        if let Some(v) = a.to_str().and_then(|a| a.strip_prefix("--config=")) {
            return Some(v.into());
        }
    }
    None
}

/// The controller's flags that a file may set: every long flag but the
/// two that are about the file.
fn settable() -> Vec<clap::Arg> {
    let cli = super::Cli::command();
    let controller = cli
        .find_subcommand(SUBCOMMAND)
        .expect("weft has a controller subcommand");
    controller
        .get_arguments()
        .filter(|a| {
            a.get_long()
                .is_some_and(|l| !matches!(l, "config" | "print-config" | "help"))
        })
        .cloned()
        .collect()
}

/// The file's settings as flags, each checked by clap on its own so that
/// a bad value is reported with the file and the setting.
fn file_flags(path: &Path) -> Result<Vec<String>, String> {
    let at = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("config file {at}: {e}"))?;
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|e| format!("config file {at}: not YAML: {e}"))?;
    let map = match doc {
        serde_yaml::Value::Mapping(m) => m,
        serde_yaml::Value::Null => return Ok(Vec::new()),
        _ => return Err(format!("config file {at}: must be a mapping of settings")),
    };
    let known = settable();
    let mut flags = Vec::new();
    for (key, value) in map {
        let key = key
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{key:?}"));
        let long = kebab(&key);
        let Some(arg) = known.iter().find(|a| a.get_long() == Some(long.as_str())) else {
            return Err(format!(
                "config file {at}: unknown setting {key:?} (settings are the flags of `weft controller` in camelCase, e.g. concurrentReconciles; `weft controller --print-config` lists them)"
            ));
        };
        let these =
            as_flags(&long, arg, &value).map_err(|e| format!("config file {at}: {key}: {e}"))?;
        check(&these).map_err(|e| format!("config file {at}: {key}: {e}"))?;
        flags.extend(these);
    }
    Ok(flags)
}

/// One setting as command-line flags.
fn as_flags(long: &str, arg: &clap::Arg, value: &serde_yaml::Value) -> Result<Vec<String>, String> {
    use serde_yaml::Value as Y;
    let takes_value = arg.get_action().takes_values();
    let scalar = |v: &Y| match v {
        Y::String(s) => Ok(s.clone()),
        Y::Number(n) => Ok(n.to_string()),
        Y::Bool(b) => Ok(b.to_string()),
        other => Err(format!("expected a single value, found {other:?}")),
    };
    match value {
        Y::Bool(on) if !takes_value => Ok(if *on {
            vec![format!("--{long}")]
        } else {
            Vec::new()
        }),
        _ if !takes_value => Err(format!("is a switch: true or false, found {value:?}")),
        Y::Sequence(items) => items
            .iter()
            .map(|v| scalar(v).map(|s| format!("--{long}={s}")))
            .collect(),
        v => Ok(vec![format!("--{long}={}", scalar(v)?)]),
    }
}

/// Parses `flags` alone as `weft controller`'s, so a bad value fails here
/// with clap's own words.
fn check(flags: &[String]) -> Result<(), String> {
    let argv = ["weft", SUBCOMMAND]
        .iter()
        .map(|s| s.to_string())
        .chain(flags.iter().cloned());
    match super::Cli::command().try_get_matches_from(argv) {
        Ok(_) => Ok(()),
        Err(e) => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            Err(first.trim_start_matches("error: ").to_string())
        }
    }
}

/// `concurrentReconciles` -> `concurrent-reconciles`.
fn kebab(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `concurrent-reconciles` -> `concurrentReconciles`.
fn camel(long: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in long.chars() {
        if c == '-' {
            up = true;
        } else if up {
            out.push(c.to_ascii_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The controller's effective settings as a config file (YAML), each
/// with where it came from.
pub fn print(controller: &ArgMatches) -> String {
    let mut out = String::from(
        "# weft controller: effective settings (flags > config file > environment > defaults)\n",
    );
    for arg in settable() {
        let id = arg.get_id().as_str();
        let Some(values) = controller.get_raw(id) else {
            let line = format!("# {}: (not set)\n", camel(arg.get_long().unwrap_or(id)));
            out.push_str(&line);
            continue;
        };
        let values: Vec<String> = values.map(|v| v.to_string_lossy().into_owned()).collect();
        let source = match controller.value_source(id) {
            Some(ValueSource::DefaultValue) => "default",
            Some(ValueSource::EnvVariable) => "environment",
            _ => "flag or config file",
        };
        let value = match values.as_slice() {
            [] => "true".to_string(),
            [one] => yaml_scalar(one),
            many => format!(
                "[{}]",
                many.iter()
                    .map(|v| yaml_scalar(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let key = camel(arg.get_long().unwrap_or(id));
        out.push_str(&format!("{key}: {value}  # {source}\n"));
    }
    out
}

/// A value as YAML would read it back as the same string.
fn yaml_scalar(v: &str) -> String {
    if matches!(v, "true" | "false") || v.parse::<f64>().is_ok() {
        return v.to_string();
    }
    serde_yaml::to_string(v).map_or_else(|_| format!("{v:?}"), |s| s.trim_end().to_string())
}

#[cfg(test)]
mod tests;
