//! Logging set-up shared by every subcommand.

use tracing_subscriber::{EnvFilter, fmt};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines on stderr.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Install the global subscriber. `RUST_LOG` overrides the level; plugin
/// log lines carry `plugin` and `call` fields.
pub fn init_logging(format: LogFormat, verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
