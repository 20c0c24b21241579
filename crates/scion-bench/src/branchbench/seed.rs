//! The CH-benCHmark seed database, generated deterministically: the same scale and data seed
//! give the same bytes (checked by hashing two builds). Each table draws from its own
//! SplitMix64 stream derived from (data seed, table name), so changing one table never shifts
//! another; timestamps are fixed; rows go in primary-key order in one transaction; VACUUM last.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use rusqlite::{params, Connection};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::datagen::SplitMix64;
use crate::BenchResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// The harness's committed seed: FK parent rows only, no orders.
    Tiny,
    /// Tiny plus an order history (10,000 orders, about 100,000 order lines).
    Small,
    /// TPC-C cardinalities for this many warehouses.
    Warehouses(u32),
}

impl FromStr for Scale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tiny" => Ok(Scale::Tiny),
            "small" => Ok(Scale::Small),
            n => match n.parse::<u32>() {
                Ok(w) if w >= 1 => Ok(Scale::Warehouses(w)),
                _ => Err(format!(
                    "unknown scale {s:?} (tiny, small, or a warehouse count >= 1)"
                )),
            },
        }
    }
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scale::Tiny => f.write_str("tiny"),
            Scale::Small => f.write_str("small"),
            Scale::Warehouses(w) => write!(f, "w{w}"),
        }
    }
}

/// The sizes the workflows' SQL draws its literals from.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    pub warehouses: u32,
    pub items: u32,
    pub customers_per_district: u32,
}

