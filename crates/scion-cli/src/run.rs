//! Dispatch: each command to the module of its family, which parses its arguments, opens
//! the store and prints the result.

use std::sync::Arc;

use anyhow::Result;
use clap::CommandFactory;
use scion_core::Scion;
use scion_store::CountingBackend;

use crate::cli::{Cli, Command};
use crate::cli_branches as branches;
use crate::cli_checkout as checkout;
use crate::cli_store as store;
use crate::output::Printer;

pub fn run(cli: Cli) -> Result<()> {
    let counter: std::cell::RefCell<Option<Arc<CountingBackend>>> = Default::default();
    let open = |cli: &Cli, init: bool| -> Result<Scion> {
        let o = crate::store::open_store(cli, init)?;
        *counter.borrow_mut() = Some(o.counter);
        Ok(o.scion)
    };
    let result = run_command(&cli, &open);
    if cli.stats {
        if let Some(c) = counter.borrow().as_ref() {
            let n = c.counts();
            eprintln!(
                "store requests: {} ({} get, {} ranged get, {} head, {} put, {} list, {} delete); {} read, {} written",
                n.requests(), n.gets, n.ranged_gets, n.heads, n.puts, n.lists, n.deletes,
                crate::output::bytes(n.bytes_read), crate::output::bytes(n.bytes_written)
            );
        }
        let pages = scion_core::PageCache::process().stats();
        if pages.hits + pages.decodes > 0 {
            eprintln!(
                "page cache: {} hits, {} decoded, {} waited for ({:.1}% hit); {} pages, {} of {}",
                pages.hits,
                pages.decodes,
                pages.waits,
                pages.hit_rate() * 100.0,
                pages.pages,
                crate::output::bytes(pages.used_bytes),
                crate::output::bytes(pages.capacity_bytes)
            );
        }
    }
    result
}

/// Which family's function runs the command. Each gets a way to open the store, called
/// once its arguments are parsed (or the store itself, for the families that always need it).
fn run_command(cli: &Cli, open: &dyn Fn(&Cli, bool) -> Result<Scion>) -> Result<()> {
    let p = Printer { json: cli.json };
    let o = || open(cli, false);
    let o: &crate::open::Open = &o;
    match &cli.command {
        Command::Init(_) => store::init(&p, &|| open(cli, true))?,
        Command::Config(a) => store::config(&p, o, a)?,
        Command::Status => store::status(&p, o)?,
        Command::Verify => store::verify(&p, o)?,
        Command::Gc(a) => store::gc(&p, o, a)?,
        Command::Compact(a) => store::compact(&p, o, a)?,
        Command::Diff(a) => store::diff(&p, o, a)?,
        Command::Export(a) => store::export(&p, o, a)?,
        Command::Completions(a) => store::completions(a, Cli::command()),
        Command::Man => store::man(Cli::command())?,
        Command::Create(a) => branches::create(&p, o, a)?,
        Command::Fork(a) => branches::fork(&p, o, a)?,
        Command::Branches(a) => branches::branches(&p, o, a)?,
        Command::Rollback(a) => branches::rollback(&p, o, a)?,
        Command::Promote(a) => branches::promote(&p, o, a)?,
        Command::Destroy(a) => branches::destroy(&p, o, a)?,
        Command::Protect(a) => branches::protect(&p, o, a, true)?,
        Command::Unprotect(a) => branches::protect(&p, o, a, false)?,
        Command::Touch(a) => branches::touch(&p, o, a)?,
        Command::Lease(cmd) => branches::lease(&p, o, cmd, cli.holder.as_deref())?,
        Command::Checkout(a) => checkout::checkout(&p, o, a)?,
        Command::Path(a) => checkout::path(&p, o, a)?,
        Command::Checkpoint(a) => checkout::checkpoint(&p, o, a)?,
        Command::Checkpoints(a) => checkout::checkpoints(&p, o, a)?,
        Command::Merge(args) => crate::cli_merge::merge(&p, &o()?, args)?,
        Command::Remote(cmd) => crate::cli_remote::remote(&p, &o()?, cmd)?,
        Command::Push(args) => crate::cli_remote::push(&p, &o()?, args)?,
        Command::Pull(args) => crate::cli_remote::pull(&p, &o()?, args)?,
        Command::Clone(args) => crate::cli_remote::clone(&p, cli.store.as_deref(), args)?,
        Command::Log(args) => crate::cli_history::log(&p, &o()?, args)?,
        Command::Undo(args) => crate::cli_history::undo(&p, &o()?, args)?,
        Command::Restore(args) => crate::cli_history::restore(&p, &o()?, args)?,
        Command::Sql(args) => crate::cli_vfs::sql_command(&p, o()?, args)?,
        Command::Shell(args) => crate::cli_vfs::shell(o()?, args)?,
        Command::Serve(args) => crate::daemon::serve(cli, args)?,
        Command::Mcp(args) => crate::daemon::mcp(cli, args)?,
        Command::Session(cmd) => crate::daemon::session(cli, cmd)?,
        Command::Token(cmd) => crate::tokens::token(cli, cmd)?,
        Command::Events(a) => crate::daemon::events(cli, a.since, a.follow, &a.socket)?,
        Command::Ui(args) => crate::ui::ui(cli, args)?,
        Command::Bench(cmd) => bench(&p, cmd)?,
    }
    Ok(())
}

#[cfg(feature = "bench")]
fn bench(p: &Printer, cmd: &crate::cli_bench::BenchCommand) -> Result<()> {
    crate::bench_run::bench(p, cmd)
}

/// Without the feature the command stays in `--help` (so it can say how to get it).
#[cfg(not(feature = "bench"))]
fn bench(_: &Printer, _: &crate::cli_bench::BenchCommand) -> Result<()> {
    Err(crate::errors::NotBuilt {
        what: "its benchmarks",
        hint: "build it with `cargo build --release --locked --features bench -p scion-cli` (./scripts/demo does), or install it with `cargo install --locked --features bench --path crates/scion-cli`",
    }
    .into())
}
