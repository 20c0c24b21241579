//! The row of `scion bench isolation` through the scion VFS: per test, fork, open the fork
//! through the VFS (nothing materialized), run the first query, close, destroy.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use scion_core::{BranchRef, ClonePolicy, Scion, ScionOptions};
use scion_store::LocalBackend;

use crate::isolation_phases::{MethodRow, PhaseTimer, FIRST_QUERY};
use crate::{BenchError, BenchResult};

pub(crate) const VFS_ROW: &str = "scion VFS (fork + open through the VFS)";

pub(crate) fn row(dir: &Path, seed: &Path, runs: usize, probe_id: i64) -> BenchResult<MethodRow> {
    scion_vfs::register().map_err(|rc| BenchError::Other(format!("registering the VFS: {rc}")))?;
    let dir = dir.join("scion-vfs");
    let store_dir = dir.join("store");
    let store = LocalBackend::open(&store_dir).map_err(|e| BenchError::Other(e.to_string()))?;
    let scion = Scion::init(
        std::sync::Arc::new(store),
        "isolation",
        ScionOptions::new(store_dir.join("checkouts"), ClonePolicy::Auto),
        Default::default(),
    )?;
    scion.engine().create(&"seed".parse()?, Some(seed))?;
    let main: BranchRef = "seed".parse()?;
    crate::stats::settle_disk();
    let mut timer = PhaseTimer::new(&["fork", "open + query + close", "destroy"]);
    timer.run(runs, |run, lap| {
        let test: BranchRef = format!("seed@test-{run}").parse()?;
        scion
            .engine()
            .fork(&main, &test.branch, Default::default())?;
        lap(0);
        let uri = scion_vfs::uri(&test.to_string(), &store_dir.display().to_string(), false);
        let conn = Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
        )?;
        let _: f64 = conn.query_row(&FIRST_QUERY.replace("$1", "?1"), [probe_id], |r| r.get(0))?;
        drop(conn);
        lap(1);
        scion.destroy(&test, false)?;
        lap(2);
        Ok(())
    })?;
    Ok(timer.row(VFS_ROW))
}
