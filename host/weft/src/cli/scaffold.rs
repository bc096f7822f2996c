//! `weft plugin new`: a new plugin from the SDK templates, like `spin new`
//! or `kwctl scaffold`. The templates are the SDKs' own (`sdk/*/template`),
//! compiled into the binary, so it works outside the repository too.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

/// The languages Weft has SDKs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// `sdk/rust`: a crate with `weft-plugin-sdk`.
    Rust,
    /// `sdk/python`: componentize-py.
    Python,
    /// `sdk/js`: componentize-qjs (QuickJS), or componentize-js.
    Js,
    /// `sdk/c`: zig and wit-bindgen's C generator.
    C,
}

/// The plugin worlds a scaffold can start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum World {
    /// `k8s-task-plugin`: build a Kubernetes resource per task.
    Task,
    /// `webapi-task-plugin`: create / get / delete a job of a remote API.
    Webapi,
}

/// Arguments of `weft plugin new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name (a DNS-1123 label); also its task type and folder.
    pub name: String,
    /// The language.
    #[arg(long, value_enum)]
    pub lang: Lang,
    /// What kind of task plugin: `task` builds a Kubernetes resource
    /// (k8s-task-plugin); `webapi` runs the task in a remote service over
    /// HTTP (webapi-task-plugin, docs/webapi.md).
    #[arg(long, value_enum, default_value_t = World::Task)]
    pub world: World,
    /// Where the plugin's folder goes.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The Weft SDK folder (`sdk/` of the repository), for the build
    /// commands and the Rust crate's path dependency; default: the one this
    /// `weft` was built from, if it is still there.
    #[arg(long)]
    pub sdk: Option<PathBuf>,
}

/// One template: (path in the new folder, contents).
type Template = &'static [(&'static str, &'static str)];

macro_rules! files {
    ($dir:literal: $($f:literal),+) => {
        &[$(($f, include_str!(concat!("../../../../sdk/", $dir, "/", $f)))),+]
    };
}

const RUST: Template = files!("rust/template": "Cargo.toml", "src/lib.rs", "weft-plugin.yaml", "task.json", "README.md");
const PYTHON: Template =
    files!("python/template": "plugin.py", "test_plugin.py", "weft-plugin.yaml", "task.json");
const JS: Template =
    files!("js/template": "plugin.js", "plugin.test.js", "weft-plugin.yaml", "task.json");
const C: Template = files!("c/template": "plugin.c", "weft-plugin.yaml", "task.json", "README.md");
const RUST_WEBAPI: Template = files!("rust/template-webapi": "Cargo.toml", "src/lib.rs", "weft-plugin.yaml", "task.json", "README.md");
// The Python and JavaScript web-API templates are the SDKs' http-job
// examples (tested in sdk_webapi.rs), renamed by `render`.
const PYTHON_WEBAPI: Template = files!("python/examples/http-job": "plugin.py", "test_plugin.py", "weft-plugin.yaml", "task.json");
const JS_WEBAPI: Template =
    files!("js/examples/http-job": "plugin.js", "plugin.test.js", "weft-plugin.yaml", "task.json");

/// The name every template uses for itself (and its task type).
const PLACEHOLDER: &str = "my-task";

impl Lang {
    /// The template of a plugin of `world` in this language.
    fn template(self, world: World) -> anyhow::Result<Template> {
        Ok(match (world, self) {
            (World::Task, Lang::Rust) => RUST,
            (World::Task, Lang::Python) => PYTHON,
            (World::Task, Lang::Js) => JS,
            (World::Task, Lang::C) => C,
            (World::Webapi, Lang::Rust) => RUST_WEBAPI,
            (World::Webapi, Lang::Python) => PYTHON_WEBAPI,
            (World::Webapi, Lang::Js) => JS_WEBAPI,
            (World::Webapi, Lang::C) => bail!(
                "--world webapi: the C SDK has no HTTP client yet; use --lang rust, python or js"
            ),
        })
    }

