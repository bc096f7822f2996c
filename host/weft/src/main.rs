//! The `weft` binary: parses the command line and hands off. Nothing else
//! lives here.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = weft::cli::Cli::parse();
    let telemetry =
        weft::telemetry::init(cli.log_format, cli.verbose, cli.otlp_endpoint.as_deref());
    let _telemetry = match telemetry {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match weft::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
