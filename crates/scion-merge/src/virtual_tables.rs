//! Virtual tables: full-text (FTS3/4/5) and spatial (R*Tree, geopoly) indexes keep their
//! data in shadow tables (`f_data`, `rt_node`, ...) whose rows only the module can read.
//! Merging those row by row corrupts the index, so they are never merged: the virtual
//! table's own rows are, read through SQLite at the base and at both sides and matched by
//! rowid, and applied through the virtual table so the module maintains its shadows. An
//! index over another table's content (FTS `content=...`) is rebuilt from that table. A
//! module scion does not know is refused before any work, naming it.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use scion_engine::diff::{
    DeltaRow, RowDelta, SchemaObject, TableDelta, TableLayout, Value, VersionDelta,
};
use scion_engine::format::Locator;
use std::sync::Arc;

use scion_engine::{BranchRef, Engine};

use crate::error::{MergeError, MergeResult};
use crate::schema::quote;

/// A virtual-table module scion merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Module {
    Fts3,
    Fts4,
    Fts5,
    Rtree,
    Geopoly,
}

impl Module {
    fn parse(name: &str) -> Option<Module> {
        Some(match name.to_ascii_lowercase().as_str() {
            "fts3" => Module::Fts3,
            "fts4" => Module::Fts4,
            "fts5" => Module::Fts5,
            "rtree" | "rtree_i32" => Module::Rtree,
            "geopoly" => Module::Geopoly,
            _ => return None,
        })
    }

    /// The suffixes of the shadow tables the module keeps beside table `name`.
    fn shadow_suffixes(self) -> &'static [&'static str] {
        match self {
            Module::Fts3 | Module::Fts4 => &["content", "segments", "segdir", "docsize", "stat"],
            Module::Fts5 => &["data", "idx", "content", "docsize", "config"],
            Module::Rtree | Module::Geopoly => &["node", "rowid", "parent"],
        }
    }
}

/// Where a full-text index's documents live.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Content {
    /// In the index's own `_content` shadow table: its rows are the virtual table's.
    Own,
    /// In another table (`content=name`): the index is rebuilt from it.
    External(String),
    /// Nowhere (`content=''`): the documents cannot be read back.
    None,
}

#[derive(Debug, Clone)]
struct VirtualTable {
    name: String,
    module: Module,
    content: Content,
}

impl VirtualTable {
    fn shadows(&self) -> impl Iterator<Item = String> + '_ {
        self.module
            .shadow_suffixes()
            .iter()
            .map(move |s| format!("{}_{s}", self.name))
    }
}

/// The virtual tables of the three versions a merge reads.
#[derive(Debug, Default)]
pub(crate) struct VirtualTables {
    tables: BTreeMap<String, VirtualTable>,
}

/// Whether `sql` (a schema object's) makes a virtual table: its rows are read and
/// matched by rowid here, but its ids belong to the module, never to be renumbered.
pub(crate) fn is_virtual(sql: Option<&str>) -> bool {
    sql.and_then(parse_create).is_some()
}

/// `CREATE VIRTUAL TABLE name USING module(args)`: the module and its arguments.
fn parse_create(sql: &str) -> Option<(String, String)> {
    let upper = sql.to_ascii_uppercase();
    if !upper.trim_start().starts_with("CREATE VIRTUAL TABLE") {
        return None;
    }
    let at = upper.find(" USING ")? + " USING ".len();
    let rest = sql[at..].trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let module = rest[..end].to_string();
    let args = rest[end..].trim();
    let args = args
        .strip_prefix('(')
        .and_then(|a| a.strip_suffix(')'))
        .unwrap_or("")
        .to_string();
    Some((module, args))
}

/// The `content=` option of a full-text index's arguments.
fn content_option(args: &str) -> Content {
    for arg in args.split(',') {
        let Some((k, v)) = arg.split_once('=') else {
            continue;
        };
        if k.trim().eq_ignore_ascii_case("content") {
            let v = v.trim().trim_matches(|c| c == '\'' || c == '"' || c == '`');
            return if v.is_empty() {
                Content::None
            } else {
                Content::External(v.to_string())
            };
        }
    }
    Content::Own
}

