//! `scion remote`, `scion push`, `scion pull` and `scion clone`: branches that travel
//! between stores.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::Subcommand;
use scion_core::progress::ProgressSink;
use scion_core::{BranchRef, DbName, RemoteName, Scion};
use scion_merge::{MergeOptions, Strategy};
use scion_remote::{
    CloneOptions, PullOptions, PullOutcome, PushOptions, PushOutcome, Remote, RemoteError,
};

use crate::cli_merge::{render as render_merge, StrategyArg};
use crate::output::{bytes, plural, Printer};

/// Name other stores to push to and pull from.
#[derive(Debug, Subcommand)]
#[command(
    after_help = "Examples:\n  scion remote add origin s3://team-bucket/scion\n  scion remote add laptop /home/me/project/.scion\n  scion remote list"
)]
pub enum RemoteCommand {
    /// Record another store under a name: a directory, file:///path, s3://bucket/prefix
    /// or az://container/prefix.
    Add { name: String, location: String },
    /// The remotes this store knows.
    List,
    /// Forget a remote (its remote-tracking branches stay until destroyed).
    Remove { name: String },
}

/// Send a branch to a remote store and move the branch there, fast-forward only.
///
/// Only what the remote lacks travels: the segments of the new versions (each checked
/// as it arrives), and the root records of the versions between, so merges there find
/// the same base as here. The remote's branch moves last, by compare-and-swap, so no
/// reader there ever sees a head whose data is not all there; a push cut short sends
/// only the rest when run again. When the remote's head is not an ancestor of this one
/// the push is refused: pull and merge first, or replace it with --force-with-lease
/// (only if it is still the version last seen here). db@REMOTE~BRANCH follows what the
/// remote holds.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  scion push origin shop\n  scion push origin shop@try --as experiment --checkpoints\n  scion push origin shop@rewrite --as main --force-with-lease --force\n  scion push origin shop --json"
)]
pub struct PushArgs {
    /// The remote to push to (`scion remote list`).
    pub remote: String,
    /// The branch to push: db or db@branch.
    pub target: String,
    /// The branch's name at the remote (default: the same).
    #[arg(long = "as", value_name = "BRANCH")]
    pub as_branch: Option<String>,
    /// Send the branch's checkpoints too (one the remote already has is left alone).
    #[arg(long)]
    pub checkpoints: bool,
    /// Replace the remote's head even if it is not an ancestor of this one, but only if it
    /// is still the version this store last saw there (its remote-tracking branch).
    #[arg(long)]
    pub force_with_lease: bool,
    /// Needed with --force-with-lease on a protected branch, and to move a branch the
    /// remote has leased or checked out.
    #[arg(long)]
    pub force: bool,
    /// Keep pushing the branch as it moves, until stopped (or for --for): one line per
    /// push with how far the remote lagged. Started again after a crash, it sends what the
    /// remote missed.
    #[arg(long)]
    pub follow: bool,
    /// With --follow: how often the branch's head is read.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "100ms",
        requires = "follow"
    )]
    pub interval: String,
    /// With --follow: stop after this long and print a summary of the lag.
    #[arg(long = "for", value_name = "DURATION", requires = "follow")]
    pub duration: Option<String>,
}

/// Bring a remote branch here, and into the local branch.
///
/// The remote's head goes into the remote-tracking branch db@REMOTE~BRANCH (read-only;
/// only what this store lacks travels), then into the local branch: made if missing,
/// fast-forwarded, or merged with `scion merge`'s rules and report (conflicts are
/// reported and nothing is published; the remote's version stays in the tracking branch).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  scion pull origin shop --force          # into main, which is protected\n  scion pull origin shop@try              # a new local branch try\n  scion pull origin shop@try --into main --force\n  scion pull origin shop --fetch-only     # just shop@origin~main"
)]
pub struct PullArgs {
    /// The remote to pull from (`scion remote list`).
    pub remote: String,
    /// The remote's branch: db or db@branch.
    pub target: String,
    /// The local branch that receives it (default: the same name; made if missing).
    #[arg(long, value_name = "BRANCH")]
    pub into: Option<String>,
    /// Only bring the remote's head into the remote-tracking branch (db@REMOTE~BRANCH).
    #[arg(long)]
    pub fetch_only: bool,
    /// When both sides changed the same cells: fail publishes nothing; ours keeps the
    /// local side; theirs takes the remote's.
    #[arg(long, value_enum, default_value = "fail")]
    pub strategy: StrategyArg,
    /// Rows both sides added under the same INTEGER PRIMARY KEY are kept as two rows: the
    /// remote's get ids after the local branch's, as `scion merge --renumber`.
    #[arg(long)]
    pub renumber: bool,
    /// Needed to move a protected local branch (main), as for `scion merge`.
    #[arg(long)]
    pub force: bool,
}