impl Scale {
    pub fn shape(self) -> Shape {
        match self {
            Scale::Tiny | Scale::Small => Shape {
                warehouses: 10,
                items: 1_000,
                customers_per_district: 100,
            },
            Scale::Warehouses(w) => Shape {
                warehouses: w,
                items: 100_000,
                customers_per_district: 3_000,
            },
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SeedInfo {
    pub scale: String,
    pub bytes: u64,
    pub sha256: String,
    pub rows: Vec<(String, u64)>,
}

pub(crate) const SCHEMA: &str = "
CREATE TABLE region(r_regionkey INTEGER PRIMARY KEY, r_name TEXT NOT NULL, r_comment TEXT);
CREATE TABLE nation(n_nationkey INTEGER PRIMARY KEY, n_name TEXT NOT NULL,
  n_regionkey INTEGER NOT NULL REFERENCES region(r_regionkey) ON DELETE CASCADE, n_comment TEXT);
CREATE TABLE supplier(su_suppkey INTEGER PRIMARY KEY, su_name TEXT, su_address TEXT,
  su_nationkey INTEGER NOT NULL REFERENCES nation(n_nationkey) ON DELETE CASCADE,
  su_phone TEXT, su_acctbal DECIMAL(12,2), su_comment TEXT);
CREATE TABLE warehouse(w_id INTEGER PRIMARY KEY, w_name TEXT, w_street_1 TEXT, w_street_2 TEXT,
  w_city TEXT, w_state TEXT, w_zip TEXT, w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2));
CREATE TABLE district(d_id INTEGER NOT NULL, d_w_id INTEGER NOT NULL
  REFERENCES warehouse(w_id) ON DELETE CASCADE, d_name TEXT, d_street_1 TEXT, d_street_2 TEXT,
  d_city TEXT, d_state TEXT, d_zip TEXT, d_tax DECIMAL(4,4), d_ytd DECIMAL(12,2),
  d_next_o_id INTEGER, PRIMARY KEY(d_w_id, d_id));
CREATE TABLE customer(c_id INTEGER NOT NULL, c_d_id INTEGER NOT NULL, c_w_id INTEGER NOT NULL,
  c_first TEXT, c_middle TEXT, c_last TEXT, c_street_1 TEXT, c_street_2 TEXT, c_city TEXT,
  c_state TEXT, c_zip TEXT, c_phone TEXT, c_since TEXT, c_credit TEXT,
  c_credit_lim DECIMAL(12,2), c_discount DECIMAL(4,4), c_balance DECIMAL(12,2),
  c_ytd_payment DECIMAL(12,2), c_payment_cnt INTEGER, c_delivery_cnt INTEGER, c_data TEXT,
  c_n_nationkey INTEGER REFERENCES nation(n_nationkey) ON DELETE CASCADE,
  PRIMARY KEY(c_w_id, c_d_id, c_id),
  FOREIGN KEY(c_w_id, c_d_id) REFERENCES district(d_w_id, d_id) ON DELETE CASCADE);
CREATE TABLE history(h_c_id INTEGER, h_c_d_id INTEGER, h_c_w_id INTEGER, h_d_id INTEGER,
  h_w_id INTEGER, h_date TEXT, h_amount DECIMAL(6,2), h_data TEXT,
  FOREIGN KEY(h_c_w_id, h_c_d_id, h_c_id) REFERENCES customer(c_w_id, c_d_id, c_id) ON DELETE CASCADE,
  FOREIGN KEY(h_w_id, h_d_id) REFERENCES district(d_w_id, d_id) ON DELETE CASCADE);
CREATE TABLE item(i_id INTEGER PRIMARY KEY, i_im_id INTEGER, i_name TEXT, i_price DECIMAL(5,2),
  i_data TEXT);
CREATE TABLE stock(s_i_id INTEGER NOT NULL REFERENCES item(i_id) ON DELETE CASCADE,
  s_w_id INTEGER NOT NULL REFERENCES warehouse(w_id) ON DELETE CASCADE, s_quantity INTEGER,
  s_dist_01 TEXT, s_dist_02 TEXT, s_dist_03 TEXT, s_dist_04 TEXT, s_dist_05 TEXT,
  s_dist_06 TEXT, s_dist_07 TEXT, s_dist_08 TEXT, s_dist_09 TEXT, s_dist_10 TEXT,
  s_ytd INTEGER, s_order_cnt INTEGER, s_remote_cnt INTEGER, s_data TEXT, s_su_suppkey INTEGER,
  PRIMARY KEY(s_w_id, s_i_id));
CREATE TABLE orders(o_id INTEGER NOT NULL, o_d_id INTEGER NOT NULL, o_w_id INTEGER NOT NULL,
  o_c_id INTEGER, o_entry_d TEXT, o_carrier_id INTEGER, o_ol_cnt INTEGER, o_all_local INTEGER,
  PRIMARY KEY(o_w_id, o_d_id, o_id),
  FOREIGN KEY(o_w_id, o_d_id, o_c_id) REFERENCES customer(c_w_id, c_d_id, c_id) ON DELETE CASCADE);
CREATE TABLE new_order(no_o_id INTEGER NOT NULL, no_d_id INTEGER NOT NULL, no_w_id INTEGER NOT NULL,
  PRIMARY KEY(no_w_id, no_d_id, no_o_id),
  FOREIGN KEY(no_w_id, no_d_id, no_o_id) REFERENCES orders(o_w_id, o_d_id, o_id) ON DELETE CASCADE);
CREATE TABLE order_line(ol_o_id INTEGER NOT NULL, ol_d_id INTEGER NOT NULL, ol_w_id INTEGER NOT NULL,
  ol_number INTEGER NOT NULL, ol_i_id INTEGER, ol_supply_w_id INTEGER, ol_delivery_d TEXT,
  ol_quantity INTEGER, ol_amount DECIMAL(6,2), ol_dist_info TEXT,
  PRIMARY KEY(ol_w_id, ol_d_id, ol_o_id, ol_number),
  FOREIGN KEY(ol_w_id, ol_d_id, ol_o_id) REFERENCES orders(o_w_id, o_d_id, o_id) ON DELETE CASCADE,
  FOREIGN KEY(ol_supply_w_id, ol_i_id) REFERENCES stock(s_w_id, s_i_id) ON DELETE CASCADE);
";

/// Every timestamp in the seed.
const EPOCH: &str = "2025-01-01 00:00:00";
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz";

/// A per-table stream: FNV-1a of the table name mixed into the data seed.
fn stream(data_seed: u64, table: &str) -> SplitMix64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in table.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    SplitMix64(data_seed ^ h)
}

impl SplitMix64 {
    /// Uniform in `lo..=hi` (an i64: what SQLite stores).
    pub fn range(&mut self, lo: u64, hi: u64) -> i64 {
        (lo + self.below(hi - lo + 1)) as i64
    }
    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn text(&mut self, lo: u64, hi: u64) -> String {
        let n = self.range(lo, hi);
        (0..n)
            .map(|_| LETTERS[self.below(26) as usize] as char)
            .collect()
    }
    pub(crate) fn digits(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| (b'0' + self.below(10) as u8) as char)
            .collect()
    }
}

fn cents(rng: &mut SplitMix64, lo: u64, hi: u64) -> f64 {
    rng.range(lo, hi) as f64 / 100.0
}