impl VirtualTables {
    /// Every virtual table in `objects`; a module scion does not know is refused.
    pub(crate) fn find<'a>(
        objects: impl Iterator<Item = &'a SchemaObject>,
    ) -> MergeResult<VirtualTables> {
        let mut out = VirtualTables::default();
        for o in objects.filter(|o| o.kind == "table") {
            let Some((module_name, args)) = o.sql.as_deref().and_then(parse_create) else {
                continue;
            };
            let module =
                Module::parse(&module_name).ok_or_else(|| MergeError::UnknownVirtualTable {
                    table: o.name.clone(),
                    module: module_name.clone(),
                })?;
            let content = match module {
                Module::Fts3 | Module::Fts4 | Module::Fts5 => content_option(&args),
                Module::Rtree | Module::Geopoly => Content::Own,
            };
            out.tables.insert(
                o.name.clone(),
                VirtualTable {
                    name: o.name.clone(),
                    module,
                    content,
                },
            );
        }
        Ok(out)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    fn shadow_names(&self) -> BTreeSet<String> {
        self.tables.values().flat_map(|t| t.shadows()).collect()
    }

    /// The virtual tables `d` changed: a shadow table's rows, or its definition.
    fn changed_in(&self, d: &VersionDelta) -> BTreeSet<String> {
        let touched = crate::schema::touched(d);
        self.tables
            .values()
            .filter(|t| t.shadows().any(|s| touched.contains(&s)))
            .map(|t| t.name.clone())
            .collect()
    }

    /// Take the shadow tables out of `d`, rows and schema: only their modules write them.
    fn strip(&self, d: &mut VersionDelta) {
        let shadows = self.shadow_names();
        d.tables.retain(|t| !shadows.contains(&t.table));
        for schema in [&mut d.schema_before, &mut d.schema_after] {
            schema.retain(|o| !shadows.contains(&o.table) && !shadows.contains(&o.name));
        }
    }
}

/// What merging virtual tables adds to the plan.
#[derive(Debug, Default)]
pub(crate) struct VirtualPlan {
    /// Statements run after the rows: rebuilds of indexes over another table's content.
    pub rebuilds: Vec<String>,
}

/// Replace the shadow tables' rows in both deltas by the virtual tables' own rows, read
/// through SQLite at the base, ours and theirs. Only virtual tables theirs changed are
/// read; one ours alone changed needs nothing.
pub(crate) fn prepare(
    engine: &Arc<Engine>,
    dst: &BranchRef,
    (base, ours, theirs): (&Locator, &Locator, &Locator),
    delta_ours: &mut VersionDelta,
    delta_theirs: &mut VersionDelta,
) -> MergeResult<VirtualPlan> {
    let all = VirtualTables::find(
        delta_theirs
            .schema_before
            .iter()
            .chain(&delta_ours.schema_after)
            .chain(&delta_theirs.schema_after),
    )?;
    let mut plan = VirtualPlan::default();
    if all.is_empty() {
        return Ok(plan);
    }
    let (ours_changed, theirs_changed) = (all.changed_in(delta_ours), all.changed_in(delta_theirs));
    let theirs_touched = crate::schema::touched(delta_theirs);
    all.strip(delta_ours);
    all.strip(delta_theirs);
    let exists =
        |d: &[SchemaObject], name: &str| d.iter().any(|o| o.kind == "table" && o.name == name);
    let mut readers = Readers::new(engine, dst);
    for t in all.tables.values() {
        let in_base = exists(&delta_theirs.schema_before, &t.name);
        let in_ours = exists(&delta_ours.schema_after, &t.name);
        let in_theirs = exists(&delta_theirs.schema_after, &t.name);
        let in_all = in_base && in_ours && in_theirs;
        match &t.content {
            Content::External(source) => {
                if in_all && (theirs_changed.contains(&t.name) || theirs_touched.contains(source)) {
                    plan.rebuilds.push(format!(
                        "INSERT INTO {q}({q}) VALUES('rebuild')",
                        q = quote(&t.name)
                    ));
                }
            }
            Content::None if theirs_changed.contains(&t.name) => {
                return Err(MergeError::UnmergeableVirtualTable {
                    table: t.name.clone(),
                    reason: "a contentless full-text index (content='') keeps no documents to merge; rebuild it on the merged rows instead".into(),
                });
            }
            Content::None => {}
            Content::Own => {
                if !theirs_changed.contains(&t.name) || !in_theirs {
                    // Nothing of theirs to take, or theirs dropped it (a schema step).
                    continue;
                }
                if !in_base {
                    // Theirs made it: its rows come with it, unless ours made one too (a
                    // schema conflict, or the same index on both sides).
                    if !in_ours {
                        let th = readers.rows(theirs, &t.name)?;
                        delta_theirs
                            .tables
                            .push(delta(&t.name, &th.0, None, Some(&th)));
                    }
                    continue;
                }
                // Theirs' rows go in even where ours dropped the index: the schema plan
                // then reports that conflict instead of losing them.
                let b = readers.rows(base, &t.name)?;
                let th = readers.rows(theirs, &t.name)?;
                delta_theirs
                    .tables
                    .push(delta(&t.name, &b.0, Some(&b), Some(&th)));
                if in_ours && ours_changed.contains(&t.name) {
                    let o = readers.rows(ours, &t.name)?;
                    delta_ours
                        .tables
                        .push(delta(&t.name, &b.0, Some(&b), Some(&o)));
                }
            }
        }
    }
    for d in [delta_ours, delta_theirs] {
        d.tables.sort_by(|a, b| a.table.cmp(&b.table));
    }
    Ok(plan)
}

