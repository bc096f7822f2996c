//! Tries every way out of the sandbox a WASI guest has: read a host file,
//! list a directory, open a socket, resolve a name, read the environment
//! and the arguments. Each outcome goes into an annotation of the Pod it
//! returns, `denied: ...` or `leaked: ...`, for the host test to check.

use weft_plugin_sdk::{json, Map, PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

fn outcome<T: std::fmt::Debug, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(v) => format!("leaked: {:.200}", format!("{v:?}")),
        Err(e) => format!("denied: {e}"),
    }
}

struct Escape;

impl TaskPlugin for Escape {
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        let mut a = Map::new();
        let mut put = |k: &str, v: String| {
            a.insert(format!("escape.weft.dev/{k}"), Value::String(v));
        };
        put("read-file", outcome(std::fs::read_to_string("/etc/passwd")));
        put(
            "read-relative-file",
            outcome(std::fs::read_to_string("Cargo.toml")),
        );
        put(
            "list-dir",
            outcome(std::fs::read_dir("/").map(|d| d.count())),
        );
        put(
            "write-file",
            outcome(std::fs::write("/tmp/weft-escape", b"x")),
        );
        put(
            "connect",
            outcome(std::net::TcpStream::connect("127.0.0.1:22")),
        );
        put(
            "resolve",
            outcome(std::net::ToSocketAddrs::to_socket_addrs("example.com:80").map(|a| a.count())),
        );
        let vars: Vec<(String, String)> = std::env::vars().collect();
        put(
            "env",
            if vars.is_empty() {
                "empty: no variables".into()
            } else {
                format!("leaked: {vars:?}")
            },
        );
        let args: Vec<String> = std::env::args().collect();
        put(
            "args",
            if args.is_empty() {
                "empty: no arguments".into()
            } else {
                format!("leaked: {args:?}")
            },
        );
        Ok(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": ctx.resource_name, "annotations": a},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
        }))
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(Escape);
