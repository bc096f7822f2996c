//! Compiles the admin API's protobuf with protox (pure Rust, so no system
//! `protoc`) and generates the tonic service and messages from it. The
//! descriptor set is kept for gRPC server reflection. Messages derive
//! `serde::Serialize` so middleware that asks for the request body gets it
//! as JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

use protox::prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    console()?;
    admin_api()
}

/// Builds the web console (`console/`, Vite) into `$OUT_DIR/console`,
/// which `admin::assets` embeds: `npm ci` when its packages are missing,
/// then `npm run build` (code generation from the admin proto, type
/// check, bundle). Cargo reruns this only when the console's sources or
/// the proto change.
fn console() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new("console");
    for watched in [
        "src",
        "index.html",
        "package.json",
        "package-lock.json",
        "vite.config.ts",
        "tsconfig.json",
        "buf.gen.yaml",
        "scripts",
    ] {
        println!("cargo:rerun-if-changed=console/{watched}");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("console");
    // A console built elsewhere (a packaging stage with Node.js, say).
    println!("cargo:rerun-if-env-changed=WEFT_CONSOLE_DIST");
    if let Some(dist) = std::env::var_os("WEFT_CONSOLE_DIST") {
        return copy_dir(Path::new(&dist), &out);
    }
    let npm = |args: &[&str]| -> Result<(), Box<dyn std::error::Error>> {
        let status = Command::new("npm")
            .args(args)
            .current_dir(dir)
            .status()
            .map_err(|e| format!("the web console needs npm (Node.js 20+) to build: {e}"))?;
        if !status.success() {
            return Err(format!(
                "building the web console: `npm {}` failed ({status})",
                args.join(" ")
            )
            .into());
        }
        Ok(())
    };
    if !dir.join("node_modules").is_dir() {
        npm(&["ci", "--no-audit", "--no-fund"])?;
    }
    let out_dir = out.to_str().ok_or("OUT_DIR is not UTF-8")?;
    npm(&["run", "build", "--", "--outDir", out_dir, "--emptyOutDir"])
}

/// The admin API's gRPC code and descriptor set.
fn admin_api() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/weft/admin/v1/admin.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("admin_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .type_attribute(".weft.admin.v1", "#[derive(serde::Serialize)]")
        .type_attribute(".weft.admin.v1", "#[serde(rename_all = \"camelCase\")]")
        .compile_fds(fds)?;
    Ok(())
}

/// Copies the files under `from` to `to` (replacing it).
fn copy_dir(from: &Path, to: &Path) -> Result<(), Box<dyn std::error::Error>> {
    if !from.join("index.html").is_file() {
        return Err(format!("WEFT_CONSOLE_DIST={}: no index.html there", from.display()).into());
    }
    let _ = std::fs::remove_dir_all(to);
    copy_dir_all(from, to)
}

fn copy_dir_all(from: &Path, to: &Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir_all(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