/// Build the seed for `scale` at `path` (replacing it) and describe it.
pub fn build(path: &Path, scale: Scale, data_seed: u64) -> BenchResult<SeedInfo> {
    let _ = std::fs::remove_file(path);
    let conn = Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA page_size=4096; PRAGMA journal_mode=DELETE; PRAGMA foreign_keys=OFF;",
    )?;
    conn.execute_batch(SCHEMA)?;
    let tx = conn.unchecked_transaction()?;
    let shape = scale.shape();
    let tpcc = matches!(scale, Scale::Warehouses(_));
    fixed_tables(&tx, data_seed, tpcc)?;
    warehouses_and_districts(&tx, data_seed, shape)?;
    customers(&tx, data_seed, shape, tpcc)?;
    items_and_stock(&tx, data_seed, shape, tpcc)?;
    if scale != Scale::Tiny {
        orders(&tx, data_seed, shape, tpcc)?;
    }
    tx.commit()?;
    conn.execute_batch("VACUUM;")?;
    let mut rows = Vec::new();
    for table in [
        "region",
        "nation",
        "supplier",
        "warehouse",
        "district",
        "customer",
        "history",
        "item",
        "stock",
        "orders",
        "new_order",
        "order_line",
    ] {
        let n: i64 = conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
        rows.push((table.to_string(), n as u64));
    }
    drop(conn);
    let bytes = std::fs::read(path)?;
    let sha256 = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(SeedInfo {
        scale: scale.to_string(),
        bytes: bytes.len() as u64,
        sha256,
        rows,
    })
}

fn fixed_tables(c: &Connection, seed: u64, tpcc: bool) -> BenchResult<()> {
    let regions = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];
    for (i, r) in regions.iter().enumerate() {
        c.execute(
            "INSERT INTO region VALUES (?1, ?2, ?3)",
            params![i as i64, r, "region"],
        )?;
    }
    let mut rng = stream(seed, "nation");
    let nations: Vec<(i64, String, i64)> = if tpcc {
        (0..62)
            .map(|i| (i, format!("NATION {i:02}"), i % 5))
            .collect()
    } else {
        ["ALGERIA", "ARGENTINA", "CHINA", "FRANCE", "IRAN"]
            .iter()
            .enumerate()
            .map(|(i, n)| (i as i64, n.to_string(), i as i64))
            .collect()
    };
    for (k, name, region) in &nations {
        c.execute(
            "INSERT INTO nation VALUES (?1, ?2, ?3, ?4)",
            params![k, name, region, rng.text(20, 40)],
        )?;
    }
    let suppliers = if tpcc { 10_000 } else { 1 };
    let mut rng = stream(seed, "supplier");
    let mut stmt = c.prepare("INSERT INTO supplier VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?;
    for k in 1..=suppliers {
        stmt.execute(params![
            k,
            format!("Supplier#{k:09}"),
            rng.text(10, 40),
            (k - 1) % nations.len() as i64,
            rng.digits(10),
            cents(&mut rng, 0, 1_000_000),
            rng.text(25, 100)
        ])?;
    }
    Ok(())
}

fn warehouses_and_districts(c: &Connection, seed: u64, shape: Shape) -> BenchResult<()> {
    let mut rng = stream(seed, "warehouse");
    for w in 1..=shape.warehouses {
        c.execute(
            "INSERT INTO warehouse VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0.1, 0)",
            params![
                w,
                rng.text(6, 10),
                rng.text(10, 20),
                rng.text(10, 20),
                rng.text(10, 20),
                rng.text(2, 2),
                format!("{}11111", rng.digits(4))
            ],
        )?;
    }
    let mut rng = stream(seed, "district");
    let mut stmt =
        c.prepare("INSERT INTO district VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0.1, 0, ?9)")?;
    for w in 1..=shape.warehouses {
        for d in 1..=10 {
            stmt.execute(params![
                d,
                w,
                rng.text(6, 10),
                rng.text(10, 20),
                rng.text(10, 20),
                rng.text(10, 20),
                rng.text(2, 2),
                format!("{}11111", rng.digits(4)),
                3001
            ])?;
        }
    }
    Ok(())
}

