//! The plugin manifest reader as a fuzz target: bytes a plugin author (or
//! anyone who can write a plugin ConfigMap) controls. It must answer with
//! an error, never a panic (`tests/fuzz_smoke.rs`).

/// Bytes as a manifest: parsed, validated, and its derived views read.
pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(m) = crate::Manifest::parse(text, "fuzz") {
        let _ = m.config_without_secret_refs();
        let _ = crate::manifest::check_dns_label(&m.name);
    }
    let _ = crate::manifest::parse_quantity(text);
}
