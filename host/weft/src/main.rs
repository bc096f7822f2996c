//! The `weft` binary: parses the command line and hands off. Nothing else
//! lives here.
#![deny(unsafe_code)]

use clap::{CommandFactory, FromArgMatches};

/// jemalloc, for its heap profiles (`--profiling-addr`, see
/// `weft::profiling`); it also keeps a long-running controller's memory
/// less fragmented than glibc's malloc.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start: heap sampling compiled in and
/// inactive (no cost) until `--profiling-addr` switches it on; one sample
/// per 512 KiB allocated. A background thread gives freed pages back after
/// their decay time: jemalloc otherwise purges only when the process
/// allocates, so an idle controller kept everything its start had freed
/// (plugin compilation's buffers: 97 MiB anonymous memory at rest with the
/// first-party plugins, 33 MiB with the thread).
#[allow(non_upper_case_globals, unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8] =
    b"prof:true,prof_active:false,lg_prof_sample:19,background_thread:true\0";

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
