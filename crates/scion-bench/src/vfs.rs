//! `scion bench vfs`: what the scion VFS costs against the same database as a plain file.
//! Per size: fork + open + first query + close through the VFS beside a file copy and the
//! same open; a one-row commit (time, and bytes and requests counted at the store); point
//! lookups (each its own autocommit statement) and full scans, cold and warm, through the
//! VFS and on the file opened natively; and the scan again on a fragmented branch (after
//! many one-row commits scattered its pages across segments).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use scion_core::attach::StoreSpec;
use scion_core::{BranchRef, ClonePolicy, Scion, ScionOptions};
use scion_store::{CountingBackend, LocalBackend};
use serde::Serialize;

use crate::datagen::orders_db;
use crate::isolation_phases::FIRST_QUERY;
use crate::machine::{describe, Machine};
use crate::stats::Summary;
use crate::{BenchError, BenchResult, Progress};

#[derive(Debug, Clone)]
pub struct VfsOptions {
    pub dir: PathBuf,
    pub sizes_mib: Vec<u64>,
    pub runs: usize,
    pub lookups: usize,
    /// One-row commits made before the fragmented scan.
    pub scatter_commits: usize,
}

impl VfsOptions {
    pub fn full(dir: PathBuf) -> Self {
        VfsOptions {
            dir,
            sizes_mib: vec![10, 100, 1024],
            runs: 7,
            lookups: 20_000,
            scatter_commits: 1000,
        }
    }
    pub fn quick(dir: PathBuf) -> Self {
        VfsOptions {
            dir,
            sizes_mib: vec![2],
            runs: 3,
            lookups: 2_000,
            scatter_commits: 50,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Paired {
    pub vfs: Summary,
    pub native: Summary,
    /// VFS median over native median.
    pub ratio: f64,
}

impl Paired {
    fn of(vfs: &[Duration], native: &[Duration]) -> Paired {
        let (vfs, native) = (Summary::of(vfs), Summary::of(native));
        Paired {
            ratio: vfs.median_ms / native.median_ms,
            vfs,
            native,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct VfsAtSize {
    pub size_mib: u64,
    pub sqlite_bytes: u64,
    /// Fork + open + first query + close through the VFS; native = copy the file + the same.
    pub fork_open_query: Paired,
    pub commit_one_row: Summary,
    /// Per commit, counted at the store.
    pub commit_bytes_written: u64,
    pub commit_puts: u64,
    /// `lookups` point lookups, each its own autocommit statement, on one connection, with
    /// both sides warm from the scans before them.
    pub lookups: Paired,
    pub lookup_count: usize,
    /// Whether the OS page cache could be dropped before the cold scans.
    pub cold: bool,
    pub scan_cold: Paired,
    pub scan_warm: Paired,
    /// A scan on a new connection while the process's page cache holds the pages (as for
    /// the next test's fork of a seed); natively, a new connection with the OS cache warm.
    pub scan_new_connection: Paired,
    /// The process's page cache over this size's run: hits, decodes, and the bytes it held
    /// at the end against its bound.
    pub page_cache_hits: u64,
    pub page_cache_decodes: u64,
    pub page_cache_bytes: u64,
    pub page_cache_capacity_bytes: u64,
    /// The cold scan through the VFS again after `scatter_commits` one-row commits.
    pub scan_cold_fragmented: Summary,
    /// Store reads (ranged gets) of one cold scan: of the seed, of the fragmented branch,
    /// and of that branch after `compact --scattered`.
    pub scan_cold_reads: u64,
    /// The cold scan of a table whose leaves lie out of page order (an eighth of the rows),
    /// and its store reads through the VFS.
    pub scan_cold_shuffled: Paired,
    pub scan_cold_shuffled_reads: u64,
    pub scan_cold_fragmented_reads: u64,
    pub scan_cold_compacted_reads: u64,
    /// The cold scan after `compact --scattered` of the fragmented branch.
    pub scan_cold_compacted: Summary,
    pub compact_pages_rewritten: u32,
    pub compact_bytes_written: u64,
    pub scatter_commits: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct VfsReport {
    pub machine: Machine,
    pub runs: usize,
    pub sizes: Vec<VfsAtSize>,
}

const SCAN: &str = "SELECT count(*), sum(length(note)), sum(amount) FROM orders";
/// A scan of the table whose leaves lie out of page order.
const SHUFFLED_SCAN: &str = "SELECT count(*), sum(length(note)), sum(amount) FROM shuffled";

/// Drop the OS page cache (root only) and the process's cache of decoded pages: what makes
/// a scan cold.
fn drop_page_cache() -> bool {
    scion_core::PageCache::process().clear();
    crate::stats::settle_disk();
    std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok()
}

fn timed(mut f: impl FnMut() -> BenchResult<()>) -> BenchResult<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

fn open_vfs(target: &str, store: &Path) -> BenchResult<Connection> {
    let uri = scion_vfs::uri(target, &store.display().to_string(), false);
    Ok(Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI,
    )?)
}

fn lookups(conn: &Connection, rows: i64, n: usize) -> BenchResult<Duration> {
    let mut st = conn.prepare(&FIRST_QUERY.replace("$1", "?1"))?;
    timed(|| {
        let mut id = 1i64;
        for _ in 0..n {
            id = (id * 48271) % rows.max(2) + 1;
            let _: f64 = st.query_row([id], |r| r.get(0))?;
        }
        Ok(())
    })
}

fn scan(conn: &Connection) -> BenchResult<Duration> {
    timed_query(conn, SCAN)
}

fn timed_query(conn: &Connection, sql: &str) -> BenchResult<Duration> {
    timed(|| {
        conn.query_row(sql, [], |r| r.get::<_, i64>(0))?;
        Ok(())
    })
}

pub fn run(opts: &VfsOptions, progress: Progress<'_>) -> BenchResult<VfsReport> {
    scion_vfs::register().map_err(|rc| BenchError::Other(format!("registering the VFS: {rc}")))?;
    std::fs::create_dir_all(&opts.dir)?;
    let machine = describe(&opts.dir);
    let mut sizes = Vec::new();
    for &mib in &opts.sizes_mib {
        let cache_before = scion_core::PageCache::process().stats();
        let dir = opts.dir.join(format!("vfs-{mib}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        progress(&format!("seeding a {mib} MiB database"));
        let native = dir.join("native.db");
        orders_db(&native, mib, 1)?;
        // An eighth of the rows again, inserted in scrambled key order: page splits leave
        // this table's leaves out of page order, as random inserts do, so only readahead
        // along the b-tree finds what a scan reads next.
        Connection::open(&native)?.execute_batch(
            "PRAGMA journal_mode=DELETE;
             CREATE TABLE shuffled(id INTEGER PRIMARY KEY, note TEXT, amount REAL);
             INSERT INTO shuffled SELECT id, note, amount FROM orders WHERE id % 8 = 0
               ORDER BY (id * 2654435761) % 4294967296;",
        )?;
        let sqlite_bytes = std::fs::metadata(&native)?.len();
        let rows: i64 =
            Connection::open(&native)?.query_row("SELECT max(id) FROM orders", [], |r| r.get(0))?;
        let store_dir = dir.join("store");
        let counter = Arc::new(CountingBackend::new(Arc::new(
            LocalBackend::open(&store_dir).map_err(|e| BenchError::Other(e.to_string()))?,
        )));
        let scion = Arc::new(Scion::init(
            counter.clone(),
            "bench-vfs",
            ScionOptions::new(store_dir.join("checkouts"), ClonePolicy::Auto),
            Default::default(),
        )?);
        // Connections the VFS opens use this very attachment: its requests are counted.
        let location = StoreSpec::parse(&store_dir.display().to_string())?.location();
        scion_vfs::adopt(&location, scion.engine().clone());
        scion.engine().create(&"seed".parse()?, Some(&native))?;
        let main: BranchRef = "seed".parse()?;

        progress(&format!(
            "{mib} MiB: fork + open + first query, through the VFS and by copy"
        ));
        let (mut vfs_open, mut copy_open) = (Vec::new(), Vec::new());
        for run in 0..=opts.runs {
            let test: BranchRef = format!("seed@t{run}").parse()?;
            let t = timed(|| {
                scion
                    .engine()
                    .fork(&main, &test.branch, Default::default())?;
                let c = open_vfs(&test.to_string(), &store_dir)?;
                let _: f64 =
                    c.query_row(&FIRST_QUERY.replace("$1", "?1"), [rows / 2], |r| r.get(0))?;
                Ok(())
            })?;
            let copy = dir.join(format!("copy-{run}.db"));
            let c = timed(|| {
                std::fs::copy(&native, &copy)?;
                let conn = Connection::open(&copy)?;
                let _: f64 =
                    conn.query_row(&FIRST_QUERY.replace("$1", "?1"), [rows / 2], |r| r.get(0))?;
                Ok(())
            })?;
            let _ = std::fs::remove_file(&copy);
            if run > 0 {
                vfs_open.push(t);
                copy_open.push(c);
            }
        }

        progress(&format!("{mib} MiB: one-row commits"));
        let writer = open_vfs("seed@t0", &store_dir)?;
        let mut commits = Vec::new();
        let before = counter.counts();
        for run in 0..=opts.runs {
            let t = timed(|| {
                writer.execute(
                    "UPDATE orders SET amount = amount + 1 WHERE id = ?1",
                    [1 + run as i64 * 7919 % rows],
                )?;
                Ok(())
            })?;
            if run > 0 {
                commits.push(t);
            }
        }
        let after = counter.counts();
        let n = (opts.runs + 1) as u64;
        let commit_bytes_written = (after.bytes_written - before.bytes_written) / n;
        let commit_puts = (after.puts - before.puts) / n;

        progress(&format!("{mib} MiB: lookups and scans"));
        let vfs_conn = open_vfs("seed@main", &store_dir)?;
        let native_conn = Connection::open(&native)?;
        let (mut lv, mut ln) = (Vec::new(), Vec::new());
        let (mut cv, mut cn, mut wv, mut wn) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut fv, mut fn_) = (Vec::new(), Vec::new());
        let mut cold = true;
        let mut scan_cold_reads = 0;
        let (mut sv, mut sn, mut shuffled_reads) = (Vec::new(), Vec::new(), 0);
        for _ in 0..opts.runs.max(3) {
            // Fresh connections: SQLite's own page cache starts empty too.
            // The native cold scan first: the VFS's cold scan then leaves the process's
            // page cache as its scan filled it, for the warm scans that follow.
            cold &= drop_page_cache();
            cn.push(scan(&Connection::open(&native)?)?);
            cold &= drop_page_cache();
            let reads_before = counter.counts().ranged_gets;
            cv.push(scan(&open_vfs("seed@main", &store_dir)?)?);
            scan_cold_reads = counter.counts().ranged_gets - reads_before;
            wv.push(scan(&vfs_conn)?);
            wn.push(scan(&native_conn)?);
            fv.push(scan(&open_vfs("seed@main", &store_dir)?)?);
            fn_.push(scan(&Connection::open(&native)?)?);
            // Lookups with both sides warm from the scans: the process's page cache (as far
            // as its bound holds the table) and the OS cache holding the native file.
            lv.push(lookups(&vfs_conn, rows, opts.lookups)?);
            ln.push(lookups(&native_conn, rows, opts.lookups)?);
            drop_page_cache();
            sn.push(timed_query(&Connection::open(&native)?, SHUFFLED_SCAN)?);
            drop_page_cache();
            let before = counter.counts().ranged_gets;
            sv.push(timed_query(
                &open_vfs("seed@main", &store_dir)?,
                SHUFFLED_SCAN,
            )?);
            shuffled_reads = counter.counts().ranged_gets - before;
        }

        progress(&format!(
            "{mib} MiB: {} scattered commits, then a cold scan",
            opts.scatter_commits
        ));
        for i in 0..opts.scatter_commits as i64 {
            writer.execute(
                "UPDATE orders SET amount = amount + 1 WHERE id = ?1",
                [1 + (i * 104_729) % rows],
            )?;
        }
        drop(writer);
        // Each cold scan of a branch: its median time and one scan's store reads.
        let cold_scans = |target: &str| -> BenchResult<(Vec<Duration>, u64)> {
            let (mut times, mut reads) = (Vec::new(), 0);
            for _ in 0..opts.runs.max(3) {
                drop_page_cache();
                let before = counter.counts().ranged_gets;
                times.push(scan(&open_vfs(target, &store_dir)?)?);
                reads = counter.counts().ranged_gets - before;
            }
            Ok((times, reads))
        };
        let (frag, frag_reads) = cold_scans("seed@t0")?;
        progress(&format!("{mib} MiB: compact --scattered, then a cold scan"));
        let compacted = scion.compact_scope(
            &"seed@t0".parse()?,
            false,
            scion_core::ops::compact::CompactScope::Scattered,
        )?;
        let (comp, comp_reads) = cold_scans("seed@t0")?;
        let _ = std::fs::remove_dir_all(&dir);
        let cache_after = scion_core::PageCache::process().stats();
        sizes.push(VfsAtSize {
            size_mib: mib,
            sqlite_bytes,
            fork_open_query: Paired::of(&vfs_open, &copy_open),
            commit_one_row: Summary::of(&commits),
            commit_bytes_written,
            commit_puts,
            lookups: Paired::of(&lv, &ln),
            lookup_count: opts.lookups,
            cold,
            scan_cold: Paired::of(&cv, &cn),
            scan_warm: Paired::of(&wv, &wn),
            scan_new_connection: Paired::of(&fv, &fn_),
            page_cache_hits: cache_after.hits - cache_before.hits,
            page_cache_decodes: cache_after.decodes - cache_before.decodes,
            page_cache_bytes: cache_after.used_bytes,
            page_cache_capacity_bytes: cache_after.capacity_bytes,
            scan_cold_fragmented: Summary::of(&frag),
            scan_cold_reads,
            scan_cold_shuffled: Paired::of(&sv, &sn),
            scan_cold_shuffled_reads: shuffled_reads,
            scan_cold_fragmented_reads: frag_reads,
            scan_cold_compacted_reads: comp_reads,
            scan_cold_compacted: Summary::of(&comp),
            compact_pages_rewritten: compacted.pages_rewritten,
            compact_bytes_written: compacted.store_bytes_written,
            scatter_commits: opts.scatter_commits,
        });
    }
    Ok(VfsReport {
        machine,
        runs: opts.runs,
        sizes,
    })
}

impl VfsReport {
    pub fn render(&self) -> String {
        let mut s = format!(
            "{}\nmedians of {} runs after a warm-up (ms)\n",
            self.machine.line(),
            self.runs
        );
        let pair = |name: &str, p: &Paired| {
            format!(
                "  {name:<44} {:>10.3} {:>10.3} {:>7.2}x\n",
                p.vfs.median_ms, p.native.median_ms, p.ratio
            )
        };
        for z in &self.sizes {
            s += &format!("\n{} MiB ({} B)\n", z.size_mib, z.sqlite_bytes);
            s += &format!(
                "  {:<44} {:>10} {:>10} {:>8}\n",
                "", "VFS", "native", "ratio"
            );
            s += &pair(
                "fork + open + first query (native: cp + open)",
                &z.fork_open_query,
            );
            s += &pair(
                &format!("{} point lookups (both sides warm)", z.lookup_count),
                &z.lookups,
            );
            let cold = if z.cold {
                "cold scan"
            } else {
                "scan (page cache NOT dropped)"
            };
            s += &pair(cold, &z.scan_cold);
            let native_cold = z.scan_cold.native.median_ms;
            s += &pair("warm scan", &z.scan_warm);
            s += &pair(
                "cold scan, leaves out of page order (1/8 rows)",
                &z.scan_cold_shuffled,
            );
            s += &pair(
                "scan, new connection (pages cached; native: OS cache)",
                &z.scan_new_connection,
            );
            let against_native = |ms: f64| {
                format!(
                    "{ms:>10.3} {native_cold:>10.3} {:>7.2}x",
                    ms / native_cold.max(f64::MIN_POSITIVE)
                )
            };
            s += &format!(
                "  {:<44} {}\n",
                format!("cold scan after {} one-row commits", z.scatter_commits),
                against_native(z.scan_cold_fragmented.median_ms)
            );
            s += &format!(
                "  {:<44} {}\n",
                "  the same after compact --scattered",
                against_native(z.scan_cold_compacted.median_ms)
            );
            s += &format!(
                "  store reads per cold scan: {} of the seed, {} out of page order, {} fragmented, {} compacted ({} pages rewritten, {} B written)\n",
                z.scan_cold_reads,
                z.scan_cold_shuffled_reads,
                z.scan_cold_fragmented_reads,
                z.scan_cold_compacted_reads,
                z.compact_pages_rewritten,
                z.compact_bytes_written
            );
            s += &format!(
                "  one-row commit: {:.3} ms, {} B written in {} puts\n",
                z.commit_one_row.median_ms, z.commit_bytes_written, z.commit_puts
            );
            s += &format!(
                "  page cache: {} hits, {} decodes; {:.1} of {:.0} MiB held at the end\n",
                z.page_cache_hits,
                z.page_cache_decodes,
                z.page_cache_bytes as f64 / 1048576.0,
                z.page_cache_capacity_bytes as f64 / 1048576.0
            );
        }
        s
    }
}
