//! A web-API test guest: `create` makes the requests its task config lists
//! (`{requests: [{method, url, body?, header?: [name, value]}], spinMs?}`)
//! and answers what each got as its meta, swallowing errors, so the tests
//! see what the host decides whatever the guest does. `spinMs` burns guest
//! time after the requests (the deadline counts only that). `get` answers
//! success with the meta as outputs; `delete` does nothing.

use serde::Deserialize;
use weft_plugin_sdk::{
    clock, http, json, PhaseInfo, PluginError, TaskContext, Value, WebApiPlugin,
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    requests: Vec<Req>,
    #[serde(default)]
    spin_ms: u64,
}

#[derive(Deserialize)]
struct Req {
    method: String,
    url: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    header: Option<(String, String)>,
}

struct Fetch;

impl WebApiPlugin for Fetch {
    fn create(ctx: TaskContext, key: &str) -> Result<String, PluginError> {
        let config: Config = ctx.config_as()?;
        let mut got = Vec::new();
        for r in config.requests {
            let mut req = http::Request::new(r.method, r.url);
            if let Some(b) = r.body {
                req = req.with_body(b.into_bytes());
            }
            if let Some((k, v)) = r.header {
                req = req.with_header(k, v);
            }
            got.push(match req.send() {
                Ok(resp) => {
                    let text = resp.text();
                    let body: String = text.chars().take(200).collect();
                    json!({"status": resp.status, "len": text.len(), "body": body})
                }
                Err(e) => json!({"error": e.to_string()}),
            });
        }
        let start = clock::monotonic_nanos();
        while clock::monotonic_nanos() - start < config.spin_ms * 1_000_000 {}
        Ok(json!({"key": key, "got": got}).to_string())
    }

    fn get(_ctx: TaskContext, meta: &str) -> Result<PhaseInfo, PluginError> {
        let v: Value =
            serde_json::from_str(meta).map_err(|e| PluginError::permanent(e.to_string()))?;
        Ok(PhaseInfo::success(v.as_object().cloned()))
    }

    fn delete(_ctx: TaskContext, _meta: &str) -> Result<(), PluginError> {
        Ok(())
    }
}

weft_plugin_sdk::export_webapi_plugin!(Fetch);
