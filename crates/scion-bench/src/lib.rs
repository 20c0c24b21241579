//! `scion bench`: measure scion's operations on data it generates itself, run each baseline
//! in the same run, and report medians, spreads and ratios. Store costs are counted (objects
//! and bytes), never guessed.

pub mod branchbench;
pub mod checkout_vs_cp;
pub mod datagen;
pub mod diffbench;
pub mod fork;
pub mod graph;
pub mod isolation;
mod isolation_phases;
pub mod isolation_python;
pub mod isolation_vfs;
pub mod live;
pub mod machine;
pub mod merge;
pub mod postgres;
pub mod pytest_suite;
pub mod refresh;
pub mod remote;
pub mod stats;
pub mod torture;
pub mod vfs;

/// Anything that stops a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Core(#[from] scion_core::CoreError),
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

impl From<scion_core::EngineError> for BenchError {
    fn from(e: scion_core::EngineError) -> Self {
        BenchError::Core(e.into())
    }
}

pub type BenchResult<T> = Result<T, BenchError>;

/// Where progress lines go (the CLI passes stderr); the library never prints.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// A branch named in a benchmark's own code, which is always valid.
pub(crate) fn br(s: &str) -> BenchResult<scion_core::BranchRef> {
    Ok(s.parse()?)
}

/// A name that is not one, as the engine reports it.
impl From<scion_core::names::NameError> for BenchError {
    fn from(e: scion_core::names::NameError) -> Self {
        BenchError::Core(scion_core::CoreError::Engine(e.into()))
    }
}
