//! `status`: every database and branch, with its checkout's state.

use serde::Serialize;

use crate::checkout::{probe_clone, CheckoutState, CloneCapability, ClonePolicy};
use crate::clock::StoreTime;
use crate::error::EngineResult;
use crate::names::{BranchName, BranchRef, DbName};
use crate::Scion;
use scion_engine::ops::lease::is_live;

/// One branch as `status` and `branches` show it.
#[derive(Debug, Clone, Serialize)]
pub struct BranchStatus {
    /// The branch's name (its database is the one it is listed under).
    pub branch: BranchName,
    /// The head's number.
    pub version: u64,
    /// The head's page size in bytes.
    pub page_size: u32,
    /// The head's number of pages.
    pub page_count: u32,
    /// Head moves and destroy need force.
    pub protected: bool,
    /// How many checkpoints it has.
    pub checkpoints: usize,
    /// The state of this host's checkout of it.
    pub checkout: CheckoutState,
    /// The branch's writable checkouts on any host (`host:path`): while there is one,
    /// writers through the VFS are refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checked_out: Vec<String>,
    /// What it was forked from, as people read it.
    pub parent: Option<String>,
    /// Where the branch was forked from (branch, version, checkpoint): the edge of the
    /// branch tree that `scion log --graph` draws.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<crate::refs::Parent>,
    /// When it was made (store clock).
    pub created_at: StoreTime,
    /// Its last commit or touch (store clock); a TTL counts from here.
    pub touched_at: StoreTime,
    /// Its TTL in seconds, if it has one.
    pub ttl_secs: Option<u64>,
    /// Seconds until `gc` may reap the branch (negative: overdue); `None` without a TTL.
    pub ttl_left_secs: Option<i64>,
    /// Its lease, if it carries one.
    pub lease: Option<LeaseStatus>,
    /// Set on safety forks: which operation kept them, for which branch.
    pub safety: Option<String>,
    /// Who made the branch, when a front end with owners (an MCP server, a scoped token)
    /// made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<crate::names::Owner>,
    /// A branch made for one test or attempt: destroyed or reaped, its head history goes
    /// with it (no `scion restore`), so gc reclaims its pages at once.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ephemeral: bool,
    /// The entries users set on the branch (at fork).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub meta: std::collections::BTreeMap<String, String>,
    /// What could not be inspected for this branch (the rest of the report stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// A branch's lease as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LeaseStatus {
    /// Who holds it.
    pub holder: String,
    /// When it ends (store clock).
    pub expires: StoreTime,
    /// Whether it has not ended yet.
    pub live: bool,
}

/// What one host holds on the store: live leases (a `scion serve` session's among them)
/// and writable checkouts, so that every host of a fleet on one bucket can see who has what.
#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    /// The host's name, as its holders and checkout records name it; a holder set by hand
    /// (`--holder agent`) is listed under that name.
    pub host: String,
    /// Its live leases.
    pub leases: Vec<HeldLease>,
    /// Its writable checkouts.
    pub checkouts: Vec<HeldCheckout>,
}

/// A live lease, and how long it has left by the store's clock.
#[derive(Debug, Clone, Serialize)]
pub struct HeldLease {
    /// The leased branch.
    pub branch: BranchRef,
    /// Who holds the lease.
    pub holder: String,
    /// The `scion serve` session capturing the branch, when the lease is one's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Seconds until it ends.
    pub expires_in_secs: u64,
}

/// A writable checkout recorded in a branch's ref, and its age by the store's clock.
#[derive(Debug, Clone, Serialize)]
pub struct HeldCheckout {
    /// The branch checked out.
    pub branch: BranchRef,
    /// The file's path on the host.
    pub path: String,
    /// Seconds since it was checked out.
    pub age_secs: u64,
}

/// The host a lease holder names: `host:boot:pidns/pid`, with `#<session>` for a daemon
/// session's; any other holder is its own name.
fn holder_host(holder: &str) -> (String, Option<String>) {
    let (process, session) = match holder.split_once('#') {
        Some((p, s)) => (p, Some(s.to_string())),
        None => (holder, None),
    };
    let host = match process.split_once(':') {
        Some((host, rest)) if !host.is_empty() && rest.contains('/') => host,
        _ => process,
    };
    (host.to_string(), session)
}

