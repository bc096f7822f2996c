//! The patch handlers as a fuzz target: merge patch (RFC 7386), JSON
//! patch (RFC 6902), strategic merge patch, and server-side apply's field
//! sets, on an object and a patch a client controls. They must answer with
//! an error, never a panic (`tests/fuzz_smoke.rs`, docs/fuzzing.md).

use serde_json::Value;

use crate::patch;

/// Bytes as `OBJECT\n---\nPATCH` (both JSON), put through every handler.
pub fn patches(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some((object, patch_text)) = text.split_once("\n---\n") else {
        return;
    };
    let (Ok(object), Ok(p)) = (
        serde_json::from_str::<Value>(object),
        serde_json::from_str::<Value>(patch_text),
    ) else {
        return;
    };
    let mut merged = object.clone();
    patch::merge_patch(&mut merged, &p);
    let mut patched = object.clone();
    let _ = patch::json_patch(&mut patched, &p, "widgets", "fuzz");
    let smp = patch::strategic_merge(&object, &p);
    for v in [&object, &merged, &smp] {
        let fields = patch::to_fields_v1(&patch::leaf_paths(v));
        let _ = patch::from_fields_v1(&fields);
        let _ = patch::read_managed(v);
    }
}
