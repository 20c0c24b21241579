//! Command-line syntax of the daemon's commands: `serve`, `session`, `events`, `mcp`,
//! `token`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// Where the daemon's socket is: `--socket`, `SCION_SOCKET`, or the default for the store.
#[derive(Debug, Args)]
pub struct SocketArg {
    /// The daemon's unix socket (default: SCION_SOCKET, else one per store under
    /// $XDG_RUNTIME_DIR, or ~/.local/state/scion/run without one: `scion serve` prints it).
    #[arg(long, value_name = "PATH", env = "SCION_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// `scion events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only the events after this id (default 0: every event still kept).
    #[arg(long)]
    pub since: Option<u64>,
    /// Keep the stream open and print live events as they happen (Ctrl-C ends it).
    #[arg(long, short = 'f')]
    pub follow: bool,
    #[command(flatten)]
    pub socket: SocketArg,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub socket: SocketArg,
    /// Also listen on TCP at this address (needs --token-file).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// A file holding the bearer token TCP clients must present.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Allow --listen on an address other hosts can reach.
    #[arg(long)]
    pub allow_remote: bool,
    /// The file of scoped tokens (`scion token create`) this daemon accepts over TCP, and
    /// on the socket with --socket-tokens. Default: SCION_TOKENS, else
    /// ~/.config/scion/tokens.json. Read again whenever it changes.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// Make socket clients present a token too (scoped or --token-file's), so processes of
    /// this user get only what their token grants.
    #[arg(long)]
    pub socket_tokens: bool,
    /// Commit what sessions captured at least this often while they are dirty.
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub flush_every: String,
    /// How long a session's branch lease lasts (renewed every third of it).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub lease_ttl: String,
    /// How often the janitor reaps branches whose TTL passed (and re-reads the store's
    /// settings, so a `scion config` change reaches the daemon).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub janitor_every: String,
    /// How often the janitor runs GC with the store's grace ('never' to leave GC to
    /// `scion gc`).
    #[arg(long, default_value = "1h", value_name = "DURATION|never")]
    pub gc_every: String,
    /// Opt in to the second tier of WAL recycling for writers that never pause: above this
    /// many WAL frames, hold the write lock for a moment (waiting at most 10 ms for it) so
    /// the WAL can restart. Writers with a busy timeout wait that moment; writers without
    /// one may get SQLITE_BUSY. Off by default: capture never takes the write lock. 250
    /// (below SQLite's own autocheckpoint threshold) suits a writer that never pauses.
    #[arg(long, value_name = "FRAMES")]
    pub barrier_frames: Option<u32>,
    /// Let the janitor compact a branch once at least this share of its head's pages lie
    /// in small segments (as many small commits leave them; a cold scan then reads them
    /// one by one), e.g. 5%. Only those pages are rewritten, into one segment; pages
    /// shared with other branches stay shared. Off by default.
    #[arg(long, value_name = "PERCENT")]
    pub compact_fragmented: Option<String>,
    /// How long a branch's head must have stayed put before the janitor compacts it (a
    /// writer mid-transaction would otherwise find the head moved at its commit).
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub compact_idle: String,
    /// Push a branch to a remote as it moves (repeatable): REMOTE:db[@branch], e.g.
    /// origin:shop@main. The lag of each push is in the metrics
    /// (scion_follow_lag_seconds); a follow the remote refuses (its branch moved on its
    /// own) is started again every 10 s until a pull and merge make it a fast-forward.
    #[arg(long = "follow", value_name = "REMOTE:BRANCH")]
    pub follow: Vec<String>,
    /// How often followed branches' heads are read.
    #[arg(long, default_value = "100ms", value_name = "DURATION")]
    pub follow_every: String,
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Open a session: fork (optionally), check out, lease and capture, in one call.
    /// Prints the session's id and the checkout path to open with any SQLite client.
    #[command(
        after_help = "Examples:\n  scion session open shop\n  scion session open shop@test-1 --fork-from main --ephemeral --owner-pid $$\n  sqlite3 \"$(scion session open shop --json | jq -r .path)\""
    )]
    Open {
        /// db[@branch] to capture (with --fork-from: the new branch; default a name
        /// made from the session's id).
        target: String,
        /// Fork this branch of the database first (`main`, or `main@checkpoint`).
        #[arg(long, value_name = "BRANCH[@CHECKPOINT]")]
        fork_from: Option<String>,
        /// Close the session after this long (a fork may be reaped after it too).
        #[arg(long, value_name = "DURATION")]
        ttl: Option<String>,
        /// Close the session after this long without a captured commit or a request.
        #[arg(long, value_name = "DURATION")]
        idle_timeout: Option<String>,
        /// Destroy the branch when the session closes (needs --fork-from).
        #[arg(long)]
        ephemeral: bool,
        /// Close the session when this process exits (e.g. --owner-pid $$).
        #[arg(long, value_name = "PID")]
        owner_pid: Option<u32>,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Make everything committed so far durable, and print the durable version.
    #[command(
        after_help = "Examples:\n  scion session flush shop@ux\n  scion session flush s-1a2b3c4d5e6f --checkpoint before-migration --meta by=agent-7"
    )]
    Flush {
        /// The session's id (s-...), or the branch it captures (db@branch).
        id: String,
        /// Name the durable version as this checkpoint.
        #[arg(long)]
        checkpoint: Option<String>,
        /// key=value kept with the checkpoint (repeatable).
        #[arg(long, value_name = "KEY=VALUE")]
        meta: Vec<String>,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Flush and close a session (closing a closed session answers the same again).
    #[command(
        after_help = "Examples:\n  scion session close shop@ux\n  scion session close s-1a2b3c4d5e6f"
    )]
    Close {
        /// The session's id (s-...), or the branch it captures (db@branch).
        id: String,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// The open sessions: branch, durable version and age, capture lag.
    #[command(after_help = "Example:\n  scion session list --json")]
    List {
        #[command(flatten)]
        socket: SocketArg,
    },
}

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub socket: SocketArg,
    /// Go through a running daemon: auto (when one answers), require, or never (tools
    /// then run in this process, sessions too).
    #[arg(long, default_value = "auto", value_name = "auto|require|never")]
    pub daemon: String,
    /// The TTL of every fork an agent makes when it gives none.
    #[arg(long, default_value = "24h", value_name = "DURATION")]
    pub default_ttl: String,
    /// The longest TTL an agent may ask for.
    #[arg(long, default_value = "7d", value_name = "DURATION")]
    pub max_ttl: String,
    /// Let agents make branches that never expire (`ttl: "none"`).
    #[arg(long)]
    pub allow_no_ttl: bool,
    /// Let agents use `force` (on protected branches, main included).
    #[arg(long)]
    pub allow_force: bool,
    /// How many branches this server may create.
    #[arg(long, default_value_t = 200)]
    pub max_branches: usize,
    /// Offer only the reading tools: list, diff, query, read-only checkout, session status.
    #[arg(long)]
    pub read_only: bool,
    /// The tag recorded as the owner of every branch this server's agent forks: the agent
    /// may change those branches and, unless granted more, no others. Give each agent its
    /// own tag to keep their branches apart; a restarted server with the same tag owns
    /// them again. Default: `agent`, or with a scoped --token-file the token's own
    /// `token:NAME` (the daemon records the token's forks as its).
    #[arg(long, value_name = "TAG")]
    pub owner: Option<String>,
    /// Let the agent also change branches it did not fork that match PATTERN (`db@branch`,
    /// `*` matches any run of characters: `shop@exp-*`, `shop@main`, `shop` for all of
    /// shop). Repeat for more.
    #[arg(long = "write", value_name = "PATTERN")]
    pub write: Vec<String>,
    /// Give the agent only these databases (comma-separated): others are neither listed,
    /// read nor changed. Default: every database of the store.
    #[arg(long, value_delimiter = ',', value_name = "DB,...")]
    pub databases: Vec<String>,
    /// A file holding the token to present to a daemon that asks for one (a scoped token
    /// from `scion token create`, or the daemon's --token-file).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a scoped token for the daemon's API and print it, once: only its SHA-256 is
    /// kept. Each --grant is PATTERN:VERBS, the pattern db@branch with * globs (a bare db
    /// means all its branches, * everything), the verbs read, fork, write, merge, admin
    /// (each includes the ones before it). Forks made with the token are its own: it may
    /// write them wherever it may fork.
    #[command(
        after_help = "Examples:\n  scion token create ci --grant 'shop@exp-*:write' --grant 'shop:read,fork' --ttl 7d\n  curl -H \"Authorization: Bearer $TOKEN\" http://127.0.0.1:7070/v1/branches/shop@exp-1"
    )]
    Create {
        /// The token's name: head histories record its moves as `token:NAME`.
        name: String,
        /// What the token may do (repeat for more).
        #[arg(long = "grant", value_name = "PATTERN:VERBS", required = true)]
        grants: Vec<String>,
        /// Expire the token after this long (default: never).
        #[arg(long, value_name = "DURATION")]
        ttl: Option<String>,
        #[command(flatten)]
        file: TokenFileArg,
    },
    /// The tokens: name, grants, created, expires (never the tokens themselves).
    List {
        #[command(flatten)]
        file: TokenFileArg,
    },
    /// Remove a token: a daemon refuses it (401) from its next request.
    Revoke {
        name: String,
        #[command(flatten)]
        file: TokenFileArg,
    },
}

#[derive(Debug, Args)]
pub struct TokenFileArg {
    /// The token file (default: SCION_TOKENS, else ~/.config/scion/tokens.json).
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
}

/// `scion bench capture`: the kill -9 torture of live capture.
#[derive(Debug, Args)]
pub struct CaptureBenchArgs {
    /// Torture rounds (CI runs 200; the published figure is 3,500).
    #[arg(long, default_value_t = 3500)]
    pub rounds: usize,
    /// Seed of the round schedule (writers, kill points, maintenance).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Working directory (default: a fresh temp dir, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
