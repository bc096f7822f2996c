//! The `weft` binary: parses the command line and hands off. Nothing else
//! lives here.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = weft::cli::Cli::parse();
    weft::telemetry::init_logging(cli.log_format, cli.verbose);
    match weft::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
