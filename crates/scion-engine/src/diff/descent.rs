//! Finding a table's changed leaves by lookup instead of by walk: what keeps the cost of a
//! diff (and a merge) flat in the size of a table whose b-tree has interior pages.

use std::collections::BTreeSet;

use super::btree::Value;
use super::btree::{decode_record, parse_page, PageKind};
use super::pages::VersionPages;
use super::table::{full_payload, row_key, Row, Rows, TableShape};
use crate::error::EngineResult;

/// The rows of the changed leaves of the table b-tree at `root`, found without walking
/// its interior: each changed page that reads as a table leaf is looked up from the root
/// by its first rowid, and it is this table's leaf exactly when the lookup ends on it
/// (rowid ranges of a b-tree's leaves are disjoint). Reads the changed pages and one path
/// per changed leaf: flat in the table's size, where the walk reads every interior page.
pub(super) fn collect_rows(
    v: &mut VersionPages<'_>,
    root: u32,
    changed: &BTreeSet<u32>,
    shape: &TableShape,
) -> EngineResult<Rows> {
    let usable = v.usable_size()?;
    let mut rows = Rows::new();
    for &pgno in changed {
        if pgno == root || pgno > v.root.page_count {
            continue;
        }
        let page = v.page(pgno)?;
        // A changed page may be anything (an overflow or freelist page, another tree's):
        // only a table leaf this tree leads to counts.
        let Some(p) = parse_page(&page, pgno, usable).ok().flatten() else {
            continue;
        };
        if p.kind != PageKind::TableLeaf {
            continue;
        }
        let Some(first) = p.cells.first().and_then(|c| c.rowid) else {
            continue;
        };
        if leaf_of(v, root, first, usable)? != Some(pgno) {
            continue;
        }
        for cell in &p.cells {
            let payload = full_payload(v, cell, usable)?;
            let mut values = decode_record(&payload)?;
            shape.complete(&mut values);
            let Some(rowid) = cell.rowid else { continue };
            if let Some(x) = shape.rowid_alias.and_then(|i| values.get_mut(i)) {
                *x = Value::Integer(rowid);
            }
            let k = row_key(Some(rowid), &values, &shape.key);
            rows.insert(
                k,
                Row {
                    rowid: Some(rowid),
                    values,
                },
            );
        }
    }
    Ok(rows)
}

/// The leaf of the table b-tree at `root` where `rowid` belongs.
fn leaf_of(
    v: &mut VersionPages<'_>,
    root: u32,
    rowid: i64,
    usable: usize,
) -> EngineResult<Option<u32>> {
    let mut pgno = root;
    for _ in 0..64 {
        let page = v.page(pgno)?;
        let Some(p) = parse_page(&page, pgno, usable)? else {
            return Ok(None);
        };
        match p.kind {
            PageKind::TableLeaf => return Ok(Some(pgno)),
            PageKind::TableInterior => {
                let child = p
                    .cells
                    .iter()
                    .find(|c| c.rowid.is_some_and(|k| rowid <= k))
                    .and_then(|c| c.left_child)
                    .or(p.right_child);
                match child {
                    Some(c) if c != 0 => pgno = c,
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}
