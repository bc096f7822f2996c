//! Host bindings generated from `wit/plugin`, in one place.
//!
//! The three worlds share their imports: the middleware world reuses the
//! task world's generated interfaces through `with:` so one `Host` impl
//! serves both, and the web-API world (`weft:plugin@0.2.0`) maps its own
//! onto the same host state.

/// Bindings of the `k8s-task-plugin` world.
#[allow(missing_docs)]
pub mod task {
    wasmtime::component::bindgen!({
        path: "../../wit/plugin",
        world: "k8s-task-plugin",
        imports: { default: trappable },
    });
}

/// Bindings of the `middleware-plugin` world.
#[allow(missing_docs)]
pub mod middleware {
    wasmtime::component::bindgen!({
        path: "../../wit/plugin",
        world: "middleware-plugin",
        imports: { default: trappable },
        with: {
            "weft:plugin/types": super::task::weft::plugin::types,
            "weft:plugin/log": super::task::weft::plugin::log,
            "weft:plugin/clock": super::task::weft::plugin::clock,
            "weft:plugin/state": super::task::weft::plugin::state,
        },
    });
}

/// Bindings of the `webapi-task-plugin` world of `weft:plugin@0.2.0`
/// (issue 20), served by [`crate::webapi`]. `wasi:http` and `wasi:io` are
/// wasmtime's own.
#[allow(missing_docs)]
pub mod webapi {
    wasmtime::component::bindgen!({
        path: "../../wit/plugin-0.2",
        world: "webapi-task-plugin",
        imports: { default: trappable },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
        },
        require_store_data_send: true,
    });
}
