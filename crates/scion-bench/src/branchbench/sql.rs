//! What each workflow's step executes, written for SQLite from the BranchBench descriptions.
//! Literals are drawn from the worker's RNG and written into the SQL text, so the per-op
//! records carry the exact statement.

use std::str::FromStr;

use serde::Serialize;

use super::ops::Op;
use super::seed::Shape;
use super::tuples::Workflow;
use crate::datagen::SplitMix64;

/// software_dev's two SQL versions: the one the published runs used, and the harness's HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SqlVariant {
    Published,
    Head,
}

impl FromStr for SqlVariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "published" => Ok(SqlVariant::Published),
            "head" => Ok(SqlVariant::Head),
            _ => Err(format!("unknown SQL variant {s:?} (published, head)")),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Statement {
    pub op: Op,
    pub sql: String,
}

/// The statement lists of one step; the runner executes at most M_s, M_d and Q_v of them.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepSql {
    pub ddl: Vec<String>,
    pub dml: Vec<Statement>,
    pub evals: Vec<String>,
}

fn insert(sql: String) -> Statement {
    Statement {
        op: Op::Insert,
        sql,
    }
}
fn update(sql: String) -> Statement {
    Statement {
        op: Op::Update,
        sql,
    }
}

/// The suffix that keeps a child's new columns apart from its ancestors'.
pub(crate) fn suffix(thread: usize, step: usize) -> String {
    format!("_t{thread}_s{step}")
}