/// Gathers [`HostStatus`] from the refs a status reads.
#[derive(Default)]
struct Holders(std::collections::BTreeMap<String, HostStatus>);

impl Holders {
    fn host(&mut self, name: &str) -> &mut HostStatus {
        self.0
            .entry(name.to_string())
            .or_insert_with(|| HostStatus {
                host: name.to_string(),
                leases: Vec::new(),
                checkouts: Vec::new(),
            })
    }

    fn add(&mut self, b: &BranchRef, r: &crate::refs::Ref, now: std::time::SystemTime) {
        if let Some(l) = r.lease.as_ref().filter(|l| is_live(l, now)) {
            let (host, session) = holder_host(&l.holder);
            let left = l.expires.as_system_time().duration_since(now);
            self.host(&host).leases.push(HeldLease {
                branch: b.clone(),
                holder: l.holder.clone(),
                session,
                expires_in_secs: left.map_or(0, |d| d.as_secs()),
            });
        }
        for c in &r.checkouts {
            let age = now.duration_since(c.since.as_system_time());
            self.host(&c.host).checkouts.push(HeldCheckout {
                branch: b.clone(),
                path: c.path.clone(),
                age_secs: age.map_or(0, |d| d.as_secs()),
            });
        }
    }
}

/// One database and its branches.
#[derive(Debug, Clone, Serialize)]
pub struct DatabaseStatus {
    /// The database.
    pub db: DbName,
    /// Its branches, in name order.
    pub branches: Vec<BranchStatus>,
}

/// The store as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    /// Where the store is.
    pub store: String,
    /// The store's identity, from its manifest.
    pub store_id: String,
    /// Where this host keeps its checkouts.
    pub checkouts: String,
    /// How checkouts may be cloned.
    pub clone_policy: ClonePolicy,
    /// Whether the checkouts' filesystem can clone files.
    pub clone_capability: CloneCapability,
    /// How the store keeps full page frames (chosen at `init`).
    pub page_compression: crate::PageCompression,
    /// How long `gc` keeps every head the head history names (`scion config`).
    pub history_retention_secs: u64,
    /// What the store's segments take.
    pub space: StoreSize,
    /// The local copies of a remote store's segments (absent for a local store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_cache: Option<SegmentCacheStatus>,
    /// Every database, in name order.
    pub databases: Vec<DatabaseStatus>,
    /// Who holds what, by host: live leases and writable checkouts (sorted by host name).
    pub hosts: Vec<HostStatus>,
}

/// What the local segment cache of a remote store holds, and may hold.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentCacheStatus {
    /// The cache's directory.
    pub dir: String,
    /// What it holds, in bytes.
    pub bytes: u64,
    /// `SCION_SEGMENT_CACHE_MAX`; `None` when unlimited.
    pub limit_bytes: Option<u64>,
}

/// What the store's segments take, from a listing alone: status stays O(1) in the size of
/// the databases (what `gc` could reclaim needs a walk of every version; `verify` and `gc`
/// report it).
#[derive(Debug, Clone, Serialize)]
pub struct StoreSize {
    /// Segments in the store.
    pub segments: usize,
    /// Their bytes.
    pub bytes: u64,
}

impl Scion {
    /// Every branch of `db`, in name order, with this host's checkout of each.
    pub fn branch_statuses(&self, db: &DbName) -> EngineResult<Vec<BranchStatus>> {
        self.branch_statuses_noting(
            db,
            self.engine.store_clock()?.as_system_time(),
            &mut Holders::default(),
        )
    }

    fn branch_statuses_noting(
        &self,
        db: &DbName,
        now: std::time::SystemTime,
        holders: &mut Holders,
    ) -> EngineResult<Vec<BranchStatus>> {
        let mut out = Vec::new();
        // One listing of the database's checkpoints, not one per branch (a LIST each on a
        // bucket: a thousand branches were a thousand round trips).
        let checkpoints = self.engine.count_checkpoints_by_branch(db)?;
        for (branch, r) in self.engine.list_branches(db)? {
            let count = checkpoints.get(&branch).copied().unwrap_or(0);
            let b = BranchRef::new(db.clone(), branch);
            holders.add(&b, &r, now);
            out.push(self.status_of(&b, &r, count, now)?);
        }
        Ok(out)
    }

