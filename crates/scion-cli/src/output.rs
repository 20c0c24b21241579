//! Human and JSON renderings of command results. Results go to stdout; notes to stderr.

use std::path::Path;

use scion_core::checkout::{CloneCapability, ReleaseReport};
use scion_core::names::{BranchRef, CheckpointName, DbName};
use scion_core::ops::checkpoint::CheckpointReport;
use scion_core::ops::create::CreateReport;
use scion_core::ops::export::ExportReport;
use scion_core::ops::fork::ForkReport;
use scion_core::ops::gc::GcReport;
use scion_core::ops::lease::LeaseInfo;
use scion_core::ops::lifecycle::{DestroyReport, MoveReport};
use scion_core::ops::status::{BranchStatus, StatusReport};
use scion_core::refs::Checkpoint;
use scion_core::{CheckoutAction, CheckoutReport, Scion};
use serde::Serialize;

pub struct Printer {
    pub json: bool,
}

pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

pub(crate) fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

impl Printer {
    pub(crate) fn emit<T: Serialize>(&self, value: &T) {
        outln!(
            "{}",
            serde_json::to_string_pretty(value).expect("results serialize")
        );
    }

    /// A one-line result, or its JSON form.
    pub fn done(&self, human: &str, json: serde_json::Value) {
        if self.json {
            self.emit(&json);
        } else {
            outln!("{human}");
        }
    }

    pub fn moved(&self, verb: &str, r: &MoveReport) {
        if self.json {
            return self.emit(r);
        }
        match verb {
            "undone" | "restored" => {
                outln!(
                    "{verb}: {} now holds {}, as version {}",
                    r.branch,
                    r.to,
                    r.version
                )
            }
            _ => outln!(
                "{verb}: {} now holds what {} holds (version {} there), as version {}",
                r.branch,
                r.to,
                r.to_version,
                r.version
            ),
        }
        if r.revived {
            outln!("the branch had been destroyed: its checkpoints are gone, its history is whole");
            if let Some(ttl) = r.ttl_secs {
                outln!(
                    "its TTL ({}) counts again from now; `scion touch {} --ttl none` keeps it for good",
                    scion_core::clock::format_duration(ttl),
                    r.branch
                );
            }
            outln!("take it back: scion destroy {}", r.branch);
            return;
        }
        match &r.safety_fork {
            Some(f) => outln!(
                "abandoned version {} is kept in the history (entry #{}) and as {f}",
                r.abandoned_version,
                r.history_entry
            ),
            None => outln!(
                "abandoned version {} is kept in the history (entry #{})",
                r.abandoned_version,
                r.history_entry
            ),
        }
        let force = if r.protected { " --force" } else { "" };
        match r.undid_entry {
            // Undoing again would take back the next older move: the way back is the
            // state the undone entry left.
            Some(entry) => outln!("redo it: scion restore {} --to {entry}{force}", r.branch),
            None => outln!("take it back: scion undo {}{force}", r.branch),
        }
        if r.discarded_changes {
            outln!("discarded uncheckpointed changes in the checkout (--force)");
        }
        if let Some(p) = &r.checkout {
            outln!("checkout refreshed: {p}");
        }
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
    }

    pub fn destroyed(&self, r: &DestroyReport) {
        if self.json {
            return self.emit(r);
        }
        outln!(
            "destroyed {} ({} and {} checkout files removed)\n  its pages stay in the head history for `scion restore` until the history retention passes (`scion config` shows it); `scion gc` reclaims them after that, and now only what no history names",
            r.branch,
            plural(r.checkpoints_removed as u64, "checkpoint"),
            r.checkout_files_removed
        );
    }

    pub fn leases(&self, list: &[LeaseInfo]) {
        if self.json {
            return self.emit(&serde_json::json!({"leases": list}));
        }
        if list.is_empty() {
            outln!("no leases");
            return;
        }
        for l in list {
            let state = if l.live { "held" } else { "expired" };
            outln!(
                "{}  {}  {state}  epoch {}  until {}",
                l.branch,
                l.holder,
                l.epoch,
                l.expires
            );
        }
    }

    pub fn verify(&self, r: &scion_core::ops::verify::VerifyReport) {
        if self.json {
            return self.emit(r);
        }
        outln!(
            "verified {} and {}: {} versions, {} frames",
            plural(r.refs as u64, "ref"),
            plural(r.checkpoints as u64, "checkpoint"),
            r.versions,
            r.frames
        );
        outln!(
            "garbage: {} unreachable ({}), {} ({})",
            plural(r.unreachable_segments as u64, "segment"),
            bytes(r.unreachable_bytes),
            plural(r.temp_files.len() as u64, "temp file"),
            bytes(r.temp_bytes)
        );
        for p in &r.problems {
            outln!("problem: {}: {}", p.object, p.message);
        }
        outln!(
            "{}",
            if r.ok() {
                "ok".to_string()
            } else {
                format!("{} found", plural(r.problems.len() as u64, "problem"))
            }
        );
    }

