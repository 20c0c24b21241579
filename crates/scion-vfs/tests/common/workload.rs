//! The random workloads the differential tests run: reproducible from a seed.

/// SplitMix64: the workloads are reproducible from their seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One transaction of a random workload: the statements, and whether it ends in COMMIT.
pub fn transaction(rng: &mut Rng, step: usize) -> (Vec<String>, bool) {
    let mut stmts = Vec::new();
    let t = format!("t{}", rng.below(3));
    stmts.push(format!(
        "CREATE TABLE IF NOT EXISTS {t}(id INTEGER PRIMARY KEY, k TEXT, v BLOB, n INTEGER)"
    ));
    for _ in 0..1 + rng.below(6) {
        let stmt = match rng.below(10) {
            0..=3 => {
                // Small rows, and sometimes a blob that spills onto overflow pages; the
                // same bytes on both sides (the RNG's, not SQLite's randomblob).
                let len = if rng.below(5) == 0 {
                    3000 + rng.below(70_000)
                } else {
                    rng.below(200)
                };
                let tag: String = (0..8).map(|_| format!("{:02x}", rng.below(256))).collect();
                format!(
                    "INSERT INTO {t}(k, v, n) VALUES ('k{}', X'{tag}' || CAST(printf('%.*c', {len}, char(65 + {})) AS BLOB), {})",
                    rng.below(1000),
                    rng.below(26),
                    rng.below(1_000_000)
                )
            }
            4 => format!(
                "INSERT INTO {t}(k, v, n) SELECT k || 'x', v, n + 1 FROM {t} LIMIT {}",
                1 + rng.below(20)
            ),
            5 | 6 => format!(
                "UPDATE {t} SET n = n + {}, k = k || 'u' WHERE id % {} = 0",
                rng.below(9),
                2 + rng.below(5)
            ),
            7 => format!("DELETE FROM {t} WHERE id % {} = 1", 2 + rng.below(6)),
            8 => format!("CREATE INDEX IF NOT EXISTS {t}_k ON {t}(k)"),
            _ => {
                format!("SAVEPOINT s{step}; DELETE FROM {t}; ROLLBACK TO s{step}; RELEASE s{step}")
            }
        };
        stmts.push(stmt);
    }
    (stmts, rng.below(6) != 0)
}
