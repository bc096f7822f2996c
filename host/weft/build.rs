//! Compiles the admin API's protobuf with protox (pure Rust, so no system
//! `protoc`) and generates the tonic service and messages from it. The
//! descriptor set is kept for gRPC server reflection. Messages derive
//! `serde::Serialize` so middleware that asks for the request body gets it
//! as JSON.

use std::path::PathBuf;

use protox::prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
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
