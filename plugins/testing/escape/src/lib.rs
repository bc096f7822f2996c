//! Tries every way out of the sandbox that WASI 0.2 offers a guest: the
//! preopened directories and a host file through them, the working
//! directory, TCP connect and listen, UDP bind, name resolution, the
//! environment and the arguments. Each outcome goes into an annotation of
//! the Pod it returns, `denied: ...`, `empty: ...` or `leaked: ...`, for
//! the host test to check.

use weft_plugin_sdk::{json, Map, PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

#[allow(missing_docs, clippy::all)]
mod bindings {
    wit_bindgen::generate!({
        inline: "
            package weft-test:escape;
            world attempts {
                import wasi:filesystem/preopens@0.2.12;
                import wasi:cli/environment@0.2.12;
                import wasi:sockets/instance-network@0.2.12;
                import wasi:sockets/tcp-create-socket@0.2.12;
                import wasi:sockets/udp-create-socket@0.2.12;
                import wasi:sockets/ip-name-lookup@0.2.12;
            }
        ",
        path: "../../../wit/plugin-0.2",
        world: "weft-test:escape/attempts",
        generate_all,
    });
}

use bindings::wasi::cli::environment;
use bindings::wasi::filesystem::{preopens, types as fs};
use bindings::wasi::sockets::network::{
    ErrorCode, IpAddressFamily, IpSocketAddress, Ipv4SocketAddress, Network,
};
use bindings::wasi::sockets::{
    instance_network, ip_name_lookup, tcp_create_socket, udp_create_socket,
};

fn outcome<T: std::fmt::Debug, E: std::fmt::Debug>(r: Result<T, E>) -> String {
    match r {
        Ok(v) => format!("leaked: {:.200}", format!("{v:?}")),
        Err(e) => format!("denied: {e:?}"),
    }
}

fn listing<T: std::fmt::Debug>(what: &str, items: &[T]) -> String {
    if items.is_empty() {
        format!("empty: no {what}")
    } else {
        format!("leaked: {:.200}", format!("{items:?}"))
    }
}

const LOOPBACK_SSH: IpSocketAddress = IpSocketAddress::Ipv4(Ipv4SocketAddress {
    port: 22,
    address: (127, 0, 0, 1),
});
const ANY_PORT: IpSocketAddress = IpSocketAddress::Ipv4(Ipv4SocketAddress {
    port: 0,
    address: (0, 0, 0, 0),
});

/// Opens `etc/passwd` under every preopened directory (there should be none).
fn read_host_file(dirs: &[(fs::Descriptor, String)]) -> String {
    if dirs.is_empty() {
        return "denied: no preopened directory to open /etc/passwd from".into();
    }
    let opened: Vec<String> = dirs
        .iter()
        .map(|(dir, name)| {
            let file = dir.open_at(
                fs::PathFlags::empty(),
                "etc/passwd",
                fs::OpenFlags::empty(),
                fs::DescriptorFlags::READ,
            );
            format!("{name}: {}", outcome(file.map(|_| "opened")))
        })
        .collect();
    if opened.iter().all(|o| o.contains("denied")) {
        format!("denied: {opened:?}")
    } else {
        format!("leaked: {opened:?}")
    }
}

/// Connects to 127.0.0.1:22, waiting for the handshake if it starts.
fn connect(net: &Network) -> Result<&'static str, ErrorCode> {
    let socket = tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)?;
    socket.start_connect(net, LOOPBACK_SSH)?;
    loop {
        match socket.finish_connect() {
            Err(ErrorCode::WouldBlock) => socket.subscribe().block(),
            other => return other.map(|_| "connected to 127.0.0.1:22"),
        }
    }
}

/// Binds a TCP socket to any port and listens on it.
fn listen(net: &Network) -> Result<&'static str, ErrorCode> {
    let socket = tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)?;
    socket.start_bind(net, ANY_PORT)?;
    socket.finish_bind()?;
    socket.start_listen()?;
    socket.finish_listen().map(|_| "listening")
}

/// Binds a UDP socket to any port.
fn udp_bind(net: &Network) -> Result<&'static str, ErrorCode> {
    let socket = udp_create_socket::create_udp_socket(IpAddressFamily::Ipv4)?;
    socket.start_bind(net, ANY_PORT)?;
    socket.finish_bind().map(|_| "bound")
}

/// Resolves a public name, waiting for the first address.
fn resolve(net: &Network) -> Result<String, ErrorCode> {
    let stream = ip_name_lookup::resolve_addresses(net, "example.com")?;
    loop {
        match stream.resolve_next_address() {
            Err(ErrorCode::WouldBlock) => stream.subscribe().block(),
            other => return other.map(|a| format!("example.com is {a:?}")),
        }
    }
}

struct Escape;

impl TaskPlugin for Escape {
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        let net = instance_network::instance_network();
        let dirs = preopens::get_directories();
        let names: Vec<&str> = dirs.iter().map(|(_, name)| name.as_str()).collect();
        let attempts = [
            ("preopens", listing("preopened directories", &names)),
            ("read-file", read_host_file(&dirs)),
            (
                "initial-cwd",
                listing(
                    "working directory",
                    &Vec::from_iter(environment::initial_cwd()),
                ),
            ),
            ("connect", outcome(connect(&net))),
            ("listen", outcome(listen(&net))),
            ("udp-bind", outcome(udp_bind(&net))),
            ("resolve", outcome(resolve(&net))),
            ("env", listing("variables", &environment::get_environment())),
            ("args", listing("arguments", &environment::get_arguments())),
        ];
        let annotations: Map<String, Value> = attempts
            .into_iter()
            .map(|(k, v)| (format!("escape.weft.dev/{k}"), Value::String(v)))
            .collect();
        Ok(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": ctx.resource_name, "annotations": annotations},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
        }))
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(Escape);
