//! Command-line interface.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::telemetry::LogFormat;

pub mod plugin;

/// Weft: a Kubernetes workflow executor with WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about)]
pub struct Cli {
    /// More log output (-v, -vv).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log line format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect and test plugin components: the plugin author's harness.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plugin(cmd) => plugin::run(cmd),
    }
}