/// One version's rows of a virtual table: its layout, and rows by rowid.
type Rows = (TableLayout, BTreeMap<i64, Vec<Value>>);

/// Read-only connections to versions, through the scion VFS, one per root.
/// Read-only connections to versions of one database, opened by the scion VFS at a root.
pub(crate) struct Readers<'a> {
    engine: &'a Arc<Engine>,
    dst: &'a BranchRef,
    open: BTreeMap<Locator, Connection>,
}

impl<'a> Readers<'a> {
    pub(crate) fn new(engine: &'a Arc<Engine>, dst: &'a BranchRef) -> Self {
        Readers {
            engine,
            dst,
            open: BTreeMap::new(),
        }
    }

    pub(crate) fn conn(&mut self, root: &Locator) -> MergeResult<&Connection> {
        if !self.open.contains_key(root) {
            scion_vfs::register().map_err(MergeError::Vfs)?;
            scion_vfs::adopt(self.engine.location(), self.engine.clone());
            let uri = format!(
                "{}&root={root}",
                scion_vfs::uri(&self.dst.to_string(), self.engine.location(), true)
            );
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
            let conn = Connection::open_with_flags(&uri, flags)
                .map_err(MergeError::apply("opening a version to read it"))?;
            self.open.insert(*root, conn);
        }
        Ok(&self.open[root])
    }

    /// The connection `conn` opened at `root`.
    pub(crate) fn opened(&self, root: &Locator) -> &Connection {
        &self.open[root]
    }