/// Make a new store holding another store's databases.
///
/// Every branch and checkpoint of the chosen databases is copied, the source is recorded
/// as remote `origin`, and each branch gets its remote-tracking branch (db@origin~BRANCH).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  scion clone s3://team-bucket/scion work     # the store goes in work/.scion\n  scion clone /data/scion copy --db shop\n  scion --store /tmp/mirror clone az://container/scion"
)]
pub struct CloneArgs {
    /// The store to copy: a directory, file:///path, s3://bucket/prefix or
    /// az://container/prefix.
    pub location: String,
    /// The directory of the new store's project: the store goes in DIR/.scion (default:
    /// the last part of LOCATION). `--store` names the store directory itself instead.
    pub dir: Option<PathBuf>,
    /// Only these databases (repeatable; default: all).
    #[arg(long = "db", value_name = "NAME")]
    pub dbs: Vec<String>,
    /// The name the new store gives LOCATION.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub origin: String,
}

/// The engine's error inside a remote's error, so its code and hint reach the user.
fn unwrap_error(e: RemoteError) -> anyhow::Error {
    match e {
        RemoteError::Engine(e) => e.into(),
        RemoteError::Core(e) => e.into(),
        RemoteError::Merge(e) => e.into(),
        other => other.into(),
    }
}

fn progress() -> ProgressSink {
    ProgressSink(Arc::new(crate::progress::Bar::default()))
}

pub fn remote(p: &Printer, s: &Scion, cmd: &RemoteCommand) -> Result<()> {
    match cmd {
        RemoteCommand::Add { name, location } => {
            let name = RemoteName::new(name)?;
            let recorded = s.engine().add_remote(&name, location)?;
            if p.json {
                p.emit(&serde_json::json!({"remote": name.to_string(), "location": recorded}));
            } else {
                outln!("remote {name} is {recorded}");
            }
        }
        RemoteCommand::List => {
            let remotes = s.engine().remotes()?;
            if p.json {
                let list: Vec<_> = remotes
                    .iter()
                    .map(|(n, l)| serde_json::json!({"remote": n, "location": l}))
                    .collect();
                p.emit(&list);
            } else if remotes.is_empty() {
                outln!("no remotes (`scion remote add <name> <location>` adds one)");
            } else {
                for (n, l) in &remotes {
                    outln!("{n}\t{l}");
                }
            }
        }
        RemoteCommand::Remove { name } => {
            let name = RemoteName::new(name)?;
            let was = s.engine().remove_remote(&name)?;
            if p.json {
                p.emit(&serde_json::json!({"removed": name.to_string(), "location": was}));
            } else {
                outln!("removed remote {name} ({was})");
            }
        }
    }
    Ok(())
}

