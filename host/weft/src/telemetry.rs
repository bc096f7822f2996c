//! Logging and tracing set-up shared by every subcommand: log lines on
//! stderr (text or JSON), and, when an OTLP endpoint is given, the same
//! spans (reconcile → node → plugin call → apply → status patch) exported
//! as OpenTelemetry traces over gRPC.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _, fmt};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines on stderr.
    #[default]
    Text,
    /// One JSON object per line, for log collectors; the fields of the
    /// current span (workflow, namespace, node) are on every line.
    Json,
}

/// Keeps the trace pipeline alive; dropping it flushes the spans not yet
/// exported (so a process stopped by SIGTERM loses none).
#[derive(Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            eprintln!("warning: flushing traces: {e}");
        }
    }
}

/// Why tracing could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The exporter's own runtime.
    #[error("starting the OTLP exporter's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The OTLP exporter (a malformed endpoint, say).
    #[error("OTLP endpoint {endpoint:?}: {source}")]
    Exporter {
        /// The endpoint.
        endpoint: String,
        /// What the exporter said.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// The OTLP gRPC exporter with the Tokio runtime its client needs. The
/// SDK's batch processor exports from a thread of its own where no runtime
/// runs, and tonic cannot connect there (opentelemetry-rust#2673), so the
/// exporter brings one worker thread of its own.
#[derive(Debug)]
struct OtlpExporter {
    runtime: tokio::runtime::Runtime,
    inner: opentelemetry_otlp::SpanExporter,
}

impl OtlpExporter {
    fn new(endpoint: &str) -> Result<Self, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("weft-otlp")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let inner = {
            let _in_runtime = runtime.enter();
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .with_timeout(Duration::from_secs(5))
                .build()
                .map_err(|source| Error::Exporter {
                    endpoint: endpoint.to_string(),
                    source,
                })?
        };
        Ok(OtlpExporter { runtime, inner })
    }
}

impl SpanExporter for OtlpExporter {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        std::future::ready(self.runtime.block_on(self.inner.export(batch)))
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
}

/// Installs the global subscriber. `RUST_LOG` overrides the log level;
/// plugin log lines carry `plugin` and `call` fields. With `otlp` (an
/// endpoint such as `http://otel-collector:4317`), Weft's spans are
/// exported whatever the log level.
pub fn init(format: LogFormat, verbose: u8, otlp: Option<&str>) -> Result<Telemetry, Error> {
    // Plugin log lines are the plugin author's output: shown at info
    // whatever the host's level (see weft_plugin::PLUGIN_LOG_TARGET).
    let default = match verbose {
        0 => "warn,plugin=info",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let logs = match format {
        LogFormat::Text => fmt::layer().with_writer(std::io::stderr).boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .boxed(),
    }
    .with_filter(filter);
    let (traces, provider) = match otlp {
        Some(endpoint) => {
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(OtlpExporter::new(endpoint)?)
                .with_resource(
                    opentelemetry_sdk::Resource::builder()
                        .with_service_name("weft")
                        .build(),
                )
                .build();
            let layer = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("weft"))
                .with_filter(Targets::new().with_target("weft", LevelFilter::INFO));
            (Some(layer), Some(provider))
        }
        None => (None, None),
    };
    // A second init (tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .try_init();
    Ok(Telemetry { provider })
}
