//! The daemon's commands: `serve` runs it; `session` and `events` talk to it over its
//! socket.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use scion_core::attach::StoreSpec;
use scion_core::clock::parse_duration;
use scion_core::BranchRef;
use scion_daemon::client::DaemonClient;
use scion_daemon::{Config, Daemon, Listen, Metrics};

use crate::cli::Cli;
use crate::cli_daemon::{ServeArgs, SessionCommand, SocketArg};
use crate::output::plural;

/// The socket `--socket` / `SCION_SOCKET` names, else the default one of the store.
fn socket_path(cli: &Cli, arg: &SocketArg) -> Result<PathBuf> {
    if let Some(p) = &arg.socket {
        return Ok(p.clone());
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let spec = StoreSpec::find(cli.store.as_deref(), &cwd, false)?;
    Ok(scion_daemon::transport::default_socket(&spec.location()))
}

fn client(cli: &Cli, arg: &SocketArg) -> Result<DaemonClient> {
    Ok(DaemonClient::new(socket_path(cli, arg)?))
}

pub fn serve(cli: &Cli, args: &ServeArgs) -> Result<()> {
    let metrics = Arc::new(Metrics::default());
    let observer = Arc::new(scion_daemon::StoreObserver(metrics.clone()));
    let attached = crate::store::open_store_observed(cli, observer)?;
    let scion = Arc::new(attached.scion);
    let gc_every = match args.gc_every.as_str() {
        "never" => None,
        d => Some(parse_duration(d)?),
    };
    let config = Config {
        flush_every: parse_duration(&args.flush_every)?,
        lease_ttl: parse_duration(&args.lease_ttl)?,
        janitor_every: parse_duration(&args.janitor_every)?,
        gc_every,
        barrier_frames: args.barrier_frames,
        compact_fragmented: match &args.compact_fragmented {
            None => None,
            Some(pct) => Some(scion_core::ops::compact::FragmentationPolicy {
                scattered_share: parse_percent(pct)?,
                idle: parse_duration(&args.compact_idle)?,
            }),
        },
        follow: args
            .follow
            .iter()
            .map(|f| f.parse::<scion_daemon::FollowTarget>())
            .collect::<Result<_, _>>()?,
        follow_every: parse_duration(&args.follow_every)?,
        tcp_read_only: false,
    };
    for f in &config.follow {
        // A remote that is not there is refused now, not in a log line later.
        scion.engine().remote_location(&f.remote)?;
    }
    let token = args
        .token_file
        .as_deref()
        .map(read_token_file)
        .transpose()?;
    let socket = match &args.socket.socket {
        Some(p) => p.clone(),
        None => scion_daemon::transport::default_socket(scion.engine().location()),
    };
    let listen = Listen {
        socket: socket.clone(),
        tcp: args.listen,
        token,
        allow_remote: args.allow_remote,
        // TCP without --token-file takes only scoped tokens, from a file named on purpose.
        tokens: match (
            &args.tokens,
            args.listen.is_some() && args.token_file.is_none(),
        ) {
            (Some(f), _) => Some(f.clone()),
            (None, true) => None,
            (None, false) => Some(scion_daemon::tokens::TokenStore::default_path()),
        },
        socket_tokens: args.socket_tokens,
    };
    let daemon = Daemon::new(scion.clone(), config, metrics, listen)?;
    eprintln!(
        "scion serve: store {}, socket {}\n  export SCION_SOCKET={}",
        scion.engine().location(),
        socket.display(),
        socket.display()
    );
    if let Some(addr) = args.listen {
        eprintln!("  and TCP on {addr} (every request presents a token)");
    }
    daemon.serve()?;
    eprintln!("scion serve: stopped");
    Ok(())
}

fn print(cli: &Cli, v: &serde_json::Value, human: impl FnOnce(&serde_json::Value)) {
    if cli.json {
        outln!("{v}");
    } else {
        human(v);
    }
}

pub fn session(cli: &Cli, cmd: &SessionCommand) -> Result<()> {
    match cmd {
        SessionCommand::Open {
            target,
            fork_from,
            ttl,
            idle_timeout,
            ephemeral,
            owner_pid,
            socket,
        } => {
            let (db, branch) = match target.split_once('@') {
                Some(_) => {
                    let b: BranchRef = target.parse()?;
                    (b.db.to_string(), Some(b.branch.to_string()))
                }
                None => (target.clone(), None),
            };
            let branch = branch.or_else(|| fork_from.is_none().then(|| "main".to_string()));
            let body = serde_json::json!({
                "db": db,
                "branch": branch,
                "fork_from": fork_from,
                "ttl": ttl,
                "idle_timeout": idle_timeout,
                "ephemeral": ephemeral,
                "owner_pid": owner_pid,
            });
            let r = client(cli, socket)?.request("POST", "/v1/sessions", Some(&body), &[])?;
            print(cli, &r.body, |v| {
                outln!("{}", v["path"].as_str().unwrap_or_default());
                eprintln!(
                    "session {} on {} (version {})",
                    v["id"].as_str().unwrap_or_default(),
                    v["branch"].as_str().unwrap_or_default(),
                    v["version"]
                );
            });
        }
        SessionCommand::Flush {
            id,
            checkpoint,
            meta,
            socket,
        } => {
            let mut m = serde_json::Map::new();
            for kv in meta {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("--meta {kv:?}: expected KEY=VALUE"))?;
                m.insert(k.to_string(), serde_json::Value::String(v.to_string()));
            }
            let body = serde_json::json!({"checkpoint": checkpoint, "meta": m});
            let r = client(cli, socket)?.request(
                "POST",
                &format!("/v1/sessions/{id}/flush"),
                Some(&body),
                &[],
            )?;
            print(cli, &r.body, |v| {
                let what = if v["committed"].as_bool() == Some(true) {
                    let count = |k: &str| v[k].as_u64().unwrap_or(0);
                    format!(
                        "committed {} ({})",
                        plural(count("transactions"), "transaction"),
                        plural(count("pages"), "page")
                    )
                } else {
                    "nothing new to commit".to_string()
                };
                outln!("durable version {}: {what}", v["version"]);
                if let Some(c) = v["checkpoint"].as_str() {
                    outln!("checkpoint {c}");
                }
            });
        }
        SessionCommand::Close { id, socket } => {
            let r =
                client(cli, socket)?.request("DELETE", &format!("/v1/sessions/{id}"), None, &[])?;
            print(cli, &r.body, |v| {
                outln!(
                    "closed {} on {} at version {}{}",
                    v["id"].as_str().unwrap_or_default(),
                    v["branch"].as_str().unwrap_or_default(),
                    v["version"],
                    if v["destroyed"].as_bool() == Some(true) {
                        " (branch destroyed)"
                    } else {
                        ""
                    }
                );
            });
        }
        SessionCommand::List { socket } => {
            let r = client(cli, socket)?.request("GET", "/v1/sessions", None, &[])?;
            print(cli, &r.body, |v| {
                let list = v["sessions"].as_array().cloned().unwrap_or_default();
                if list.is_empty() {
                    outln!("no sessions");
                }
                for s in list {
                    // The second tier's barriers, for a daemon started with --barrier-frames.
                    let recycling = &s["recycling"];
                    let held = recycling["barriers"].as_u64().unwrap_or(0);
                    let skipped = recycling["barriers_skipped"].as_u64().unwrap_or(0);
                    let barriers = if held + skipped > 0 {
                        format!("  barriers {held} ({skipped} skipped)")
                    } else {
                        String::new()
                    };
                    outln!(
                        "{}  {}  {}  durable v{}  age {} ms  lag {} B{barriers}  {}",
                        s["id"].as_str().unwrap_or_default(),
                        s["branch"].as_str().unwrap_or_default(),
                        s["state"].as_str().unwrap_or_default(),
                        s["durable_version"],
                        s["durable_age_ms"],
                        s["capture_lag_bytes"],
                        s["path"].as_str().unwrap_or_default(),
                    );
                }
            });
        }
    }
    Ok(())
}

