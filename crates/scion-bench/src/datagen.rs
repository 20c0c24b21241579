//! Deterministic test databases: the same seed and size give the same bytes, from a
//! SplitMix64 stream (never a generator whose stream could change between versions).

use std::path::Path;

use rusqlite::Connection;

use crate::BenchResult;

pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Rows per MiB of the `orders` table below (measured; used to hit a target size).
const ROWS_PER_MIB: u64 = 8_500;

/// Write an application-like database of about `mib` MiB to `path`: an `orders` table with
/// names, e-mails, amounts, statuses and notes, 4 KiB pages, WAL folded in.
pub(crate) fn orders_db(path: &Path, mib: u64, seed: u64) -> BenchResult<u64> {
    let _ = std::fs::remove_file(path);
    let conn = Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;
         CREATE TABLE orders(id INTEGER PRIMARY KEY, customer TEXT, email TEXT, amount REAL, status TEXT, note TEXT);",
    )?;
    let rows = mib * ROWS_PER_MIB;
    let mut rng = SplitMix64(seed);
    let statuses = ["new", "paid", "shipped", "returned"];
    let tx = conn.unchecked_transaction()?;
    {
        let mut stmt = tx.prepare(
            "INSERT INTO orders(customer, email, amount, status, note) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for i in 0..rows {
            let c = rng.below(50_000);
            stmt.execute((
                format!("customer-{c}"),
                format!("user{c}@example.com"),
                rng.below(1_000_000) as f64 / 100.0,
                statuses[(i % 4) as usize],
                format!(
                    "order note {:016x} lorem ipsum dolor sit amet {}",
                    rng.next_u64(),
                    i % 977
                ),
            ))?;
        }
    }
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    drop(conn);
    Ok(std::fs::metadata(path)?.len())
}
