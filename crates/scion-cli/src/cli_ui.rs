//! The syntax of `scion ui` (what it does is in `ui.rs`).

/// Explore the store's branches in a browser.
///
/// Runs the daemon (as `scion serve` does, with its defaults) and a listener on 127.0.0.1
/// only, with a token made for this run: the printed URL carries it, and every page and API
/// call without it is refused. The page reads only, unless --writable. The browser opens unless --no-browser (or BROWSER=true).
/// Stop it with Ctrl-C. When `scion serve` already runs on this store's socket, it is
/// reused: the explorer's listener forwards to it (and Ctrl-C stops the explorer only).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  scion ui\n  scion ui --no-browser --port 8765\n  scion --store s3://bucket/scion ui --db shop"
)]
pub struct UiArgs {
    /// Print the URL only; do not open a browser.
    #[arg(long)]
    pub no_browser: bool,
    /// The loopback port (default, or 0: any free one, printed).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// The database shown first.
    #[arg(long, value_name = "NAME")]
    pub db: Option<String>,
    /// Offer actions on branches from the page (fork, checkpoint, rollback, a merge's dry
    /// run, destroy), under the same protection rules as the CLI. Without it the daemon
    /// answers the page's reads only.
    #[arg(long)]
    pub writable: bool,
}
