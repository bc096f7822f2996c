//! A middleware for tests, driven by the call's `x-test` metadata:
//! `reject` rejects with PERMISSION_DENIED, `trap` panics, `loop` never
//! returns; otherwise it proceeds, setting `x-seen-by: mw-test` and a
//! per-peer call count kept in host state.

use weft_plugin_sdk::{state, Call, Code, MiddlewarePlugin, Verdict};

struct MwTest;

impl MiddlewarePlugin for MwTest {
    fn on_request(call: Call) -> Verdict {
        match call.metadata.get("x-test").map(String::as_str) {
            Some("reject") => Verdict::reject(
                Code::PermissionDenied,
                format!("mw-test rejects {}", call.method),
            ),
            Some("trap") => panic!("mw-test trapped on purpose"),
            Some("loop") => loop {
                std::hint::black_box(0u8);
            },
            _ => {
                let key = format!("calls/{}", call.peer.as_deref().unwrap_or("unknown"));
                let n = state::get(&key)
                    .and_then(|v| String::from_utf8(v).ok())
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or(0)
                    + 1;
                let _ = state::set(&key, n.to_string().as_bytes(), None);
                Verdict::proceed_setting("x-seen-by", "mw-test")
                    .and_set("x-peer-calls", n.to_string())
            }
        }
    }
}

weft_plugin_sdk::export_middleware_plugin!(MwTest);