pub fn events(cli: &Cli, since: Option<u64>, follow: bool, socket: &SocketArg) -> Result<()> {
    use std::io::Write;
    // Without --since: every event still kept (and, with --follow, what comes next).
    client(cli, socket)?.events(Some(since.unwrap_or(0)), follow, |e| {
        let line = if cli.json {
            e.data
        } else {
            let v: serde_json::Value = serde_json::from_str(&e.data).unwrap_or_default();
            format!("{} {} {}", e.id.unwrap_or(0), e.event, v["data"])
        };
        writeln!(std::io::stdout(), "{line}").is_ok() && std::io::stdout().flush().is_ok()
    })?;
    Ok(())
}

pub fn mcp(cli: &Cli, args: &crate::cli_daemon::McpArgs) -> Result<()> {
    let mode: scion_mcp::DaemonMode = args.daemon.parse().map_err(anyhow::Error::msg)?;
    let attached = crate::store::open_store(cli, false)?;
    let scion = Arc::new(attached.scion);
    let socket = match &args.socket.socket {
        Some(p) => p.clone(),
        None => scion_daemon::transport::default_socket(scion.engine().location()),
    };
    let mut config = scion_mcp::McpConfig {
        default_ttl: parse_duration(&args.default_ttl)?,
        max_ttl: parse_duration(&args.max_ttl)?,
        allow_no_ttl: args.allow_no_ttl,
        allow_force: args.allow_force,
        max_branches: args.max_branches,
        read_only: args.read_only,
        grants: scion_mcp::access::Grants {
            owner: args
                .owner
                .as_deref()
                .unwrap_or(scion_mcp::access::DEFAULT_OWNER)
                .parse()?,
            databases: (!args.databases.is_empty())
                .then(|| args.databases.iter().cloned().collect()),
            write: args
                .write
                .iter()
                .map(|p| p.parse())
                .collect::<Result<_, String>>()
                .map_err(anyhow::Error::msg)?,
        },
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // Looking for a daemon blocks: done before the runtime runs.
    let identity = scion_mcp::Identity {
        actor: Some(config.grants.owner.to_string()),
        token: args
            .token_file
            .as_deref()
            .map(read_token_file)
            .transpose()?,
    };
    let api = rt.block_on(async {
        tokio::task::spawn_blocking(move || scion_mcp::Api::connect(mode, socket, scion, identity))
            .await
    })?;
    let api = api.map_err(anyhow::Error::msg)?;
    if args.owner.is_none() && args.token_file.is_some() {
        // The daemon makes a scoped token's forks the token's: own the same branches.
        let me = rt.block_on(api.call("GET", "/v1/whoami", None));
        let me =
            me.map_err(|f| anyhow::anyhow!("asking the daemon who this token is: {}", f.message))?;
        if let Some(actor) = me["token"].as_str().and(me["actor"].as_str()) {
            config.grants.owner = actor.parse()?;
        }
    }
    rt.block_on(async move {
        tracing::info!("scion mcp: tools run {}", api.describe());
        let server = scion_mcp::ScionMcp::new(api, config);
        scion_mcp::serve_stdio(server)
            .await
            .map_err(anyhow::Error::msg)
    })
}

/// "5%", "5" or "0.5%" as a share from 0 to 1.
fn parse_percent(s: &str) -> anyhow::Result<f64> {
    let n: f64 = s.trim().trim_end_matches('%').parse().map_err(|_| {
        anyhow::anyhow!("invalid percentage {s:?}: expected a number such as 5 or 5%")
    })?;
    if !(0.0..=100.0).contains(&n) {
        anyhow::bail!("invalid percentage {s:?}: it must be between 0 and 100");
    }
    Ok(n / 100.0)
}

/// The token in a `--token-file`: its one line, refused when empty (an empty token would
/// let an empty `Authorization` or `/ui?token=` in).
fn read_token_file(f: &std::path::Path) -> Result<String> {
    let token = std::fs::read_to_string(f)
        .with_context(|| format!("reading the token file {}", f.display()))?
        .trim()
        .to_string();
    if token.is_empty() {
        anyhow::bail!(
            "the token file {} is empty: put a token in it (e.g. `head -c 32 /dev/urandom | base64 > {}`)",
            f.display(),
            f.display()
        );
    }
    Ok(token)
}
