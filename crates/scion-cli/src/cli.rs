//! Command-line syntax. Every command takes the global `--store` and `--json`.

use clap::{Parser, Subcommand};

const AFTER_HELP: &str = "\
Targets are written db[@branch[@checkpoint]]; `shop` alone means `shop@main`.
The store is the nearest .scion directory in the current directory or above it (as git finds
.git), or the one --store or SCION_STORE names.

Example session:
  scion init
  scion create shop --from shop.db
  scion fork shop try-1
  sqlite3 \"$(scion checkout shop@try-1)\" \"UPDATE items SET price = price * 2\"
  scion checkpoint shop@try-1 doubled
  scion export shop@try-1@doubled /tmp/doubled.db";

/// The heading global options are listed under, after each command's own.
const GLOBAL: &str = "Global options";

#[derive(Debug, Parser)]
#[command(
    name = "scion",
    version,
    about = "Branch SQLite databases: fork in O(1), work on stock SQLite files, checkpoint, export.",
    after_help = AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// Store location: a directory path (or file:///abs/path), s3://bucket/prefix
    /// (configured by SCION_S3_ENDPOINT, SCION_S3_REGION, SCION_S3_PATH_STYLE and the usual
    /// AWS_* credentials) or az://container/prefix (Azure Blob Storage: the AZURE_STORAGE_*
    /// variables); checkouts go to SCION_CHECKOUTS or the user's cache directory.
    /// Default: the nearest .scion in the current directory or above it (`init`: ./.scion).
    #[arg(long, global = true, env = "SCION_STORE", help_heading = GLOBAL)]
    pub store: Option<String>,

    /// Print results as JSON on stdout (errors as JSON on stderr).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,

    /// Print how many store requests the command made, the bytes moved and (for commands
    /// that read pages, such as `sql`) the page cache's hits and size, to stderr. The page
    /// cache is bounded by SCION_PAGE_CACHE (e.g. 512MiB; 0 turns it off; default 256MiB).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub stats: bool,

    /// Who this process is for leases (default: host/pid). Set it to act as the holder of
    /// a lease taken with `scion lease acquire`.
    #[arg(long, global = true, help_heading = GLOBAL, env = "SCION_HOLDER")]
    pub holder: Option<String>,

    /// How checkouts may be cloned from another clean file of the same version:
    /// auto (clone where the filesystem can, else copy), always (clone or fail, never a
    /// full copy), never (always copy).
    #[arg(long, global = true, help_heading = GLOBAL, env = "SCION_CLONE", default_value = "auto")]
    pub clone: String,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a new, empty store.
    ///
    /// The store records a minimum GC grace: `scion gc` refuses a shorter grace without
    /// --force, and a commit that takes longer than half of it re-checks its data before
    /// publishing, so GC can never remove what a commit in flight is about to publish.
    ///
    /// It also records how pages are stored. lz4 (the default) keeps about half of each
    /// database's bytes; `none` keeps about all of them and makes every checkout and export
    /// a read, a hash and a write per page, with no decompression: faster than `cp` of the
    /// file where CPU, not the disk, is the limit. Every page is verified on every read
    /// either way.
    #[command(
        after_help = "Examples:\n  scion --store /data/scion init\n  scion init --min-grace 10m\n  scion init --page-compression none   # fastest checkouts, about twice the space"
    )]
    Init(crate::cli_store::InitArgs),

    /// Show the store's settings, or change how new pages are stored and how long the head
    /// history keeps old heads.
    ///
    /// With --page-compression, every full page written from now on (by checkpoints,
    /// imports, sessions, `compact`) is stored that way; what is already stored stays as it
    /// is and reads as before, since every reader decodes both. `scion compact <db>` rewrites
    /// a branch head with the new setting. A running `scion serve` follows within one
    /// janitor round (`--janitor-every`); other processes that already have the store open
    /// keep the setting they read until they reopen it. The minimum GC grace is fixed at
    /// `init`: changing it under a commit or a `gc` of another process could lose data.
    #[command(
        after_help = "Examples:\n  scion config\n  scion config --page-compression none   # faster checkouts from now on\n  scion config --page-compression none && scion compact shop   # and rewrite shop's head\n  scion config --history-retention 30d"
    )]
    Config(crate::cli_store::ConfigArgs),

    /// Create a database: empty, or imported from an existing SQLite file.
    ///
    /// The import reads one consistent committed state through SQLite (including WAL
    /// frames not yet checkpointed) while other connections may keep writing; the source
    /// file is never modified. The new database has a protected `main` branch.
    #[command(
        after_help = "Examples:\n  scion create scratch\n  scion create shop --from ./shop.db"
    )]
    Create(crate::cli_branches::CreateArgs),

    /// Materialize a branch as a stock SQLite file (WAL mode) and print only its path.
    ///
    /// A clean, current checkout is reused at once. A checkout holding changes that were
    /// never checkpointed is not overwritten unless --force.
    ///
    /// A writable checkout is recorded in the branch (on every host that shares the store):
    /// while it exists the branch is written through the file, and writers through the VFS
    /// (`scion sql`, `file:...?vfs=scion`) are refused. --release ends it: the file is
    /// removed (refused while it holds changes never checkpointed, unless --force) and the
    /// branch is open to those writers again.
    #[command(
        after_help = "Examples:\n  sqlite3 \"$(scion checkout shop@try-1)\" 'SELECT count(*) FROM items'\n  scion checkout shop@try-1 --release"
    )]
    Checkout(crate::cli_checkout::CheckoutArgs),

    /// Print the path of a branch's checkout, without materializing it.
    #[command(after_help = "Example:\n  scion path shop@try-1")]
    Path(crate::cli_checkout::PathArgs),

    /// Commit what changed in a branch's checkout and name the result.
    ///
    /// Only pages that differ from the version the checkout was made from are written.
    /// Other connections may stay open and keep writing; the checkpoint captures one
    /// consistent committed state. A clean checkout writes nothing and binds the name.
    #[command(
        after_help = "Examples:\n  scion checkpoint shop@try-1 after-migration\n  scion checkpoint delete shop@try-1 after-migration",
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    Checkpoint(crate::cli_checkout::CheckpointArgs),

    /// Create a branch from a branch head or checkpoint, in O(1).
    ///
    /// The fork takes the source's committed state; changes in the source's checkout that
    /// were never checkpointed are not part of it.
    #[command(
        after_help = "Examples:\n  scion fork shop try-1\n  scion fork shop@try-1 try-2 --at after-migration"
    )]
    Fork(crate::cli_branches::ForkArgs),

    /// Move a branch's head back to one of its checkpoints, in O(1).
    ///
    /// The move is recorded in the branch's head history (`scion log`), so `scion undo`
    /// takes it back; the abandoned head is also named by the branch
    /// <branch>-pre-rollback-v<version> (for 24 h unless --backup-ttl). A protected branch
    /// (main) needs --force. The checkout is refreshed; changes in it that were never
    /// checkpointed are refused unless --force.
    #[command(
        after_help = "Examples:\n  scion rollback shop@try-1 --to before-migration\n  scion rollback shop@try-1 --to fork   # undo everything done on the branch\n  scion rollback shop --to v1 --force     # main is protected\n  scion undo shop                         # and back again"
    )]
    Rollback(crate::cli_branches::RollbackArgs),

    /// Make a branch's head the head of another branch of the same database, in O(1).
    ///
    /// The move is recorded in the target's head history (`scion undo` takes it back); the
    /// target's old head is also named by <target>-pre-promote-v<version>. A protected
    /// target (main) needs --force.
    #[command(after_help = "Example:\n  scion promote shop@try-2 --onto main --force")]
    Promote(crate::cli_branches::PromoteArgs),

    /// Bring another branch's changes into a branch: three-way at the cell, in one atomic
    /// step, with no merge in progress.
    ///
    /// Both sides' changes since their best common version (found in the version graph:
    /// the newest version both were made from, whatever branches moved) are read from the
    /// pages they changed; edits to different columns of a
    /// row merge, the same edit on both sides agrees, and the rest are conflicts with their
    /// base, ours and theirs values. The result is checked (UNIQUE, NOT NULL, CHECK,
    /// foreign keys) and published as one new version of the destination, recorded in its
    /// head history (`scion undo` takes it back), or nothing is published and the report
    /// says why (exit 11). Merging the same source again is a no-op.
    #[command(
        after_help = "Examples:\n  scion merge shop@agent-1 --into main --dry-run --force\n  scion merge shop@agent-1 --into main --force\n  scion merge shop@agent-2 --into main --resolve fixes.json --force --json\n  scion merge shop@agent-2 --into main --renumber --force   # both appended rows: keep them all\n  scion merge shop@main --into feature   # take main's newer rows"
    )]
    Merge(crate::cli_merge::MergeArgs),

    #[command(subcommand)]
    Remote(crate::cli_remote::RemoteCommand),
    Push(crate::cli_remote::PushArgs),
    Pull(crate::cli_remote::PullArgs),
    Clone(crate::cli_remote::CloneArgs),
    Ui(crate::cli_ui::UiArgs),

    /// Every move of a branch's head, newest first: commits, rollbacks, promotes, undos,
    /// restores, and its destroy.
    ///
    /// Each entry has a number for `scion restore --to`, the versions before and after,
    /// the store's time and who moved it. `gc` keeps every head an entry younger than the
    /// store's history retention names (`scion config`, 7 days by default).
    #[command(
        after_help = "Examples:\n  scion log shop\n  scion log shop@try-1 --json --limit 5\n  scion log shop@gone   # a destroyed branch, while its history lasts"
    )]
    Log(crate::cli_history::LogArgs),

    /// Take back a branch's latest head move that is not undone yet; repeat to go further.
    ///
    /// The undo is a head move of its own, recorded in the history, so `scion restore
    /// --to <entry>` can redo what it took back. A protected branch needs --force.
    #[command(
        after_help = "Examples:\n  scion undo shop@try-1\n  scion undo shop --force   # main is protected"
    )]
    Undo(crate::cli_history::UndoArgs),

    /// Put a branch's head where an entry of its history left it, or bring a destroyed
    /// branch back by name (as it was when destroyed, unless --to).
    ///
    /// A restored branch gets its head, fork point, protection and TTL back; its
    /// checkpoints and checkout were removed with it.
    #[command(
        after_help = "Examples:\n  scion restore shop@try-1 --to 12\n  scion restore shop@try-1   # it was destroyed\n  scion restore shop --to 3 --force   # main is protected"
    )]
    Restore(crate::cli_history::RestoreArgs),

    /// Remove a branch: its ref, checkpoints and checkout files. Space is reclaimed by gc.
    ///
    /// Its head history outlives it: `scion restore` brings it back until the store's
    /// history retention passes.
    #[command(
        after_help = "Examples:\n  scion destroy shop@try-1\n  scion destroy shop --force   # main and protected branches need --force"
    )]
    Destroy(crate::cli_branches::DestroyArgs),

    /// Protect a branch: destroy and promote-onto then need --force.
    #[command(after_help = "Example:\n  scion protect shop@release")]
    Protect(crate::cli_branches::ProtectArgs),

    /// Remove a branch's protection.
    #[command(after_help = "Example:\n  scion unprotect shop@release")]
    Unprotect(crate::cli_branches::ProtectArgs),

    /// Reset a branch's activity clock (its TTL counts from now), optionally changing the TTL.
    #[command(
        after_help = "Examples:\n  scion touch shop@try-1\n  scion touch shop@try-1 --ttl 6h\n  scion touch shop@try-1 --ttl none"
    )]
    Touch(crate::cli_branches::TouchArgs),

    /// Run the daemon in the foreground: sessions with live capture of their checkouts'
    /// commits, an HTTP API on a unix socket, a janitor, events and metrics.
    ///
    /// Logs go to stderr (SCION_LOG=info for more). SIGTERM or Ctrl-C flushes and closes
    /// every session, then exits 0.
    #[command(after_help = "Examples:
  scion serve
  scion serve --flush-every 1s
  curl --unix-socket \"$SOCK\" http://scion/v1/sessions")]
    Serve(crate::cli_daemon::ServeArgs),

    /// Sessions of the running daemon: open, flush, close, list.
    #[command(subcommand)]
    Session(crate::cli_daemon::SessionCommand),

    /// Scoped tokens for the daemon's API: create (printed once), list, revoke.
    #[command(subcommand)]
    Token(crate::cli_daemon::TokenCommand),

    /// The daemon's events (sessions opened, flushes, forks, rollbacks, undos, reaps, ...),
    /// one a line: those kept so far, then exit; with --follow, then live ones too.
    #[command(after_help = "Examples:
  scion events                 # everything kept so far
  scion events --since 42      # what came after event 42
  scion events --follow        # and keep following, as journalctl -f")]
    Events(crate::cli_daemon::EventsArgs),

    /// Serve scion's operations as MCP tools on stdin/stdout, for agents: list, fork,
    /// checkout, checkpoint, rollback, promote, merge, destroy, touch, diff, log, undo,
    /// restore, read-only query across versions, and sessions.
    ///
    /// Safe by default: the agent reads every branch but changes only the branches it
    /// forks (recorded as owned by --owner); every other change is refused naming the flag
    /// that grants it (--write, --databases). Every fork gets a TTL, branches made through
    /// MCP are capped, force is refused unless --allow-force. Logs go to stderr.
    #[command(
        after_help = "Examples:\n  scion mcp\n  scion mcp --owner agent-7 --write 'shop@exp-*' --databases shop\n  scion mcp --read-only\n  scion mcp --daemon require --default-ttl 2h"
    )]
    Mcp(crate::cli_daemon::McpArgs),

    /// Run SQL on a branch through the scion VFS: nothing is materialized, and each change
    /// commits the pages SQLite wrote as a new version. --attach reads other branches and
    /// checkpoints beside it, read-only, in the same statements.
    #[command(
        after_help = "Examples:\n  scion sql shop \"SELECT count(*) FROM orders\"\n  scion sql shop@try-1 \"UPDATE items SET price = price * 2\"\n  scion sql shop@main@before \"SELECT * FROM items\"   # a checkpoint: read-only\n  scion sql shop@try-1 --attach base=shop@main \\\n    \"SELECT t.id, b.price, t.price FROM items t JOIN base.items b USING (id) WHERE b.price <> t.price\""
    )]
    Sql(crate::cli_vfs::SqlArgs),

    /// Start the stock sqlite3 shell on a branch through the scion VFS (loaded as an
    /// extension): no checkout file, commits go straight to the branch.
    #[command(
        after_help = "Examples:\n  scion shell shop@try-1\n  scion shell shop -- \"SELECT count(*) FROM orders\""
    )]
    Shell(crate::cli_vfs::ShellArgs),

    /// Leases: the exclusive, expiring right to move a branch's head.
    #[command(
        subcommand,
        after_help = "Examples:\n  scion lease list\n  SCION_HOLDER=agent-7 scion lease acquire shop@try-1 --ttl 10m\n  SCION_HOLDER=agent-7 scion lease release shop@try-1"
    )]
    Lease(crate::cli_branches::LeaseCommand),

    /// Check the whole store without changing it: every ref, checkpoint and safety fork
    /// resolves, every frame a version reaches verifies, the manifest is sane.
    ///
    /// Lists unreachable segments and leftover temp files with their bytes (garbage for
    /// `gc`, not damage). Exits 7 when anything is wrong. Reads every live frame once, so
    /// it costs about one read of the store.
    #[command(after_help = "Examples:\n  scion verify\n  scion verify --json")]
    Verify,

    /// Reap expired branches, then delete data no branch or checkpoint can reach.
    ///
    /// A segment is deleted only after it was found unreachable for a whole grace period.
    /// A grace below the store's minimum (chosen at `init`) needs --force;
    /// `--grace 0 --force` deletes at once: use it only while nothing else writes to the
    /// store. Expired branches whose checkout is open or has uncheckpointed changes are
    /// kept and listed.
    #[command(after_help = "Examples:\n  scion gc\n  scion gc --grace 0 --force")]
    Gc(crate::cli_store::GcArgs),

    /// Rewrite a branch head into fresh segments in page order, so it reads with few
    /// ranged reads. The content is unchanged (the new head is the old one's only child).
    #[command(
        after_help = "Examples:\n  scion compact shop                       # every page, as full frames\n  scion compact shop@agent-7 --scattered   # only pages left scattered by small commits"
    )]
    Compact(crate::cli_store::CompactArgs),

    /// List a branch's checkpoints.
    #[command(after_help = "Example:\n  scion checkpoints shop@try-1")]
    Checkpoints(crate::cli_checkout::CheckpointsArgs),

    /// List a database's branches.
    #[command(after_help = "Example:\n  scion branches shop")]
    Branches(crate::cli_branches::BranchesArgs),

    /// Show every database and branch, with checkout states and the clone capability.
    #[command(
        after_help = "Examples:\n  scion status\n  scion status --json | jq '.databases[].branches[] | select(.checkout == \"dirty\")'"
    )]
    Status,

    /// Print a completion script for a shell (generated from this command line's
    /// definition, so it always matches it).
    #[command(
        after_help = "Examples:\n  scion completions bash > ~/.local/share/bash-completion/completions/scion\n  scion completions zsh > \"${fpath[1]}/_scion\"\n  scion completions fish > ~/.config/fish/completions/scion.fish"
    )]
    Completions(crate::cli_store::CompletionsArgs),

    /// Print scion's man page (roff), generated from this command line's definition.
    #[command(after_help = "Example:\n  scion man > ~/.local/share/man/man1/scion.1 && man scion")]
    Man,

    /// Measure scion against its budgets and baselines, on data it generates itself.
    #[command(
        subcommand,
        after_help = "Examples:\n  scion bench fork --quick\n  scion bench isolation --quick\n  scion bench branchbench --profile quick"
    )]
    Bench(crate::cli_bench::BenchCommand),

    /// Rows added, removed and changed per table, and schema changes, between two versions.
    ///
    /// Rows are matched by primary key (by rowid where a table has none). Only what the two
    /// versions do not share is read. With --sql, prints SQL that turns left into right.
    /// Changes in a checkout not checkpointed are not part of a version: the diff says so,
    /// and --working takes them in.
    #[command(
        after_help = "Examples:\n  scion diff shop shop@try-1\n  scion diff shop@main@v1 shop@try-1 --table items\n  scion diff shop shop@try-1 --rows --json --limit 20\n  scion diff shop shop@try-1 --sql | sqlite3 copy-of-main.db"
    )]
    Diff(crate::cli_store::DiffArgs),

    /// Write a branch head or checkpoint to a plain SQLite file, atomically.
    #[command(after_help = "Example:\n  scion export shop@try-1@after-migration /tmp/review.db")]
    Export(crate::cli_store::ExportArgs),
}

impl Command {
    /// How error hints should speak for this command.
    pub fn error_context(&self) -> crate::errors::Context {
        use crate::errors::Context;
        match self {
            Command::Rollback(_) | Command::Undo(_) | Command::Restore(_) => Context::Rollback,
            Command::Promote(_) => Context::Promote,
            Command::Destroy(_) => Context::Destroy,
            Command::Compact(_) => Context::Compact,
            Command::Checkout(a) if a.release => Context::Release,
            Command::Merge(_) | Command::Pull(_) => Context::Merge,
            _ => Context::Other,
        }
    }
}
