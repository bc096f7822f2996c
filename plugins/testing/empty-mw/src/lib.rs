//! The floor of a middleware call: the raw WIT export, no SDK glue, no
//! metadata read. Every call proceeds with no edits, so instantiate + call
//! of this component is what the sandbox costs a gRPC call per middleware;
//! the admin bench chains four of it next to the four first-party plugins.

use weft_plugin_sdk::wit::middleware::exports::weft::plugin::middleware::{
    Call, Guest, MetadataEdits, Verdict,
};

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

struct EmptyMw;

impl Guest for EmptyMw {
    fn on_request(_call: Call) -> Verdict {
        Verdict::Proceed(MetadataEdits {
            set: Vec::new(),
            remove: Vec::new(),
        })
    }
}

#[cfg(target_arch = "wasm32")]
weft_plugin_sdk::wit::middleware::export!(EmptyMw with_types_in weft_plugin_sdk::wit::middleware);
