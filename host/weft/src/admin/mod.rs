//! The admin API: flyteadmin's execution calls over gRPC (tonic), with
//! request policy in WebAssembly middleware.
//!
//! Served by `weft controller`, `weft dev` and `weft run --serve`, with the
//! standard `grpc.health.v1` and server reflection services beside it.
//! Every AdminService call passes the [`chain`]: built-in recovery, request
//! ids and metrics, then the Wasm plugins of the `unary-middleware` slot;
//! the service then checks the namespace [`Authorization`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use http::HeaderValue;
use kube::Client;
use serde::Deserialize;
use tonic::transport::Server;
use weft_plugin::Registry;

use crate::metrics::Metrics;
use crate::pod_io::PodIo;

pub mod assets;
pub mod authz;
pub mod chain;
pub mod console;
pub mod identity;
mod request;
pub mod service;
pub mod tls;
pub mod view;

pub use authz::Authorization;
pub use chain::{Caller, Chain, Selection};
pub use service::AdminService;

/// The generated protobuf messages, client and server of `weft.admin.v1`.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    tonic::include_proto!("weft.admin.v1");

    /// The encoded descriptors of `admin.proto`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/admin_descriptor.bin"));
}

/// The largest request the admin API takes unless configured: 4 MiB, gRPC's default.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 20;

/// How the admin API is served (the `--admin-config` file, YAML).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdminConfig {
    /// Where to listen. Loopback unless said otherwise: the dev commands
    /// must not open the API to the network by accident.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// TLS; plaintext when absent.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// The Wasm middleware to run, in order, by plugin name. Absent: every
    /// plugin of the `unary-middleware` slot, in the registry's order.
    #[serde(default)]
    pub middleware: Option<Vec<String>>,
    /// How callers authenticate beside the middleware: OpenID Connect for
    /// people, TokenReviews for service accounts.
    #[serde(default)]
    pub authentication: identity::AuthenticationConfig,
    /// Who may do what: the cluster's RBAC (`kubernetes`) or the
    /// principal-to-namespaces map. Absent: no check (every caller the
    /// middleware lets through may do everything).
    #[serde(default)]
    pub authorization: Option<Authorization>,
    /// Requests larger than this are answered RESOURCE_EXHAUSTED.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// The data proxy's limits (CreateUploadLocation).
    #[serde(default)]
    pub data_proxy: DataProxyConfig,
}

/// What the data proxy signs uploads for (`dataProxy` in the config file).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataProxyConfig {
    /// The largest upload signed for, in bytes (`--max-upload-size`).
    #[serde(default = "default_max_upload_bytes")]
    pub max_upload_bytes: u64,
    /// Content types an upload may declare (`text/csv`, `application/*`);
    /// empty: any.
    #[serde(default)]
    pub content_types: Vec<String>,
}

/// The default upload limit: 5 GiB, the most one S3 PutObject (which a
/// presigned PUT is) takes.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 5 << 30;

fn default_max_upload_bytes() -> u64 {
    DEFAULT_MAX_UPLOAD_BYTES
}

impl Default for DataProxyConfig {
    fn default() -> Self {
        DataProxyConfig {
            max_upload_bytes: DEFAULT_MAX_UPLOAD_BYTES,
            content_types: Vec::new(),
        }
    }
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8081))
}

fn default_max_message_bytes() -> usize {
    DEFAULT_MAX_MESSAGE_BYTES
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: default_listen(),
            tls: None,
            middleware: None,
            authentication: identity::AuthenticationConfig::default(),
            authorization: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            data_proxy: DataProxyConfig::default(),
        }
    }
}

/// Server certificate and key (PEM), and the CA that client certificates
/// must chain to when clients authenticate with certificates.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM).
    pub cert: PathBuf,
    /// The server's private key (PEM).
    pub key: PathBuf,
    /// Require client certificates signed by this CA (PEM).
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// With `clientCa`: accept clients without a certificate too.
    #[serde(default)]
    pub client_auth_optional: bool,
}

impl AdminConfig {
    /// Reads a config file; errors name the file and the problem.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("admin config {}: cannot read", path.display()))?;
        serde_yaml::from_str(&text)
            .with_context(|| format!("admin config {}: invalid", path.display()))
    }
}

/// A running admin server.
pub struct AdminServer {
    /// The address it listens on (the real port when the config asked for 0).
    pub addr: SocketAddr,
    /// The server task; it ends when the shutdown future resolves.
    pub task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    tls: bool,
}

