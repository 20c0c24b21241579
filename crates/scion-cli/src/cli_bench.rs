//! The syntax of `scion bench`: each benchmark's options.

use std::path::PathBuf;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Fork latency and size at 1 MiB, 100 MiB and 1 GiB; bytes per single-row commit;
    /// checkpoints of clean and dirty checkouts; materializing against `cp` (also from a
    /// store without page compression); re-checkout.
    ///
    /// Each figure is the median of several runs after a warm-up; store costs are counted
    /// from the store. Needs about 7 GiB of free disk in --dir for the full run (the 1 GiB
    /// database, its store, checkout and `cp` copies, and an uncompressed store of it).
    #[command(
        after_help = "Examples:\n  scion bench fork --quick\n  scion bench fork --json > fork.json"
    )]
    Fork(BenchRunArgs),

    /// The scion VFS against the same database as a plain file: fork + open + first query
    /// (beside cp + open), a one-row commit (time and bytes written), point lookups, and
    /// cold and warm full scans (also on a branch fragmented by many small commits).
    ///
    /// Sizes 10 MiB, 100 MiB and 1 GiB; cold scans drop the OS page cache (root only; the
    /// report says when it could not). Needs about 3 GiB of free disk in --dir.
    #[command(
        after_help = "Examples:\n  scion bench vfs --quick\n  scion bench vfs --json > vfs.json"
    )]
    Vfs(BenchRunArgs),
    /// A merge of one changed row on each side, at 100 MiB and 1 GiB: the dry run and the
    /// real merge (time, pages read, bytes read and written at the store) beside `scion
    /// diff` of one side and the alternative without scion (export the three versions,
    /// `sqldiff` base against theirs, apply the SQL to ours). Needs `sqldiff`.
    #[command(
        after_help = "Examples:\n  scion bench merge --quick\n  scion bench merge --json > merge.json"
    )]
    Merge(BenchRunArgs),
    /// Finding a merge base on long histories (10,000 versions: linear, and 100 branches
    /// merged into main), bases recent, halfway and at the start: root records read, store
    /// requests and wall time on a local store and, with --s3, an S3 store (its endpoint
    /// from the environment, as for any s3:// store).
    Graph(GraphBenchArgs),
    /// Push, pull and follow: the first push of 100 MiB and 1 GiB databases to a
    /// directory (and, with --s3, to S3) beside copying the same segment files; the push of
    /// a one-row commit and the pull of one, counted at the receiving store; `push
    /// --follow`'s lag under 100 single-row commits a second.
    #[command(
        after_help = "Examples:\n  scion bench remote --quick\n  scion bench remote --s3 s3://bucket/bench --json > remote.json"
    )]
    Remote(RemoteBenchArgs),
    /// A pytest suite as an eval harness runs it: --tests tests (default 20) on a seed of
    /// --sizes MiB (default 50), through the pytest plugin's `scion_db` fixture (a fork
    /// per test, a VFS connection) beside a fixture copying the seed file per test. Two
    /// shapes: light tests (a write and a keyed read) and scan tests (a whole-table
    /// read). Reports each suite's test time (setup + call + teardown, summed) and
    /// pytest's wall time, the ratios, and the scion suites' store after one `scion gc`.
    #[command(after_help = "Examples:
  python3 -m venv venv && venv/bin/pip install pytest ./sdk/python
  scion bench pytest --python venv/bin/python
  scion bench pytest --python venv/bin/python --quick --json")]
    Pytest(PytestBenchArgs),
    /// Live capture under fire: a real `scion serve` captures a checkout while the stock
    /// `sqlite3` CLI and Python writers commit, and SIGKILL hits writers and the daemon at
    /// random points; after every round the durable version must hold exactly a prefix of
    /// the committed transactions, after every flush all of them. Exits 1 on any failure.
    #[command(
        after_help = "Examples:\n  scion bench capture --rounds 200\n  scion bench capture --rounds 3500 --seed 7 --json"
    )]
    Capture(crate::cli_daemon::CaptureBenchArgs),
    /// What live capture costs: a session's flush of a single-row commit at 100 MiB and
    /// 1 GiB (latency and bytes) beside `scion checkpoint` of the same change at rest; a
    /// writer's throughput with and without a session; the durable age under a steady
    /// writer.
    #[command(
        after_help = "Examples:\n  scion bench live --quick\n  scion bench live --json > live.json"
    )]
    Live(BenchRunArgs),
    /// The five BranchBench workflows (simulation, data_cleaning, software_dev, mcts,
    /// failure_repro) on scion, as the BranchBench harness runs them: its tuples, its uniform
    /// parent rule (nodes may reach depth D+1), its prune coin, cross-branch schedule and op
    /// sequence. Each workflow gets a fresh store seeded from a deterministic CH-benCHmark
    /// database; every op is timed and recorded with its depth; failed statements are
    /// counted. Deviations from the harness are flags, printed in the header.
    ///
    /// Profiles: full (published tuples, 2 h cap), mini (the mini tuples), quick (mini
    /// tuples on tiny data, 4-way, lockstep, 60 s cap: a smoke test).
    #[command(
        after_help = "Examples:\n  scion bench branchbench --profile quick\n  scion bench branchbench --profile full --scale small --out results/\n  scion bench branchbench --workflows mcts --parent-rule sticky --depth-rule strict"
    )]
    Branchbench(Box<BranchbenchArgs>),
    /// What an eval harness pays per test for a fresh, isolated database seeded once, at
    /// 10 MiB and 100 MiB: scion fork + checkout + open + first query + close + destroy,
    /// against a file copy, SQLite's backup API and PostgreSQL `CREATE DATABASE ... TEMPLATE`.
    ///
    /// The PostgreSQL rows run when a server is given (scripts/bench-postgres starts a
    /// throwaway one on a unix socket and prints its connection string); otherwise the
    /// table says why they are missing.
    #[command(
        after_help = "Examples:\n  scion bench isolation --quick\n  export SCION_BENCH_PG=\"$(./scripts/bench-postgres start)\"\n  scion bench isolation --json > isolation.json\n  ./scripts/bench-postgres stop"
    )]
    Isolation {
        #[command(flatten)]
        run: BenchRunArgs,
        /// PostgreSQL connection string (libpq style), e.g. "host=/tmp/pg user=scion dbname=postgres".
        #[arg(long, env = "SCION_BENCH_PG", value_name = "CONNINFO")]
        postgres: Option<String>,
        /// A Python with the scion package and pytest installed: adds the rows measured
        /// through the pytest plugin's `scion_db` fixture and a fixture copying the file.
        #[arg(long, env = "SCION_BENCH_PYTHON", value_name = "PATH")]
        python: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub struct GraphBenchArgs {
    #[command(flatten)]
    pub run: BenchRunArgs,
    /// Versions in each history (default 10,000; 400 with --quick).
    #[arg(long)]
    pub versions: Option<usize>,
    /// Also measure on this S3 store (s3://bucket/prefix; the bench writes under it).
    #[arg(long, value_name = "URL")]
    pub s3: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct RemoteBenchArgs {
    #[command(flatten)]
    pub run: BenchRunArgs,
    /// Also push to this S3 location (s3://bucket/prefix; the bench writes under it).
    #[arg(long, value_name = "URL")]
    pub s3: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct PytestBenchArgs {
    #[command(flatten)]
    pub run: BenchRunArgs,
    /// A Python with pytest and the scion package installed.
    #[arg(long, env = "SCION_BENCH_PYTHON", value_name = "PATH")]
    pub python: PathBuf,
    /// Tests per suite (default 20; 4 with --quick).
    #[arg(long)]
    pub tests: Option<usize>,
}

/// What `bench fork` and `bench isolation` share.
#[derive(Debug, clap::Args)]
pub struct BenchRunArgs {
    /// Small sizes and fewer runs: seconds instead of minutes.
    #[arg(long)]
    pub quick: bool,
    /// Working directory for generated databases and stores (deleted afterwards).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Timed runs per figure (after one warm-up).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Database sizes in MiB, comma-separated, instead of the bench's own.
    #[arg(long, value_delimiter = ',', value_name = "MIB")]
    pub sizes: Vec<u64>,
}

#[derive(Debug, clap::Args)]
pub struct BranchbenchArgs {
    /// Comma-separated workflows to run (default: all five).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub workflows: Vec<String>,
    /// full | mini | quick.
    #[arg(long, default_value = "full")]
    pub profile: String,
    /// tiny | small | <warehouses> (default: small, or tiny for quick).
    #[arg(long)]
    pub scale: Option<String>,
    /// Steps running at once: a number, or "all" for T (the harness).
    #[arg(long)]
    pub concurrency: Option<String>,
    /// Cap per workflow in seconds, 0 for none (default 7200, quick 60).
    #[arg(long, value_name = "SECS")]
    pub max_runtime: Option<u64>,
    /// Worker RNG seed: worker t uses seed + t.
    #[arg(long, default_value_t = 42)]
    pub rng_seed: u64,
    /// Seed of the data generator.
    #[arg(long, default_value_t = 1)]
    pub data_seed: u64,
    /// uniform (the harness) | sticky (offshoot's: current node, else uniform, else root).
    #[arg(long, default_value = "uniform")]
    pub parent_rule: String,
    /// harness (parents at depth <= D, nodes reach D+1) | strict (nodes never below D).
    #[arg(long, default_value = "harness")]
    pub depth_rule: String,
    /// software_dev's SQL: published (the published runs) | head (the harness's HEAD).
    #[arg(long, default_value = "published")]
    pub sql: String,
    /// Emulate a hosted service's cap on alive branches (root included), e.g. 20.
    #[arg(long, value_name = "N")]
    pub live_cap: Option<usize>,
    /// How long a step waits for a slot under --live-cap before it is skipped.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub slot_timeout: u64,
    /// Lockstep rounds: parent choices and prunes in worker order (reproducible trees).
    #[arg(long)]
    pub deterministic: bool,
    /// Working directory for seeds and stores (default: a fresh temp dir).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Runs per workflow: the report is the run with the median wall time, and lists
    /// every run's wall time.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Keep each workflow's store instead of deleting it.
    #[arg(long)]
    pub keep: bool,
    /// Remove each step's checkout file once the step is published (the harness keeps it
    /// until its branch is destroyed). The report gives the checkouts' bytes apart from
    /// the store's either way; this flag only changes what stays on disk meanwhile.
    #[arg(long)]
    pub drop_checkouts: bool,
    /// Skip the gc after each workflow (no reclaim figure then).
    #[arg(long)]
    pub no_gc: bool,
    /// Write <run_id>_e2e_stats.json and <run_id>_ops.jsonl per workflow here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// How a step reaches its branch: `checkout` (a checkout file; publishing
    /// checkpoints it), `vfs` (the branch opened through the scion VFS, nothing
    /// materialized; a step is one transaction, publishing commits it and names the head)
    /// or `copy` (the baseline without scion: a fork is a plain copy of the parent's file on
    /// tmpfs, a destroy removes it; what the queries alone cost).
    #[arg(long, default_value = "checkout", value_parser = ["checkout", "vfs", "copy"])]
    pub connect: String,
}
