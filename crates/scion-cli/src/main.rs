//! The `scion` command-line tool.

#[cfg(feature = "bench")]
mod bench_run;
mod branch_arg;
mod cli;
mod cli_bench;
mod cli_branches;
mod cli_checkout;
mod cli_daemon;
mod cli_history;
mod cli_merge;
mod cli_remote;
mod cli_store;
mod cli_ui;
mod cli_vfs;
mod config;
mod daemon;
mod errors;
mod graph;
mod open;
mod output;
#[cfg(feature = "bench")]
mod output_bench;
mod progress;
mod run;
mod store;
mod tokens;
mod ui;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // `scion diff --sql | head` must end quietly when the reader goes away, like any
    // Unix filter, instead of failing on a closed pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SCION_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = cli::Cli::parse();
    let json = cli.json;
    let context = cli.command.error_context();
    match run::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => errors::report(&e, json, context),
    }
}