impl AdminServer {
    /// Where a browser opens the web console (served on the admin port).
    pub fn console_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/", self.addr)
    }
}

/// Binds and serves the admin API until `shutdown` resolves, without an
/// artifact repository (the data proxy's calls answer FAILED_PRECONDITION).
pub async fn serve(
    config: &AdminConfig,
    client: Client,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<AdminServer> {
    serve_with_artifacts(config, client, registry, metrics, None, shutdown).await
}

/// Binds and serves the admin API until `shutdown` resolves; the data
/// proxy signs URLs of `artifacts`' store (the repository the controller
/// gives pods).
pub async fn serve_with_artifacts(
    config: &AdminConfig,
    client: Client,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    artifacts: Option<Arc<PodIo>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<AdminServer> {
    let planes = Planes {
        artifacts,
        history: None,
    };
    serve_with(config, client, registry, metrics, planes, shutdown).await
}

/// What the admin API serves beside Workflow resources: the data plane's
/// store (the data proxy) and the execution history (archived runs).
#[derive(Clone, Default)]
pub struct Planes {
    /// The store the data proxy signs URLs of.
    pub artifacts: Option<Arc<PodIo>>,
    /// The history ListExecutions and GetExecution read archived runs from.
    pub history: Option<Arc<crate::history::History>>,
}

/// Binds and serves the admin API with `planes` until `shutdown` resolves.
pub async fn serve_with(
    config: &AdminConfig,
    client: Client,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    planes: Planes,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<AdminServer> {
    let selection = match &config.middleware {
        Some(names) => Selection::Named(names.clone()),
        None => Selection::Slot,
    };
    let authn = authenticator(&config.authentication, &client);
    let chain =
        Chain::new(registry.clone(), selection, metrics.clone()).with_authentication(authn.clone());
    let service = AdminService::new(
        client,
        registry,
        chain,
        config.authorization.clone(),
        metrics,
    )
    .with_data_proxy(planes.artifacts, config.data_proxy.clone())
    .with_history(planes.history);
    let admin = pb::admin_service_server::AdminServiceServer::new(service)
        .max_decoding_message_size(config.max_message_bytes);
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<pb::admin_service_server::AdminServiceServer<AdminService>>()
        .await;
    // Reflection v1, and v1alpha for the clients that speak only that
    // (grpcio-reflection, grpcui, Postman, older grpcurl).
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .context("admin API: server reflection v1alpha")?;
    let reflection = reflection()
        .build_v1()
        .context("admin API: server reflection")?;

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("admin API: cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let tls_config = config.tls.as_ref().map(tls::server_config).transpose()?;
    // HTTP/1.1 for browsers: the console's files and gRPC-Web calls,
    // which go through the same services (and middleware) as gRPC. With
    // TLS, ALPN offers both (see `tls`), so they work there too.
    let router = Server::builder()
        .accept_http1(true)
        .layer(assets::ConsoleLayer {
            auth: authn,
            tls: config.tls.is_some(),
        })
        .layer(tonic_web::GrpcWebLayer::new())
        .layer(tower::util::MapResponseLayer::new(
            oversized_is_resource_exhausted,
        ))
        .add_service(health)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(admin);
    let task = match tls_config {
        Some(c) => {
            tokio::spawn(router.serve_with_incoming_shutdown(tls::incoming(listener, c), shutdown))
        }
        None => tokio::spawn(router.serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown,
        )),
    };
    tracing::info!(%addr, tls = config.tls.is_some(), "serving the admin API");
    Ok(AdminServer {
        addr,
        task,
        tls: config.tls.is_some(),
    })
}

/// The host's authenticators, when any is configured.
fn authenticator(
    config: &identity::AuthenticationConfig,
    client: &Client,
) -> Option<Arc<identity::Authenticator>> {
    let any = config.oidc.is_some() || config.token_review;
    any.then(|| Arc::new(identity::Authenticator::new(config.clone(), client.clone())))
}

/// tonic answers a request over the size limit with OUT_OF_RANGE; gRPC's
/// own servers (and clients' retry logic) use RESOURCE_EXHAUSTED for it.
fn oversized_is_resource_exhausted<B>(mut resp: http::Response<B>) -> http::Response<B> {
    let headers = resp.headers_mut();
    let oversized = headers.get("grpc-status").is_some_and(|s| s == "11")
        && headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .is_some_and(|m| m.contains("length%20too%20large") || m.contains("length too large"));
    if oversized {
        headers.insert("grpc-status", HeaderValue::from_static("8"));
    }
    resp
}