    /// The rows of virtual table `name` at `root`. The layout names `rowid` first when
    /// the table has no column that is its rowid (full-text indexes), so rows are matched
    /// and written back by rowid.
    fn rows(&mut self, root: &Locator, name: &str) -> MergeResult<Rows> {
        let conn = self.conn(root)?;
        let read = MergeError::apply(format!("reading virtual table {name}"));
        let mut columns: Vec<String> = Vec::new();
        {
            let mut st = conn
                .prepare(&format!("PRAGMA table_info({})", quote(name)))
                .map_err(read)?;
            let mut rows = st.query([]).map_err(MergeError::apply("table_info"))?;
            while let Some(r) = rows.next().map_err(MergeError::apply("table_info"))? {
                columns.push(r.get(1).map_err(MergeError::apply("table_info"))?);
            }
        }
        let rtree = conn
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE name = ?1",
                [name],
                |r| r.get::<_, String>(0),
            )
            .map(|sql| {
                parse_create(&sql)
                    .and_then(|(m, _)| Module::parse(&m))
                    .is_some_and(|m| m == Module::Rtree)
            })
            .map_err(MergeError::apply(format!(
                "reading the definition of {name}"
            )))?;
        // An R*Tree's first column is its rowid; the others are matched by `rowid`.
        if !rtree {
            columns.insert(0, "rowid".to_string());
        }
        let list: Vec<String> = columns.iter().map(|c| quote(c)).collect();
        let sql = format!("SELECT {} FROM {} ORDER BY 1", list.join(", "), quote(name));
        let mut st = conn.prepare(&sql).map_err(MergeError::apply(sql.clone()))?;
        let n = columns.len();
        let mut rows = st.query([]).map_err(MergeError::apply(sql.clone()))?;
        let mut out = BTreeMap::new();
        while let Some(r) = rows.next().map_err(MergeError::apply(sql.clone()))? {
            let mut values = Vec::with_capacity(n);
            for i in 0..n {
                values.push(
                    match r.get_ref(i).map_err(MergeError::apply(sql.clone()))? {
                        ValueRef::Null => Value::Null,
                        ValueRef::Integer(v) => Value::Integer(v),
                        ValueRef::Real(v) => Value::Real(v),
                        ValueRef::Text(t) => Value::Text(t.to_vec()),
                        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                    },
                );
            }
            let Value::Integer(rowid) = values[0] else {
                continue;
            };
            out.insert(rowid, values);
        }
        let layout = TableLayout {
            columns,
            key: Vec::new(),
            rowid_alias: Some(0),
        };
        Ok((layout, out))
    }
}

/// The rows that differ from `before` to `after`, matched by rowid, as the planner takes
/// a table's delta. Either side may be absent (the table did not exist there).
fn delta(
    name: &str,
    layout: &TableLayout,
    before: Option<&Rows>,
    after: Option<&Rows>,
) -> TableDelta {
    let empty = BTreeMap::new();
    let b = before.map_or(&empty, |r| &r.1);
    let a = after.map_or(&empty, |r| &r.1);
    let ids: BTreeSet<i64> = b.keys().chain(a.keys()).copied().collect();
    let row = |v: Option<&Vec<Value>>, id: i64| {
        v.map(|values| DeltaRow {
            rowid: Some(id),
            values: values.clone(),
        })
    };
    let mut rows = Vec::new();
    for id in ids {
        let (x, y) = (b.get(&id), a.get(&id));
        let same = match (x, y) {
            (Some(x), Some(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|(p, q)| crate::values::same(Some(p), Some(q)))
            }
            (None, None) => true,
            _ => false,
        };
        if same {
            continue;
        }
        // Sign flipped so that byte order is numeric order.
        let key = ((id as u64) ^ (1 << 63)).to_be_bytes().to_vec();
        rows.push(RowDelta {
            key,
            before: row(x, id),
            after: row(y, id),
        });
    }
    TableDelta {
        table: name.to_string(),
        before: before.map(|_| layout.clone()),
        after: after.map(|_| layout.clone()),
        rows,
        whole: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_and_content_options_are_read_from_the_create() {
        assert_eq!(
            parse_create("CREATE VIRTUAL TABLE f USING fts5(title, body, content='docs', content_rowid='id')"),
            Some(("fts5".into(), "title, body, content='docs', content_rowid='id'".into()))
        );
        assert_eq!(
            content_option("title, body, content='docs'"),
            Content::External("docs".into())
        );
        assert_eq!(content_option("a, content=''"), Content::None);
        assert_eq!(content_option("a, b"), Content::Own);
        assert_eq!(parse_create("CREATE TABLE t(a)"), None);
        assert_eq!(
            parse_create("create virtual table rt using rtree(id, x0, x1)").map(|m| m.0),
            Some("rtree".into())
        );
        assert_eq!(Module::parse("rtree_i32"), Some(Module::Rtree));
        assert_eq!(Module::parse("csv"), None);
    }
}