pub(crate) fn step_sql(
    w: Workflow,
    variant: SqlVariant,
    thread: usize,
    step: usize,
    rng: &mut SplitMix64,
    shape: Shape,
) -> StepSql {
    let sfx = suffix(thread, step);
    let wh = |rng: &mut SplitMix64| rng.range(1, shape.warehouses as u64);
    let item = |rng: &mut SplitMix64| rng.range(1, shape.items as u64);
    match w {
        Workflow::Simulation => {
            let w_id = wh(rng);
            let mut dml = Vec::with_capacity(50);
            let (mut last_o, mut last_d) = (0, 0);
            for day in 0..16u64 {
                let o_id = 100_000 + 100_000 * thread as u64 + 100 * step as u64 + day;
                let d = rng.range(1, 10);
                let c = rng.range(1, shape.customers_per_district as u64);
                dml.push(insert(format!(
                    "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local) \
                     VALUES ({o_id}, {d}, {w_id}, {c}, CURRENT_TIMESTAMP, NULL, 5, 1) ON CONFLICT DO NOTHING"
                )));
                let (i, q) = (item(rng), rng.range(1, 5));
                dml.push(update(format!(
                    "UPDATE stock SET s_quantity = s_quantity - {q} WHERE s_w_id = {w_id} AND s_i_id = {i} AND s_quantity >= {q}"
                )));
                dml.push(update(format!(
                    "UPDATE stock SET s_quantity = s_quantity + 100 WHERE s_w_id = {w_id} AND s_quantity < 10"
                )));
                (last_o, last_d) = (o_id, d);
            }
            let i = item(rng);
            let amount = (rng.unit() * 499.0 + 1.0) * 100.0;
            let amount = amount.round() / 100.0;
            dml.push(insert(format!(
                "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) \
                 VALUES ({last_o}, {last_d}, {w_id}, 1, {i}, {w_id}, NULL, 3, {amount:.2}, 'dist_info') ON CONFLICT DO NOTHING"
            )));
            let i = item(rng);
            dml.push(update(format!(
                "UPDATE stock SET s_quantity = s_quantity - 1 WHERE s_w_id = {w_id} AND s_i_id = {i} AND s_quantity > 0"
            )));
            StepSql {
                ddl: Vec::new(),
                dml,
                evals: vec![
                    "SELECT sum(s.s_quantity = 0) AS stockouts, sum(ol.ol_amount) AS revenue \
                     FROM stock s JOIN order_line ol ON s.s_i_id = ol.ol_i_id WHERE s.s_i_id <= 7500"
                        .into(),
                ],
            }
        }
        Workflow::DataCleaning => StepSql {
            ddl: vec![format!(
                "ALTER TABLE customer ADD COLUMN c_cleaned{sfx} BOOLEAN DEFAULT FALSE"
            )],
            dml: vec![if thread.is_multiple_of(2) {
                update("UPDATE customer SET c_balance = 0 WHERE c_balance IS NULL".into())
            } else {
                update("DELETE FROM customer WHERE c_balance IS NULL".into())
            }],
            evals: vec!["SELECT count(*) FROM customer WHERE c_balance < 0".into()],
        },
        Workflow::SoftwareDev => {
            let tier = "CASE WHEN c_ytd_payment > 9000 THEN 'Gold' WHEN c_ytd_payment > 5000 THEN 'Silver' ELSE 'Bronze' END";
            match variant {
                SqlVariant::Published => StepSql {
                    ddl: vec![format!("ALTER TABLE customer ADD COLUMN loyalty_tier{sfx} VARCHAR(8)")],
                    dml: vec![update(format!("UPDATE customer SET loyalty_tier{sfx} = {tier}"))],
                    evals: vec![
                        "SELECT count(*) FROM customer WHERE c_credit = 'BC'".into(),
                        "SELECT c_credit, count(*), avg(c_ytd_payment) FROM customer GROUP BY c_credit"
                            .into(),
                    ],
                },
                SqlVariant::Head => StepSql {
                    ddl: vec![
                        format!("ALTER TABLE customer ADD COLUMN loyalty_tier{sfx} VARCHAR(8)"),
                        format!("ALTER TABLE customer ADD COLUMN credit_lim{sfx} DECIMAL(10,2)"),
                    ],
                    dml: vec![update(format!(
                        "UPDATE customer SET loyalty_tier{sfx} = {tier}, credit_lim{sfx} = c_credit_lim"
                    ))],
                    evals: vec![
                        format!("SELECT count(*) FROM customer WHERE loyalty_tier{sfx} IS NULL"),
                        format!(
                            "SELECT loyalty_tier{sfx}, count(*), avg(credit_lim{sfx}) FROM customer GROUP BY loyalty_tier{sfx}"
                        ),
                    ],
                },
            }
        }
        Workflow::Mcts => {
            let (w_id, i, a) = (wh(rng), item(rng), rng.range(1, 10));
            StepSql {
                ddl: Vec::new(),
                dml: vec![update(format!(
                    "UPDATE stock SET s_quantity = s_quantity - {a} WHERE s_w_id = {w_id} AND s_i_id = {i} AND s_quantity >= {a}"
                ))],
                evals: vec![
                    "SELECT sum(ol.ol_amount) FROM order_line ol JOIN warehouse w ON ol.ol_supply_w_id = w.w_id"
                        .into(),
                ],
            }
        }
        Workflow::FailureRepro => {
            let mut ddl = vec![format!(
                "ALTER TABLE order_line ADD COLUMN ol_discount{sfx} DECIMAL(5,2)"
            )];
            if step.is_multiple_of(2) {
                ddl.push(format!(
                    "ALTER TABLE order_line DROP COLUMN ol_discount{sfx}"
                ));
            }
            ddl.push(format!(
                "ALTER TABLE orders ADD COLUMN o_flag{sfx} BOOLEAN DEFAULT FALSE"
            ));
            ddl.push(format!(
                "ALTER TABLE customer ADD COLUMN c_note{sfx} VARCHAR(64)"
            ));
            ddl.push(format!(
                "ALTER TABLE stock ADD COLUMN s_tag{sfx} VARCHAR(16)"
            ));
            let (w_id, d) = (wh(rng), rng.range(1, 10));
            let o_id = 100_000 + 100_000 * thread as u64 + step as u64;
            let mut dml = vec![
                insert(format!(
                    "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local) \
                     VALUES ({o_id}, {d}, {w_id}, 42, CURRENT_TIMESTAMP, NULL, 5, 1) ON CONFLICT DO NOTHING"
                )),
                update(format!(
                    "UPDATE customer SET c_balance = c_balance - 72.50 WHERE c_w_id = {w_id} AND c_d_id = {d} AND c_id = 42"
                )),
                update(format!(
                    "DELETE FROM order_line WHERE ol_w_id = {w_id} AND ol_d_id = {d} AND ol_o_id = {o_id}"
                )),
            ];
            const AMOUNTS: [i64; 5] = [-1, 0, 1, 50, 100];
            for n in 1..=42 {
                let amount = AMOUNTS[rng.below(5) as usize];
                dml.push(insert(format!(
                    "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) \
                     VALUES ({o_id}, {d}, {w_id}, {n}, 1, {w_id}, NULL, 5, {amount}, 'dist_info') ON CONFLICT DO NOTHING"
                )));
            }
            StepSql {
                ddl,
                dml,
                evals: vec![
                    "SELECT DISTINCT o_id FROM (SELECT o.o_id AS o_id, o.o_ol_cnt AS cnt, count(*) AS lines \
                     FROM orders o JOIN order_line ol ON ol.ol_w_id = o.o_w_id AND ol.ol_d_id = o.o_d_id AND ol.ol_o_id = o.o_id \
                     WHERE o.o_id > (SELECT max(o_id) FROM orders) - 100000 AND ol.ol_i_id <= 15000 \
                     GROUP BY o.o_id, o.o_ol_cnt HAVING o.o_ol_cnt <> count(*))"
                        .into(),
                ],
            }
        }
    }
}

/// The query a cross-branch pass runs on each leaf (`leaf_suffix` names the leaf's columns).
pub(crate) fn compare_sql(w: Workflow, variant: SqlVariant, leaf_suffix: &str) -> Option<String> {
    match w {
        Workflow::Simulation => Some(
            "SELECT sum(s.s_quantity = 0), avg(ol.ol_amount), min(ol.ol_amount) \
             FROM stock s JOIN order_line ol ON s.s_i_id = ol.ol_i_id WHERE s.s_i_id <= 7500"
                .into(),
        ),
        Workflow::DataCleaning => Some(
            "SELECT sum(c_balance IS NULL), max(c_ytd_payment) - min(c_ytd_payment) FROM customer"
                .into(),
        ),
        Workflow::SoftwareDev => Some(match variant {
            SqlVariant::Published => {
                "SELECT c_credit, count(*), avg(c_ytd_payment) FROM customer GROUP BY c_credit".into()
            }
            SqlVariant::Head => format!(
                "SELECT loyalty_tier{leaf_suffix}, count(*), avg(credit_lim{leaf_suffix}) FROM customer GROUP BY loyalty_tier{leaf_suffix}"
            ),
        }),
        Workflow::Mcts | Workflow::FailureRepro => None,
    }
}
