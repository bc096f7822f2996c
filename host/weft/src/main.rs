//! The `weft` binary: parses the command line and hands off. Nothing else
//! lives here.
#![forbid(unsafe_code)]

use clap::{CommandFactory, FromArgMatches};

fn main() -> std::process::ExitCode {
    // `weft controller --config FILE`: the file's settings become flags
    // that the command line's override.
    let argv = match weft::cli::config::expand(std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let matches = weft::cli::Cli::command().get_matches_from(argv);
    if let Some(("controller", sub)) = matches.subcommand()
        && sub.get_flag("print_config")
    {
        print!("{}", weft::cli::config::print(sub));
        return std::process::ExitCode::SUCCESS;
    }
    let cli = match weft::cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
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