    /// One branch's status (what `branch_statuses` lists, without looking at the others).
    pub fn branch_status(&self, b: &BranchRef) -> EngineResult<BranchStatus> {
        let (r, _) = self.engine.read_ref(b)?;
        let checkpoints = self.engine.count_checkpoints(b)?;
        self.status_of(
            b,
            &r,
            checkpoints,
            self.engine.store_clock()?.as_system_time(),
        )
    }

    fn status_of(
        &self,
        b: &BranchRef,
        r: &crate::refs::Ref,
        checkpoints: usize,
        now: std::time::SystemTime,
    ) -> EngineResult<BranchStatus> {
        let db = &b.db;
        // One damaged checkout must not hide every other branch.
        let (checkout, problem) = match self.checkout_state(b, &r.root) {
            Ok(state) => (state, None),
            Err(e) => (CheckoutState::Unknown, Some(e.to_string())),
        };
        Ok(BranchStatus {
            branch: b.branch.clone(),
            version: r.version,
            page_size: r.page_size,
            page_count: r.page_count,
            protected: r.protected,
            checkpoints,
            checkout,
            checked_out: r.checkouts.iter().map(|c| c.to_string()).collect(),
            parent: r.parent.as_ref().map(|p| match &p.checkpoint {
                Some(c) => format!("{}@{}@{}", db, p.branch, c),
                None => format!("{}@{} v{}", db, p.branch, p.version),
            }),
            forked_from: r.parent.clone(),
            created_at: r.created_at,
            touched_at: r.touched_at,
            ttl_secs: r.ttl_secs,
            ttl_left_secs: r.ttl_secs.map(|ttl| {
                let deadline = r
                    .touched_at
                    .saturating_add(std::time::Duration::from_secs(ttl))
                    .as_system_time();
                match deadline.duration_since(now) {
                    Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                    Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
                }
            }),
            lease: r.lease.as_ref().map(|l| LeaseStatus {
                holder: l.holder.clone(),
                expires: l.expires,
                live: is_live(l, now),
            }),
            safety: r.safety.as_ref().map(ToString::to_string),
            owner: r.owner(),
            ephemeral: r.is_ephemeral(),
            meta: crate::refs::user_meta(&r.meta),
            problem,
        })
    }

    /// Segments and their bytes, from one listing.
    pub(crate) fn store_size(&self) -> EngineResult<StoreSize> {
        let segments = self.engine.backend().list("segments/")?;
        Ok(StoreSize {
            segments: segments.len(),
            bytes: segments.iter().map(|m| m.size).sum(),
        })
    }

    /// The whole store: settings, space, every database and branch, and who holds what.
    pub fn status(&self) -> EngineResult<StatusReport> {
        let now = self.engine.store_clock()?.as_system_time();
        let mut holders = Holders::default();
        let mut databases = Vec::new();
        for db in self.engine.list_databases()? {
            databases.push(DatabaseStatus {
                db: db.clone(),
                branches: self.branch_statuses_noting(&db, now, &mut holders)?,
            });
        }
        Ok(StatusReport {
            store: self.engine.location().to_string(),
            store_id: self.engine.store_id().to_string(),
            checkouts: self.options.checkouts_dir.display().to_string(),
            clone_policy: self.options.clone_policy,
            clone_capability: probe_clone(&self.options.checkouts_dir)?,
            page_compression: self.engine.page_compression(),
            history_retention_secs: self.engine.history_retention()?.as_secs(),
            space: self.store_size()?,
            segment_cache: self
                .engine
                .backend()
                .local_cache()
                .map(|c| SegmentCacheStatus {
                    dir: c.dir.display().to_string(),
                    bytes: c.held_bytes,
                    limit_bytes: match c.limit {
                        scion_store::CacheLimit::Bytes(n) => Some(n),
                        scion_store::CacheLimit::Unbounded => None,
                    },
                }),
            databases,
            hosts: holders.0.into_values().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::status::holder_host;

    #[test]
    fn a_holder_names_its_host_and_a_session_its_id() {
        assert_eq!(
            holder_host("vm-7:1a2b3c4d:4026531836/4242"),
            ("vm-7".to_string(), None)
        );
        assert_eq!(
            holder_host("vm-7:1a2b3c4d:4026531836/4242#s-9f"),
            ("vm-7".to_string(), Some("s-9f".to_string()))
        );
        assert_eq!(holder_host("agent"), ("agent".to_string(), None));
        assert_eq!(holder_host("a:b"), ("a:b".to_string(), None));
    }
}
