//! The `scion` command-line tool.

// First: the output macros are used by every module below.
#[macro_use]
mod stdout;

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
    // SIGPIPE stays ignored: a reader that stops early (`| head`, `| grep -q`) ends the
    // output, never the command (see stdout.rs).
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
    let result = run::run(cli);
    let output_failed = stdout::finish();
    match result {
        Err(e) => errors::report(&e, json, context),
        Ok(()) => match output_failed {
            None => ExitCode::SUCCESS,
            Some(e) => errors::report(
                &anyhow::Error::new(e).context("writing the output"),
                json,
                context,
            ),
        },
    }
}
