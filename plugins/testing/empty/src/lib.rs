//! The floor of a plugin call: the raw WIT export, no SDK glue, no JSON
//! parsing. Its build-resource answers a constant Pod, so instantiate +
//! call of this component is what the sandbox itself costs; the pod bench
//! reports it next to every row.

use weft_plugin_sdk::wit::host::types::{PhaseInfo, PluginError, TaskContext};
use weft_plugin_sdk::wit::task::exports::weft::plugin::k8s_task::{
    AbortBehaviour, Guest, TaskProperties,
};

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

struct Empty;

impl Guest for Empty {
    fn properties() -> TaskProperties {
        TaskProperties {
            abort: AbortBehaviour::Delete,
            delete_on_finish: false,
        }
    }

    fn build_resource(_ctx: TaskContext) -> Result<String, PluginError> {
        Ok(r#"{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"main","image":"busybox"}]}}"#.into())
    }

    fn get_task_phase(_ctx: TaskContext, _observed: String) -> Result<PhaseInfo, PluginError> {
        Err(PluginError {
            message: "the empty plugin only builds".into(),
            retryable: false,
        })
    }
}

#[cfg(target_arch = "wasm32")]
weft_plugin_sdk::wit::task::export!(Empty with_types_in weft_plugin_sdk::wit::task);