    pub fn gc(&self, r: &GcReport) {
        if self.json {
            return self.emit(r);
        }
        for b in &r.reaped {
            outln!("reaped expired branch {b}");
        }
        if r.temp_files_removed > 0 {
            outln!(
                "removed {} left by interrupted checkouts ({})",
                plural(r.temp_files_removed as u64, "temp file"),
                bytes(r.temp_bytes_removed)
            );
        }
        for b in &r.finished_destroys {
            outln!("finished interrupted destroy of {b}");
        }
        for b in &r.kept_in_use {
            outln!("kept expired branch {b}: its checkout is open or has uncheckpointed changes");
        }
        outln!(
            "gc: deleted {} ({} reclaimed); {} live in {}; {} waiting out the {} grace period",
            plural(r.deleted_segments as u64, "segment"),
            bytes(r.reclaimed_bytes),
            bytes(r.live_bytes),
            plural(r.live_segments as u64, "segment"),
            bytes(r.waiting_bytes),
            scion_core::clock::format_duration(r.grace_secs)
        );
        let h = &r.kept_by_history;
        if let (true, Some(first), Some(all)) = (h.bytes > 0, h.first_free_at, h.all_free_at) {
            let when = if first == all {
                format!("at {first}")
            } else {
                format!("from {first} to {all}")
            };
            outln!(
                "gc: {} of the live bytes ({}) only the head history keeps, for `scion undo` and `scion restore`; they free up {when} (the history retention: `scion config --history-retention DURATION` shortens it; `scion config` shows it)",
                bytes(h.bytes),
                plural(h.segments as u64, "segment"),
            );
        }
    }

    pub fn diff(&self, r: &scion_core::diff::DiffReport) {
        if self.json {
            return self.emit(r);
        }
        for b in &r.unsaved_checkouts {
            eprintln!(
                "note: the checkout of {b} holds changes not checkpointed, which this diff of committed versions leaves out (--working takes them in; `scion checkpoint {b} <name>` commits them)"
            );
        }
        for b in &r.working_files {
            eprintln!(
                "note: {b} is read from its checkout file, changes not checkpointed included"
            );
        }
        if let Some(sql) = &r.sql {
            out!("{sql}");
            return;
        }
        outln!(
            "diff {} -> {} ({} differing, {} read)",
            r.left,
            r.right,
            plural(r.pages_differing as u64, "page"),
            plural(r.pages_read, "page")
        );
        if r.schema_changes.is_empty() && r.tables.is_empty() {
            match r.unsaved_checkouts.is_empty() {
                true => outln!("no differences"),
                false => outln!("no differences between the committed versions"),
            }
        }
        for c in &r.schema_changes {
            let mark = match c.change.as_str() {
                "added" => "+",
                "removed" => "-",
                _ => "~",
            };
            outln!("schema {mark} {} {}", c.kind, c.name);
        }
        for t in &r.tables {
            outln!(
                "table {}: {} added, {} removed, {} changed (matched by {})",
                t.table,
                t.added,
                t.removed,
                t.changed,
                t.matched_by
            );
            if let Some(rows) = &t.rows {
                let show = |m: &serde_json::Map<String, serde_json::Value>| {
                    serde_json::Value::Object(m.clone()).to_string()
                };
                for c in &rows.added {
                    outln!("  + {}", c.after.as_ref().map(show).unwrap_or_default());
                }
                for c in &rows.removed {
                    outln!("  - {}", c.before.as_ref().map(show).unwrap_or_default());
                }
                for c in &rows.changed {
                    let (Some(before), Some(after)) = (&c.before, &c.after) else {
                        continue;
                    };
                    let moved: Vec<String> = after
                        .iter()
                        .filter(|(k, v)| before.get(*k) != Some(*v))
                        .map(|(k, v)| {
                            format!("{k}: {} -> {v}", before.get(k).cloned().unwrap_or_default())
                        })
                        .collect();
                    outln!("  ~ {} {}", show(&c.key), moved.join(", "));
                }
                if rows.truncated {
                    outln!("  … more rows differ (--limit)");
                }
            }
        }
    }

    pub fn init(&self, s: &Scion) {
        if self.json {
            self.emit(&serde_json::json!({
                "store": s.engine().location(),
                "store_id": s.engine().store_id(),
                "page_compression": s.engine().page_compression(),
            }));
        } else {
            outln!(
                "initialized scion store at {} (id {}, page compression {})",
                s.engine().location(),
                s.engine().store_id(),
                s.engine().page_compression()
            );
        }
    }