fn customers(c: &Connection, seed: u64, shape: Shape, tpcc: bool) -> BenchResult<()> {
    let mut rng = stream(seed, "customer");
    let mut stmt = c.prepare(
        "INSERT INTO customer VALUES (?1, ?2, ?3, ?4, 'OE', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,
           50000, 0.05, ?14, ?15, 1, 0, ?16, ?17)",
    )?;
    let data_len = if tpcc { (300, 500) } else { (40, 60) };
    for w in 1..=shape.warehouses {
        for d in 1..=10u32 {
            for id in 1..=shape.customers_per_district {
                let (credit, balance, ytd, nation) = if tpcc {
                    (
                        if rng.below(10) == 0 { "BC" } else { "GC" },
                        -10.0,
                        10.0,
                        rng.below(62) as i64,
                    )
                } else {
                    ("GC", 0.0, ((id % 10) * 1000) as f64, 0i64)
                };
                stmt.execute(params![
                    id,
                    d,
                    w,
                    rng.text(8, 16),
                    rng.text(6, 12),
                    rng.text(10, 20),
                    rng.text(10, 20),
                    rng.text(10, 20),
                    rng.text(2, 2),
                    format!("{}11111", rng.digits(4)),
                    rng.digits(16),
                    EPOCH,
                    credit,
                    balance,
                    ytd,
                    rng.text(data_len.0, data_len.1),
                    nation
                ])?;
            }
        }
    }
    Ok(())
}

fn items_and_stock(c: &Connection, seed: u64, shape: Shape, tpcc: bool) -> BenchResult<()> {
    let mut rng = stream(seed, "item");
    let mut stmt = c.prepare("INSERT INTO item VALUES (?1, ?2, ?3, ?4, ?5)")?;
    for i in 1..=shape.items {
        let price = if tpcc {
            cents(&mut rng, 100, 10_000)
        } else {
            (i % 100) as f64 + 0.99
        };
        stmt.execute(params![
            i,
            rng.range(1, 10_000),
            rng.text(14, 24),
            price,
            rng.text(26, 50)
        ])?;
    }
    let mut rng = stream(seed, "stock");
    let mut stmt = c.prepare(
        "INSERT INTO stock VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 0, 0, 0, ?14, ?15)",
    )?;
    let data_len = if tpcc { (26, 50) } else { (10, 20) };
    for w in 1..=shape.warehouses {
        for i in 1..=shape.items {
            let qty = if tpcc { rng.range(10, 100) } else { 100 };
            let dists: Vec<String> = (0..10).map(|_| rng.text(24, 24)).collect();
            stmt.execute(params![
                i,
                w,
                qty,
                dists[0],
                dists[1],
                dists[2],
                dists[3],
                dists[4],
                dists[5],
                dists[6],
                dists[7],
                dists[8],
                dists[9],
                rng.text(data_len.0, data_len.1),
                1 + (w * i) % if tpcc { 10_000 } else { 1 }
            ])?;
        }
    }
    Ok(())
}

fn orders(c: &Connection, seed: u64, shape: Shape, tpcc: bool) -> BenchResult<()> {
    let mut rng = stream(seed, "orders");
    let mut lines = stream(seed, "order_line");
    let mut hist_rng = stream(seed, "history");
    let per_district = if tpcc { 3_000 } else { 100 };
    let undelivered_from = if tpcc {
        2_101
    } else {
        per_district * 7 / 10 + 1
    };
    let mut o = c.prepare("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1)")?;
    let mut no = c.prepare("INSERT INTO new_order VALUES (?1, ?2, ?3)")?;
    let mut ol =
        c.prepare("INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 5, ?8, ?9)")?;
    let mut h = c.prepare("INSERT INTO history VALUES (?1, ?2, ?3, ?2, ?3, ?4, 10.0, ?5)")?;
    for w in 1..=shape.warehouses {
        for d in 1..=10u32 {
            for id in 1..=shape.customers_per_district {
                h.execute(params![id, d, w, EPOCH, hist_rng.text(12, 24)])?;
            }
            for id in 1..=per_district {
                let customer = rng.range(1, shape.customers_per_district as u64);
                let delivered = id < undelivered_from;
                let count = rng.range(5, 15);
                o.execute(params![
                    id,
                    d,
                    w,
                    customer,
                    EPOCH,
                    if delivered {
                        Some(rng.range(1, 10))
                    } else {
                        None
                    },
                    count
                ])?;
                if !delivered {
                    no.execute(params![id, d, w])?;
                }
                for n in 1..=count {
                    let amount = if tpcc && delivered {
                        0.0
                    } else {
                        cents(&mut lines, 1, 999_999)
                    };
                    ol.execute(params![
                        id,
                        d,
                        w,
                        n,
                        lines.range(1, shape.items as u64),
                        w,
                        if delivered { Some(EPOCH) } else { None },
                        amount,
                        lines.text(24, 24)
                    ])?;
                }
            }
        }
    }
    Ok(())
}
