//! The diff row of `scion bench fork`: a diff of two versions ten rows apart, with clean
//! checkouts of both sides, from the store alone, and beside the baseline a user would
//! reach for without scion (ATTACH both files, JOIN on the key).

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use scion_core::{Scion, Target};
use serde::Serialize;

use crate::stats::{measure, Summary};
use crate::{br, BenchResult, Progress};

#[derive(Debug, Clone, Serialize)]
pub struct DiffCost {
    pub size_mib: u64,
    pub pages_differing: usize,
    pub pages_read: u64,
    pub page_count: u32,
    pub rows_changed: usize,
    /// With clean checkouts of both sides present (read locally).
    pub time: Summary,
    /// With no usable checkout: every page from the store.
    pub time_store_only: Summary,
    /// The baseline: ATTACH the two checkouts and JOIN them on the key in SQLite.
    pub attach_join: Summary,
    /// `time` median over the baseline's (goal: <= 1).
    pub vs_attach_join: f64,
}

/// Fork `db@main` of `scion` (a generated `orders` database of `mib` MiB) as `diff`, change
/// ten rows spread over the table, checkpoint, and time the diff three ways.
pub(crate) fn diff_cost(
    scion: &Scion,
    mib: u64,
    runs: usize,
    progress: Progress<'_>,
) -> BenchResult<DiffCost> {
    progress(&format!("diff of two versions ten rows apart at {mib} MiB"));
    let main = br("db")?;
    scion
        .engine()
        .fork(&main, &"diff".parse()?, Default::default())?;
    let d = br("db@diff")?;
    let d_path = scion.checkout(&d, false)?.path;
    {
        let c = Connection::open(&d_path)?;
        let rows = c.query_row("SELECT max(id) FROM orders", [], |r| r.get::<_, i64>(0))?;
        for k in 0..10 {
            c.execute(
                "UPDATE orders SET status = 'audited' WHERE id = ?1",
                [1 + k * (rows / 10)],
            )?;
        }
    }
    scion.checkpoint(&d, &"audited".parse()?, Default::default())?;
    let (l, r): (Target, Target) = ("db".parse()?, "db@diff".parse()?);
    let main_path = scion.checkout(&main, false)?.path;
    let report = scion.diff(&l, &r, &Default::default())?;
    let time = measure(runs, |_| scion.diff(&l, &r, &Default::default()))?;
    // Without their records the checkouts prove nothing: every page comes from the store.
    let records = [&main_path, &d_path].map(|p| PathBuf::from(format!("{}.scion", p.display())));
    for rec in &records {
        std::fs::rename(rec, rec.with_extension("off"))?;
    }
    let time_store_only = measure(runs, |_| scion.diff(&l, &r, &Default::default()));
    for rec in &records {
        std::fs::rename(rec.with_extension("off"), rec)?;
    }
    let time_store_only = time_store_only?;
    let attach_join = measure(runs, |_| attach_join_diff(&main_path, &d_path))?;
    Ok(DiffCost {
        size_mib: mib,
        pages_differing: report.pages_differing,
        pages_read: report.pages_read,
        page_count: scion.engine().read_ref(&main)?.0.page_count,
        rows_changed: report.tables.iter().map(|t| t.changed).sum(),
        vs_attach_join: time.median_ms / attach_join.median_ms,
        time,
        time_store_only,
        attach_join,
    })
}

/// What a user would run without scion: both files attached to one connection, rows
/// matched on the key, every column compared, plus rows only one side has.
fn attach_join_diff(left: &Path, right: &Path) -> BenchResult<i64> {
    let c = Connection::open_with_flags(left, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    c.execute("ATTACH DATABASE ?1 AS r", [right.display().to_string()])?;
    let columns: Vec<String> = c
        .prepare("SELECT name FROM pragma_table_info('orders')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let differs = columns
        .iter()
        .map(|col| format!("a.\"{col}\" IS NOT b.\"{col}\""))
        .collect::<Vec<_>>()
        .join(" OR ");
    let sql = format!(
        "SELECT (SELECT count(*) FROM main.orders a JOIN r.orders b ON a.id = b.id WHERE {differs})
              + (SELECT count(*) FROM r.orders b WHERE b.id NOT IN (SELECT id FROM main.orders))
              + (SELECT count(*) FROM main.orders a WHERE a.id NOT IN (SELECT id FROM r.orders))"
    );
    Ok(c.query_row(&sql, [], |r| r.get(0))?)
}