    pub fn create(&self, r: &CreateReport) {
        if self.json {
            return self.emit(r);
        }
        outln!(
            "created {}@main: version 1, {} of {} B ({}, {} written)",
            r.db,
            plural(r.page_count as u64, "page"),
            r.page_size,
            plural(r.store_objects, "object"),
            bytes(r.store_bytes)
        );
    }

    pub fn checkout(&self, r: &CheckoutReport) {
        if let Some(state) = r.discarded {
            eprintln!("discarded the {state} checkout of {} (--force)", r.branch);
        }
        if r.dirty && !self.json {
            eprintln!(
                "dirty: the working copy of {} has changes not yet checkpointed",
                r.branch
            );
        }
        if self.json {
            return self.emit(r);
        }
        if r.action != CheckoutAction::Reused {
            tracing::info!("checkout of {} {:?}", r.branch, r.action);
        }
        outln!("{}", r.path.display());
    }

    pub fn released(&self, r: &ReleaseReport) {
        if let Some(state) = r.discarded {
            eprintln!("discarded the {state} checkout of {} (--force)", r.branch);
        }
        if self.json {
            return self.emit(r);
        }
        if r.files_removed == 0 {
            outln!("released {}: no checkout file was at {}", r.branch, r.path);
        } else {
            outln!("released the checkout of {} ({})", r.branch, r.path);
        }
        for other in &r.released_elsewhere {
            outln!("released the checkout at {other} (--force; that file is now stale)");
        }
        for other in &r.remaining {
            outln!("still checked out at {other}: release it on that host");
        }
    }

    pub fn path(&self, b: &BranchRef, path: &Path) {
        if self.json {
            self.emit(&serde_json::json!({"branch": b.to_string(), "path": path, "exists": path.exists()}));
        } else {
            outln!("{}", path.display());
        }
    }

    pub fn checkpoint(&self, r: &CheckpointReport) {
        if self.json {
            return self.emit(r);
        }
        if r.committed {
            outln!(
                "checkpoint {} at version {} ({} changed, {} and {} written)",
                r.checkpoint,
                r.version,
                plural(r.pages_changed, "page"),
                plural(r.store.objects, "object"),
                bytes(r.store.bytes)
            );
        } else {
            outln!(
                "checkpoint {} at version {} (names the head as it is: no data written)",
                r.checkpoint,
                r.version
            );
        }
    }

    pub fn fork(&self, r: &ForkReport) {
        if self.json {
            return self.emit(r);
        }
        outln!(
            "forked {} from {} (version {})",
            r.branch,
            r.from,
            r.version
        );
    }

    /// A branch's checkpoints, after the reserved names (`fork`, `init`) that always
    /// resolve, marked as such.
    pub fn checkpoints(
        &self,
        b: &BranchRef,
        reserved: &[(CheckpointName, u64)],
        list: &[(CheckpointName, Checkpoint)],
    ) {
        if self.json {
            let rows: Vec<_> = reserved
                .iter()
                .map(|(n, v)| serde_json::json!({"name": n.as_str(), "version": v, "reserved": true}))
                .chain(list.iter().map(|(n, c)| {
                    let mut row = serde_json::json!({"name": n.as_str(), "version": c.version, "created_at": c.created_at});
                    if !c.meta.is_empty() {
                        row["meta"] = serde_json::json!(scion_core::refs::user_meta(&c.meta));
                    }
                    row
                }))
                .collect();
            return self.emit(&serde_json::json!({"branch": b.to_string(), "checkpoints": rows}));
        }
        let w = list
            .iter()
            .map(|(n, _)| n.as_str().len())
            .max()
            .unwrap_or(4)
            .max(4);
        outln!("{:w$}  {:>7}  CREATED", "NAME", "VERSION");
        for (n, v) in reserved {
            let what = match n.as_str() {
                "fork" => "built in: where this branch was forked",
                _ => "built in: the version `scion create` made",
            };
            outln!("{:w$}  {:>7}  ({what})", n.as_str(), v);
        }
        for (n, c) in list {
            outln!("{:w$}  {:>7}  {}", n.as_str(), c.version, c.created_at);
        }
    }