    fn sdk_dir(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::C => "c",
        }
    }
}

/// `my-task` -> `MyTask`.
fn camel(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or_else(String::new, |f| {
                f.to_ascii_uppercase().to_string() + c.as_str()
            })
        })
        .collect()
}

/// The template's text with its own name replaced by `name`.
fn render(lang: Lang, text: &str, name: &str, sdk: &Path) -> String {
    let ph = PLACEHOLDER;
    // The http-job examples' names (plugin, then task type).
    let text = text
        .replace("py-http-job", ph)
        .replace("js-http-job", ph)
        .replace("http-job", ph);
    let mut out = text
        .replace(ph, name)
        .replace(&ph.replace('-', "_"), &name.replace('-', "_"))
        .replace(&camel(ph), &camel(name));
    if lang == Lang::Rust {
        let sdk_rust = sdk.join("rust");
        out = out.replace(
            "path = \"../\"",
            &format!("path = {:?}", sdk_rust.display().to_string()),
        );
    }
    out
}

/// The SDK folder this binary was built from, if it is still there.
fn default_sdk() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk");
    p.join("rust/Cargo.toml")
        .is_file()
        .then(|| p.canonicalize().unwrap_or(p))
}

/// Run `weft plugin new`.
pub fn new(args: NewArgs) -> anyhow::Result<ExitCode> {
    if let Err(problem) = weft_plugin::manifest::check_dns_label(&args.name) {
        bail!("plugin name {:?}: {problem}", args.name);
    }
    let sdk = match args.sdk.clone().or_else(default_sdk) {
        Some(s) => s,
        None => bail!(
            "cannot find the Weft SDK folder this weft was built from: pass --sdk <repository>/sdk"
        ),
    };
    let target = args.dir.join(&args.name);
    if target.exists() {
        bail!(
            "{} already exists: choose another name or --dir",
            target.display()
        );
    }
    let template = args.lang.template(args.world)?;
    for (file, text) in template {
        let path = target.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, render(args.lang, text, &args.name, &sdk))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    super::out(&next_steps(
        args.lang, args.world, &args.name, &target, &sdk,
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn next_steps(lang: Lang, world: World, name: &str, dir: &Path, sdk: &Path) -> String {
    let d = dir.display();
    let s = sdk.join(lang.sdk_dir());
    let s = s.display();
    let build = match lang {
        Lang::Rust => format!("cd {d} && cargo test\n  (build the component: see {d}/README.md)"),
        Lang::Python => {
            format!("(cd {d} && PYTHONPATH={s} python3 -m unittest)\n  {s}/build.sh {d} out")
        }
        Lang::Js => format!(
            "(cd {d} && node --import {s}/testing/register.js --test)\n  {s}/build.sh {d} out"
        ),
        Lang::C => format!("{s}/build.sh {d} out"),
    };
    let (kind, check) = match world {
        World::Task => ("", "--conformance"),
        World::Webapi => (
            "web-API ",
            "--record api.json   (then --replay api.json, offline)",
        ),
    };
    format!(
        "created {d}: a {lang:?} {kind}plugin serving task type {name:?}\nnext:\n  {build}\n  weft plugin test out/{name}.wasm --task {d}/task.json {check}\n  weft plugin push out/{name}.wasm --wait\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_replaced_in_every_spelling() {
        let sdk = Path::new("/opt/weft/sdk");
        let text = "name: my-task\nstruct MyTask; my_task\npath = \"../\"";
        assert_eq!(
            render(Lang::Rust, text, "ray-job", sdk),
            "name: ray-job\nstruct RayJob; ray_job\npath = \"/opt/weft/sdk/rust\""
        );
        assert_eq!(
            render(Lang::C, "taskTypes: [my-task]", "x", sdk),
            "taskTypes: [x]"
        );
    }
}
