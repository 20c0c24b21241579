//! Command-line syntax. Every command takes the global `--store` and `--json`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

const AFTER_HELP: &str = "\
Targets are written db[@branch[@checkpoint]]; `shop` alone means `shop@main`.
The store is a local directory (default ./.scion) set by --store or SCION_STORE.

Example session:
  scion init
  scion create shop --from shop.db
  scion fork shop try-1
  sqlite3 \"$(scion checkout shop@try-1)\" \"UPDATE items SET price = price * 2\"
  scion checkpoint shop@try-1 doubled
  scion export shop@try-1@doubled /tmp/doubled.db";

#[derive(Debug, Parser)]
#[command(
    name = "scion",
    version,
    about = "Branch SQLite databases: fork in O(1), work on stock SQLite files, checkpoint, export.",
    after_help = AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// Store location: a directory path (or file:///abs/path).
    #[arg(long, global = true, env = "SCION_STORE", default_value = ".scion")]
    pub store: String,

    /// Print results as JSON on stdout (errors as JSON on stderr).
    #[arg(long, global = true)]
    pub json: bool,

    /// How checkouts may be cloned from another clean file of the same version:
    /// auto (clone where the filesystem can, else copy), always (clone or fail, never a
    /// full copy), never (always copy).
    #[arg(long, global = true, env = "SCION_CLONE", default_value = "auto")]
    pub clone: String,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a new, empty store.
    #[command(after_help = "Example:\n  scion --store /data/scion init")]
    Init,

    /// Create a database: empty, or imported from an existing SQLite file.
    ///
    /// The import reads one consistent committed state through SQLite (including WAL
    /// frames not yet checkpointed) while other connections may keep writing; the source
    /// file is never modified. The new database has a protected `main` branch.
    #[command(
        after_help = "Examples:\n  scion create scratch\n  scion create shop --from ./shop.db"
    )]
    Create {
        /// Name of the new database (a-z, 0-9, '.', '_', '-').
        db: String,
        /// SQLite file to import.
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
    },

    /// Materialize a branch as a stock SQLite file (WAL mode) and print only its path.
    ///
    /// A clean, current checkout is reused at once. A checkout holding changes that were
    /// never checkpointed is not overwritten unless --force.
    #[command(
        after_help = "Example:\n  sqlite3 \"$(scion checkout shop@try-1)\" 'SELECT count(*) FROM items'"
    )]
    Checkout {
        /// db or db@branch.
        target: String,
        /// Discard changes in the checkout that were never checkpointed.
        #[arg(long)]
        force: bool,
    },

    /// Print the path of a branch's checkout, without materializing it.
    #[command(after_help = "Example:\n  scion path shop@try-1")]
    Path {
        /// db or db@branch.
        target: String,
    },

    /// Commit what changed in a branch's checkout and name the result.
    ///
    /// Only pages that differ from the version the checkout was made from are written.
    /// Other connections may stay open and keep writing; the checkpoint captures one
    /// consistent committed state. A clean checkout writes nothing and binds the name.
    #[command(after_help = "Example:\n  scion checkpoint shop@try-1 after-migration")]
    Checkpoint {
        /// db or db@branch.
        target: String,
        /// Name of the checkpoint ('fork' and 'init' are reserved).
        name: String,
    },

    /// Create a branch from a branch head or checkpoint, in O(1).
    ///
    /// The fork takes the source's committed state; changes in the source's checkout that
    /// were never checkpointed are not part of it.
    #[command(
        after_help = "Examples:\n  scion fork shop try-1\n  scion fork shop@try-1 try-2 --at after-migration"
    )]
    Fork {
        /// Source: db or db@branch.
        source: String,
        /// Name of the new branch.
        branch: String,
        /// Fork at this checkpoint of the source instead of its head ('fork', 'init' work too).
        #[arg(long, value_name = "CHECKPOINT")]
        at: Option<String>,
    },

    /// List a branch's checkpoints.
    #[command(after_help = "Example:\n  scion checkpoints shop@try-1")]
    Checkpoints {
        /// db or db@branch.
        target: String,
    },

    /// List a database's branches.
    #[command(after_help = "Example:\n  scion branches shop")]
    Branches {
        /// Database name.
        db: String,
    },

    /// Show every database and branch, with checkout states and the clone capability.
    Status,

    /// Measure scion against its budgets and baselines, on data it generates itself.
    #[command(subcommand)]
    Bench(BenchCommand),

    /// Write a branch head or checkpoint to a plain SQLite file, atomically.
    #[command(after_help = "Example:\n  scion export shop@try-1@after-migration /tmp/review.db")]
    Export {
        /// db, db@branch or db@branch@checkpoint.
        target: String,
        /// Output file.
        out: PathBuf,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Fork latency and size at 1 MiB, 100 MiB and 1 GiB; bytes per single-row commit;
    /// checkpoints of clean and dirty checkouts; materializing against `cp`; re-checkout.
    ///
    /// Each figure is the median of several runs after a warm-up; store costs are counted
    /// from the store. Needs about 4 GiB of free disk in --dir for the full run.
    #[command(
        after_help = "Examples:\n  scion bench fork --quick\n  scion bench fork --json > fork.json"
    )]
    Fork {
        /// Small sizes and fewer runs: seconds instead of minutes.
        #[arg(long)]
        quick: bool,
        /// Working directory for generated databases and stores (deleted afterwards).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Timed runs per figure (after one warm-up).
        #[arg(long)]
        runs: Option<usize>,
    },
}
