//! What a BranchBench run is asked to do: its workflows, profile, rules and deviations.

use std::path::PathBuf;
use std::time::Duration;

use super::seed::Scale;
use super::sql::SqlVariant;
use super::tree::{DepthRule, ParentRule};
use super::tuples::{Profile, Tuple, Workflow};

/// The database every workflow's store holds.
pub(crate) const DB: &str = "bb";

#[derive(Debug, Clone)]
pub struct BranchbenchOptions {
    pub workflows: Vec<Workflow>,
    pub profile: Profile,
    pub scale: Scale,
    /// Steps running at once; None = all T workers (the harness).
    pub concurrency: Option<usize>,
    pub max_runtime: Option<Duration>,
    pub rng_seed: u64,
    pub data_seed: u64,
    pub parent_rule: ParentRule,
    pub depth_rule: DepthRule,
    pub sql: SqlVariant,
    pub live_cap: Option<(usize, Duration)>,
    pub deterministic: bool,
    pub dir: PathBuf,
    pub keep: bool,
    /// Remove a step's checkout once it is published instead of keeping it until its
    /// branch is destroyed (the harness's behaviour).
    pub drop_checkouts: bool,
    pub gc_after: bool,
    /// Runs per workflow; the report shows the run with the median wall time.
    pub runs: usize,
    pub out: Option<PathBuf>,
    /// How steps reach their branches.
    pub connect: Connect,
}

/// How a step reaches its branch (`--connect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Connect {
    /// A checkout file opened by SQLite; publishing checkpoints it.
    #[default]
    Checkout,
    /// The branch opened through the scion VFS.
    Vfs,
    /// No scion at all: a fork is a plain copy of its parent's file on tmpfs, a destroy
    /// removes it. What the workflow's queries alone cost: the baseline the other two
    /// are measured against.
    Copy,
}

impl Connect {
    pub fn name(self) -> &'static str {
        match self {
            Connect::Checkout => "checkout",
            Connect::Vfs => "vfs",
            Connect::Copy => "copy",
        }
    }
}

impl BranchbenchOptions {
    /// The defaults of a profile: full and mini run harness-faithful (T-way, 2 h cap);
    /// quick runs the mini tuples on tiny data, 4-way, in lockstep, capped at 60 s.
    pub fn for_profile(profile: Profile, dir: PathBuf) -> Self {
        let quick = profile == Profile::Quick;
        BranchbenchOptions {
            workflows: Workflow::ALL.to_vec(),
            profile,
            scale: if quick { Scale::Tiny } else { Scale::Small },
            concurrency: if quick { Some(4) } else { None },
            max_runtime: Some(Duration::from_secs(if quick { 60 } else { 7200 })),
            rng_seed: 42,
            data_seed: 1,
            parent_rule: ParentRule::Uniform,
            depth_rule: DepthRule::Harness,
            sql: SqlVariant::Published,
            live_cap: None,
            deterministic: quick,
            dir,
            keep: false,
            drop_checkouts: false,
            gc_after: true,
            runs: 1,
            out: None,
            connect: Connect::Checkout,
        }
    }

    pub(crate) fn tuple(&self, w: Workflow) -> Tuple {
        let mut t = Tuple::for_profile(w, self.profile);
        if self.profile == Profile::Quick && w == Workflow::Simulation {
            // 60 simultaneous workers are more than a smoke test needs; 16 keep its shape.
            t.workers = 16;
            t.fanout_root = 16;
        }
        if self.sql == SqlVariant::Head && w == Workflow::SoftwareDev {
            // HEAD's DDL list has two statements and its backfill needs both; its full
            // config's M_s = 1 fails every step, so the HEAD variant runs with M_s = 2.
            t.max_ddl = t.max_ddl.max(2);
        }
        t
    }

    /// Flags that differ from the harness's behaviour, for the header.
    pub(crate) fn deviations(&self) -> Vec<String> {
        let mut d = Vec::new();
        if self.connect == Connect::Copy {
            d.push("baseline without scion: a fork is a plain copy of its parent's file on tmpfs, publishing is closing it, a destroy removes it".into());
        }
        if self.connect == Connect::Vfs {
            d.push("connect through the scion VFS: no checkout file; a step is one transaction, published by its commit and a checkpoint naming the head".into());
        }
        if self.drop_checkouts && self.connect == Connect::Checkout {
            d.push("each step's checkout removed once published (the harness keeps it until its branch is destroyed)".into());
        }
        if self.parent_rule != ParentRule::Uniform {
            d.push("parent rule: sticky (offshoot's), root fallback".into());
        }
        if self.depth_rule != DepthRule::Harness {
            d.push("depth rule: strict (nodes never below D)".into());
        }
        if self.sql != SqlVariant::Published {
            d.push("SQL: harness HEAD variant (software_dev M_s forced to 2)".into());
        }
        if let Some((cap, t)) = self.live_cap {
            d.push(format!("live cap {cap}, slot timeout {}s", t.as_secs()));
        }
        if self.deterministic {
            d.push("lockstep rounds (deterministic trees)".into());
        }
        if let Some(c) = self.concurrency {
            d.push(format!("concurrency {c} instead of T"));
        }
        if self.profile == Profile::Quick {
            d.push("simulation scaled to T=16, F_r=16".into());
        }
        d
    }
}