    pub fn branches(&self, db: &DbName, list: &[BranchStatus]) {
        if self.json {
            // A struct, not a JSON map, so each branch's fields keep the order `status`
            // prints them in.
            #[derive(serde::Serialize)]
            struct Branches<'a> {
                db: &'a str,
                branches: &'a [BranchStatus],
            }
            return self.emit(&Branches {
                db: db.as_str(),
                branches: list,
            });
        }
        print_branch_table(list, "");
    }

    pub fn status(&self, s: &StatusReport) {
        if self.json {
            return self.emit(s);
        }
        outln!("store:     {} (id {})", s.store, s.store_id);
        outln!("checkouts: {}", s.checkouts);
        let cap = match &s.clone_capability {
            CloneCapability::Supported => "supported".to_string(),
            CloneCapability::Unsupported { reason } => format!("cannot clone: {reason}"),
            _ => "unknown".to_string(),
        };
        outln!(
            "clone:     policy {}, filesystem {cap}",
            serde_json::to_value(s.clone_policy)
                .unwrap()
                .as_str()
                .unwrap_or("?")
        );
        outln!(
            "space:     {} in {} (`scion verify` says how much `gc` can reclaim)",
            bytes(s.space.bytes),
            plural(s.space.segments as u64, "segment"),
        );
        outln!(
            "pages:     compression {} (`scion config` changes it)",
            s.page_compression
        );
        outln!(
            "history:   heads kept {} after they were replaced (`scion log`, `scion config`)",
            scion_core::clock::format_duration(s.history_retention_secs)
        );
        if let Some(c) = &s.segment_cache {
            let limit = c
                .limit_bytes
                .map_or("no limit".to_string(), |n| format!("at most {}", bytes(n)));
            outln!(
                "cache:     {} of segments in {} ({limit}: SCION_SEGMENT_CACHE_MAX; safe to delete)",
                bytes(c.bytes),
                c.dir
            );
        }
        if s.databases.is_empty() {
            outln!("\nno databases yet (scion create <db> [--from file.db])");
        }
        for db in &s.databases {
            outln!("\n{}", db.db);
            print_branch_table(&db.branches, "  ");
        }
        if !s.hosts.is_empty() {
            outln!("\nheld by host (store clock)");
        }
        for h in &s.hosts {
            outln!("  {}", h.host);
            for l in &h.leases {
                let by = match &l.session {
                    Some(id) => format!("session {id} of `scion serve`"),
                    None => l.holder.clone(),
                };
                outln!(
                    "    lease of {} by {by}, {}s left",
                    l.branch,
                    l.expires_in_secs
                );
            }
            for c in &h.checkouts {
                let age = scion_core::clock::format_duration(c.age_secs);
                outln!("    checkout of {} at {} (for {age})", c.branch, c.path);
            }
        }
    }

    /// A report the library renders itself: JSON with --json, its text otherwise.
    pub fn rendered<T: serde::Serialize>(&self, r: &T, text: &str) {
        if self.json {
            return self.emit(r);
        }
        out!("{text}");
    }

    pub fn export(&self, r: &ExportReport) {
        if self.json {
            return self.emit(r);
        }
        outln!(
            "exported {} (version {}) to {} ({})",
            r.source,
            r.version,
            r.path,
            bytes(r.bytes)
        );
    }
}

fn print_branch_table(list: &[BranchStatus], indent: &str) {
    let w = list
        .iter()
        .map(|b| b.branch.as_str().len() + 2)
        .max()
        .unwrap_or(6)
        .max(6);
    outln!(
        "{indent}{:w$}  {:>7}  {:>9}  {:>11}  {:8}  PARENT",
        "BRANCH",
        "VERSION",
        "SIZE",
        "CHECKPOINTS",
        "CHECKOUT"
    );
    for b in list {
        let name = if b.protected {
            format!("{} *", b.branch)
        } else {
            b.branch.to_string()
        };
        let mut notes = Vec::new();
        if let Some(left) = b.ttl_left_secs {
            notes.push(if left >= 0 {
                // Minutes are precise enough for people (and stable in transcripts).
                let shown = if left >= 60 {
                    left as u64 / 60 * 60
                } else {
                    left as u64
                };
                format!("ttl {} left", scion_core::clock::format_duration(shown))
            } else {
                "ttl expired".to_string()
            });
        }
        if let Some(l) = b.lease.as_ref().filter(|l| l.live) {
            notes.push(format!("leased by {} until {}", l.holder, l.expires));
        }
        if let Some(s) = &b.safety {
            notes.push(format!("safety fork ({s})"));
        }
        if let Some(o) = &b.owner {
            notes.push(format!("owner {o}"));
        }
        if b.ephemeral {
            notes.push("ephemeral".to_string());
        }
        if b.checkout == scion_core::CheckoutState::None && !b.checked_out.is_empty() {
            // Recorded, but not here: another host's file, or one removed by hand.
            notes.push(format!("checked out at {}", b.checked_out.join(", ")));
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!("  [{}]", notes.join("; "))
        };
        outln!(
            "{indent}{:w$}  {:>7}  {:>9}  {:>11}  {:8}  {}{notes}",
            name,
            b.version,
            bytes(b.page_count as u64 * b.page_size as u64),
            b.checkpoints,
            b.checkout.to_string(),
            b.parent.as_deref().unwrap_or("-")
        );
    }
    if list.iter().any(|b| b.protected) {
        outln!("{indent}(* protected)");
    }
}
