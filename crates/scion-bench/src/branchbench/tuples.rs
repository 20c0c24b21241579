//! The five BranchBench workflows and their parameter tuples (full and mini configs).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workflow {
    Simulation,
    DataCleaning,
    SoftwareDev,
    Mcts,
    FailureRepro,
}

impl Workflow {
    pub const ALL: [Workflow; 5] = [
        Workflow::Simulation,
        Workflow::DataCleaning,
        Workflow::SoftwareDev,
        Workflow::Mcts,
        Workflow::FailureRepro,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workflow::Simulation => "simulation",
            Workflow::DataCleaning => "data_cleaning",
            Workflow::SoftwareDev => "software_dev",
            Workflow::Mcts => "mcts",
            Workflow::FailureRepro => "failure_repro",
        }
    }

    /// The harness's hand estimate of bytes written per unit of M_d (its e2e JSON carries it).
    pub(crate) fn estimated_bytes_per_dml(self) -> u64 {
        match self {
            Workflow::SoftwareDev => 600_000,
            Workflow::DataCleaning => 300_000,
            Workflow::FailureRepro => 5_000,
            Workflow::Mcts => 16,
            Workflow::Simulation => 1_888,
        }
    }
}

impl fmt::Display for Workflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workflow {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Workflow::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                format!("unknown workflow {s:?} (simulation, data_cleaning, software_dev, mcts, failure_repro)")
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    Full,
    Mini,
    /// Mini tuples, tiny data, 4-way, 60 s cap, lockstep rounds: a smoke test for CI.
    Quick,
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(Profile::Full),
            "mini" => Ok(Profile::Mini),
            "quick" => Ok(Profile::Quick),
            _ => Err(format!("unknown profile {s:?} (full, mini, quick)")),
        }
    }
}

/// One workflow's parameters, named as in the BranchBench paper.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tuple {
    /// Workers (T).
    pub workers: usize,
    /// Steps per worker (S).
    pub steps: usize,
    /// Fanout limit of the root (F_r), over alive children.
    pub fanout_root: usize,
    /// Fanout limit of inner nodes (F_i); 0 means inner nodes never become parents.
    pub fanout_inner: usize,
    /// Depth limit (D): parents may sit at depth <= D under the harness rule.
    pub max_depth: usize,
    /// Cross-branch passes in total (C).
    pub cross_branch: usize,
    /// Prune probability (gamma).
    pub prune: f64,
    /// DDL statements per step, at most (M_s).
    pub max_ddl: usize,
    /// DML statements per step, at most (M_d).
    pub max_dml: usize,
    /// Eval queries per step, at most (Q_v).
    pub max_evals: usize,
}

/// `[T, S, F_r, F_i, D, C, M_s, M_d, Q_v]` and gamma, in the reference table's column order.
const fn t(n: [usize; 9], prune: f64) -> Tuple {
    Tuple {
        workers: n[0],
        steps: n[1],
        fanout_root: n[2],
        fanout_inner: n[3],
        max_depth: n[4],
        cross_branch: n[5],
        prune,
        max_ddl: n[6],
        max_dml: n[7],
        max_evals: n[8],
    }
}

impl Tuple {
    pub fn full(w: Workflow) -> Tuple {
        match w {
            Workflow::Simulation => t([1000, 1, 1000, 0, 1, 1, 0, 50, 1], 1.0),
            Workflow::DataCleaning => t([10, 20, 10, 3, 3, 2, 1, 1, 1], 0.0),
            Workflow::SoftwareDev => t([5, 20, 5, 3, 4, 1, 1, 1, 2], 0.1),
            Workflow::Mcts => t([10, 100, 10, 10, 25, 0, 0, 1, 1], 0.1),
            Workflow::FailureRepro => t([1, 10, 10, 0, 1, 0, 5, 45, 1], 1.0),
        }
    }

    /// The mini configs; software_dev uses M_s = 1 as in the published mini run.
    pub(crate) fn mini(w: Workflow) -> Tuple {
        match w {
            Workflow::Simulation => t([60, 1, 60, 0, 1, 1, 0, 50, 1], 1.0),
            Workflow::DataCleaning => t([3, 6, 3, 2, 3, 1, 1, 1, 1], 0.0),
            Workflow::SoftwareDev => t([2, 5, 3, 2, 3, 1, 1, 1, 2], 0.1),
            Workflow::Mcts => t([3, 8, 5, 3, 5, 0, 0, 1, 1], 0.1),
            Workflow::FailureRepro => t([1, 10, 10, 0, 1, 0, 5, 45, 1], 1.0),
        }
    }

    pub fn for_profile(w: Workflow, p: Profile) -> Tuple {
        match p {
            Profile::Full => Tuple::full(w),
            Profile::Mini | Profile::Quick => Tuple::mini(w),
        }
    }

    pub(crate) fn total_steps(&self) -> usize {
        self.workers * self.steps
    }

    /// Steps eligible for a cross-branch pass (the harness's schedule).
    pub(crate) fn is_cross_branch_step(&self, step: usize) -> bool {
        if self.cross_branch == 0 {
            return false;
        }
        if self.cross_branch >= self.steps {
            return true;
        }
        let interval = self.steps / self.cross_branch;
        (step + 1).is_multiple_of(interval)
    }

    /// The short form printed in reports, e.g. `T10 S20 F10/3 D3 C2 g0 Ms1 Md1 Qv1`.
    pub(crate) fn label(&self) -> String {
        format!(
            "T{} S{} F{}/{} D{} C{} g{} Ms{} Md{} Qv{}",
            self.workers,
            self.steps,
            self.fanout_root,
            self.fanout_inner,
            self.max_depth,
            self.cross_branch,
            self.prune,
            self.max_ddl,
            self.max_dml,
            self.max_evals
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_branch_schedule_matches_the_harness() {
        let steps = |w| {
            let t = Tuple::full(w);
            (0..t.steps)
                .filter(|s| t.is_cross_branch_step(*s))
                .collect::<Vec<_>>()
        };
        assert_eq!(steps(Workflow::DataCleaning), vec![9, 19]);
        assert_eq!(steps(Workflow::SoftwareDev), vec![19]);
        assert_eq!(steps(Workflow::Simulation), vec![0]);
        assert!(steps(Workflow::Mcts).is_empty());
        assert!(steps(Workflow::FailureRepro).is_empty());
    }
}