pub fn push(p: &Printer, s: &Scion, args: &PushArgs) -> Result<()> {
    let b: BranchRef = args.target.parse()?;
    let opts = PushOptions {
        as_branch: args
            .as_branch
            .as_deref()
            .map(|a| crate::branch_arg::branch_of(&b.db, a))
            .transpose()?,
        checkpoints: args.checkpoints,
        force_with_lease: args.force_with_lease,
        force: args.force,
    };
    let bar = progress();
    let remote =
        Remote::open(s, &RemoteName::new(&args.remote)?, bar.clone()).map_err(unwrap_error)?;
    if args.follow {
        return follow(p, s, &remote, &b, opts, args);
    }
    let r = scion_remote::push(s, &remote, &b, &opts, bar.0.as_ref()).map_err(unwrap_error)?;
    if p.json {
        p.emit(&r);
        return Ok(());
    }
    let what = match r.outcome {
        PushOutcome::UpToDate => format!("{} already has this version", r.remote_branch),
        PushOutcome::Created => format!(
            "created {} at version {}",
            r.remote_branch, r.remote_version
        ),
        PushOutcome::FastForward => format!(
            "fast-forwarded {} from version {} to {}",
            r.remote_branch,
            r.remote_version_before.unwrap_or(0),
            r.remote_version
        ),
        PushOutcome::Forced => format!(
            "replaced {}'s version {} with {} (--force-with-lease)",
            r.remote_branch,
            r.remote_version_before.unwrap_or(0),
            r.remote_version
        ),
    };
    outln!(
        "pushed {} to {} ({}): {what}",
        r.branch,
        r.remote,
        r.location
    );
    outln!("{}", transfer_line(&r.transfer, Way::Sent));
    for (name, how) in &r.checkpoints {
        outln!(
            "checkpoint {name}: {}",
            serde_json::to_value(how)?.as_str().unwrap_or("")
        );
    }
    Ok(())
}

