//! Reading a version's tables: `sqlite_schema`, and a table's rows from the pages that can
//! hold changes.

use std::collections::BTreeSet;

use super::btree::Value;
use super::btree::{decode_record, parse_page, PageKind};
use super::descent;
use super::pages::VersionPages;
use super::table::{full_payload, row_key, Row, Rows, SchemaRow, TableShape};
use crate::error::EngineResult;

/// Rows of the b-tree at `root`: from every page when `full`, otherwise only from pages
/// in `changed` (an unchanged page holds the same rows in both versions). Interior pages
/// are always read, to find the changed leaves below them.
pub(super) fn collect_rows(
    v: &mut VersionPages<'_>,
    root: u32,
    changed: &BTreeSet<u32>,
    full: bool,
    shape: &TableShape,
) -> EngineResult<Rows> {
    let usable = v.usable_size()?;
    if !full {
        let page = v.page(root)?;
        if matches!(parse_page(&page, root, usable)?, Some(p) if p.kind == PageKind::TableInterior)
        {
            return descent::collect_rows(v, root, changed, shape);
        }
    }
    let mut rows = Rows::new();
    // A b-tree's leaves are all at one depth: find it along the leftmost path first, so
    // that unchanged leaves can be skipped without being read.
    let mut leaf_depth: Option<usize> = None;
    if !full {
        let (mut pgno, mut depth) = (root, 0);
        for _ in 0..64 {
            let page = v.page(pgno)?;
            match parse_page(&page, pgno, usable)? {
                Some(p) if matches!(p.kind, PageKind::TableLeaf | PageKind::IndexLeaf) => {
                    leaf_depth = Some(depth);
                    break;
                }
                Some(p) => match p.cells.first().and_then(|c| c.left_child).or(p.right_child) {
                    Some(c) => {
                        pgno = c;
                        depth += 1;
                    }
                    None => break,
                },
                None => break,
            }
        }
    }
    let mut stack = vec![(root, 0usize)];
    let mut visited = BTreeSet::new();
    while let Some((pgno, depth)) = stack.pop() {
        if pgno == 0 || !visited.insert(pgno) {
            continue;
        }
        let page = v.page(pgno)?;
        let Some(p) = parse_page(&page, pgno, usable)? else {
            continue;
        };
        let take = full || changed.contains(&pgno);
        let is_leaf = matches!(p.kind, PageKind::TableLeaf | PageKind::IndexLeaf);
        if is_leaf {
            leaf_depth.get_or_insert(depth);
        }
        let has_payload = matches!(
            p.kind,
            PageKind::TableLeaf | PageKind::IndexLeaf | PageKind::IndexInterior
        );
        if take && has_payload {
            for cell in &p.cells {
                let payload = full_payload(v, cell, usable)?;
                let mut values = decode_record(&payload)?;
                shape.complete(&mut values);
                // An INTEGER PRIMARY KEY is stored as NULL: its value is the rowid.
                if let (Some(rowid), Some(x)) = (
                    cell.rowid,
                    shape.rowid_alias.and_then(|i| values.get_mut(i)),
                ) {
                    *x = Value::Integer(rowid);
                }
                let k = row_key(cell.rowid, &values, &shape.key);
                rows.insert(
                    k,
                    Row {
                        rowid: cell.rowid,
                        values,
                    },
                );
            }
        }
        let children: Vec<u32> = p
            .cells
            .iter()
            .filter_map(|c| c.left_child)
            .chain(p.right_child)
            .filter(|c| full || leaf_depth != Some(depth + 1) || changed.contains(c))
            .collect();
        // The children of one page usually sit together in the store: fetch them at once.
        v.prefetch(&children)?;
        for c in children {
            // Below the last interior level, unchanged leaves are skipped unread.
            if !full && leaf_depth == Some(depth + 1) && !changed.contains(&c) {
                continue;
            }
            stack.push((c, depth + 1));
        }
    }
    Ok(rows)
}

pub(super) fn text(v: &Value) -> String {
    match v {
        Value::Text(t) => String::from_utf8_lossy(t).into_owned(),
        Value::Integer(i) => i.to_string(),
        _ => String::new(),
    }
}

/// Every object of `sqlite_schema` (the b-tree rooted at page 1), read in full.
pub(super) fn read_schema(v: &mut VersionPages<'_>) -> EngineResult<Vec<SchemaRow>> {
    let empty = BTreeSet::new();
    let shape = TableShape {
        columns: vec![],
        key: vec![],
        rowid_alias: None,
        real: vec![],
        defaults: vec![],
    };
    let rows = collect_rows(v, 1, &empty, true, &shape)?;
    Ok(rows
        .into_values()
        .map(|r| r.values)
        .filter(|r| r.len() >= 5)
        .map(|r| SchemaRow {
            kind: text(&r[0]),
            name: text(&r[1]),
            table: text(&r[2]),
            root: match r[3] {
                Value::Integer(i) => i as u32,
                _ => 0,
            },
            sql: match &r[4] {
                Value::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                _ => None,
            },
        })
        .collect())
}