/// `scion push --follow`: a line per push, a summary at the end of --for.
fn follow(
    p: &Printer,
    s: &Scion,
    remote: &Remote,
    b: &BranchRef,
    push: PushOptions,
    args: &PushArgs,
) -> Result<()> {
    use scion_core::clock::parse_duration;
    let opts = scion_remote::FollowOptions {
        push,
        interval: parse_duration(&args.interval)?,
        duration: args.duration.as_deref().map(parse_duration).transpose()?,
    };
    if !p.json {
        eprintln!(
            "following {b} to {} ({}); reading its head every {}",
            remote.name, remote.location, args.interval
        );
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let summary = scion_remote::follow(
        s,
        remote,
        b,
        &opts,
        &stop,
        |tick| {
            if p.json {
                outln!("{}", serde_json::to_string(tick).unwrap_or_default());
            } else {
                outln!(
                    "pushed {} version {} ({}, {} sent; lag {} ms)",
                    tick.report.remote_branch,
                    tick.report.remote_version,
                    plural(tick.versions, "version"),
                    bytes(tick.report.transfer.stats.bytes_sent),
                    tick.lag_ms
                );
            }
        },
        |e| eprintln!("warning: push failed, trying again: {e}"),
    )
    .map_err(unwrap_error)?;
    if p.json {
        outln!("{}", serde_json::json!({ "summary": summary }));
    } else {
        outln!(
            "{}, {} followed; lag per version p50 {} ms, p99 {} ms, max {} ms; {} retried",
            plural_es(summary.pushes, "push"),
            plural(summary.versions, "version"),
            summary.lag_p50_ms,
            summary.lag_p99_ms,
            summary.lag_max_ms,
            plural(summary.retries, "round")
        );
    }
    Ok(())
}

pub fn pull(p: &Printer, s: &Scion, args: &PullArgs) -> Result<()> {
    let b: BranchRef = args.target.parse()?;
    let opts = PullOptions {
        into: args
            .into
            .as_deref()
            .map(|i| crate::branch_arg::branch_of(&b.db, i))
            .transpose()?,
        merge: MergeOptions {
            strategy: match args.strategy {
                StrategyArg::Fail => Strategy::Fail,
                StrategyArg::Ours => Strategy::Ours,
                StrategyArg::Theirs => Strategy::Theirs,
            },
            allow_protected: args.force,
            renumber: args.renumber,
            ..Default::default()
        },
        fetch_only: args.fetch_only,
    };
    let bar = progress();
    let remote =
        Remote::open(s, &RemoteName::new(&args.remote)?, bar.clone()).map_err(unwrap_error)?;
    let r = scion_remote::pull(s, &remote, &b, &opts, bar.0.as_ref()).map_err(unwrap_error)?;
    if p.json {
        p.emit(&r);
    } else {
        outln!(
            "fetched {} version {} from {} ({}) into {}",
            r.remote_branch,
            r.remote_version,
            r.remote,
            r.location,
            r.tracking
        );
        outln!("{}", transfer_line(&r.transfer, Way::Received));
        if r.outcome == PullOutcome::Created {
            outln!("created {} at the remote's version", r.into);
        }
        if let Some(m) = &r.merge {
            out!("{}", render_merge(m));
        }
    }
    if r.outcome == PullOutcome::Conflicts {
        let mut hint = format!(
            "the remote's version is in {}: `scion merge {} --into {} --dry-run` shows the conflicts; settle them with `scion merge ... --resolve` or `--strategy`",
            r.tracking, r.tracking, r.into
        );
        if !args.renumber
            && r.merge
                .as_ref()
                .is_some_and(crate::cli_merge::shared_new_ids)
        {
            hint +=
                "; rows both sides added under the same id are kept as two rows with --renumber";
        }
        return Err(crate::cli_merge::MergeStopped::new(
            format!("{} cannot take {} as it stands", r.into, r.tracking),
            hint,
        )
        .into());
    }
    Ok(())
}

pub fn clone(p: &Printer, store: Option<&str>, args: &CloneArgs) -> Result<()> {
    let dir = match (store, &args.dir) {
        (Some(s), None) => PathBuf::from(s),
        (_, Some(d)) => d.join(".scion"),
        (None, None) => PathBuf::from(default_dir(&args.location)?).join(".scion"),
    };
    let opts = CloneOptions {
        dbs: args
            .dbs
            .iter()
            .map(|d| DbName::new(d))
            .collect::<Result<_, _>>()?,
        remote: RemoteName::new(&args.origin)?,
        ..Default::default()
    };
    let (_, r) =
        scion_remote::clone(&args.location, &dir, &opts, progress()).map_err(unwrap_error)?;
    if p.json {
        p.emit(&r);
        return Ok(());
    }
    outln!(
        "cloned {} into {}: {}, {}",
        r.location,
        r.store,
        plural(r.databases.len() as u64, "database"),
        plural_es(r.branches.len() as u64, "branch")
    );
    for b in &r.branches {
        outln!(
            "  {} version {} ({})",
            b.branch,
            b.version,
            plural(b.checkpoints as u64, "checkpoint")
        );
    }
    outln!("{}", transfer_line(&r.transfer, Way::Received));
    outln!(
        "the store is remote `{}` of the new one; `scion pull {} <db>` brings its changes",
        r.remote,
        r.remote
    );
    Ok(())
}

/// The directory a clone of `location` makes when none is named: its last part.
fn default_dir(location: &str) -> Result<String> {
    let trimmed = location.trim_end_matches('/');
    let last = trimmed.rsplit(['/', ':']).next().unwrap_or("");
    if last.is_empty() || last == "." || last == ".." {
        return Err(scion_core::EngineError::InvalidInput {
            reason: format!("cannot name a directory after {location:?}: give one after it"),
        }
        .into());
    }
    Ok(last.to_string())
}

/// Which way a transfer went, from this store's side: its line says so.
#[derive(Clone, Copy)]
enum Way {
    /// A push: segments went to the remote.
    Sent,
    /// A pull or a clone: segments came from it.
    Received,
}

fn transfer_line(t: &scion_remote::Transferred, way: Way) -> String {
    let (verb, place) = match way {
        Way::Sent => ("sent", "there"),
        Way::Received => ("received", "here"),
    };
    let mut line = format!(
        "{verb} {} ({}); {} already {place}",
        plural(t.stats.objects_sent, "segment"),
        bytes(t.stats.bytes_sent),
        plural(t.stats.objects_skipped, "segment")
    );
    if t.ancestors > 0 {
        line += &format!("; {} of history", plural(t.ancestors, "version"));
    }
    line
}

/// `1 push`, `2 pushes`.
fn plural_es(n: u64, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}es")
    }
}
