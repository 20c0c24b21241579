//! `renumber`: two branches that each append rows to tables keyed by an INTEGER PRIMARY
//! KEY merge as two sets of rows, the source's new ids after the destination's, and the
//! source's references through declared foreign keys follow. Checked by reading the result
//! back with SQLite, integrity and foreign keys included.

mod common;

use common::Env;
use scion_merge::{ConflictKind, MergeOptions, Outcome};

/// Orders and their lines (a foreign key to orders), notes that may answer a note (a
/// foreign key to its own table) and one receipt per order (its id is the order's).
fn shop() -> Env {
    let env = forked(
        "PRAGMA foreign_keys = ON;
         CREATE TABLE orders(id INTEGER PRIMARY KEY AUTOINCREMENT, who TEXT NOT NULL);
         CREATE TABLE lines(id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id), item TEXT);
         CREATE TABLE notes(id INTEGER PRIMARY KEY, reply_to INTEGER REFERENCES notes, body TEXT);
         CREATE TABLE receipts(order_id INTEGER PRIMARY KEY REFERENCES orders(id), total INT);
         CREATE TABLE tags(order_id INTEGER REFERENCES orders(id), tag TEXT, PRIMARY KEY (order_id, tag)) WITHOUT ROWID;
         INSERT INTO orders(who) VALUES ('ann'), ('bob');
         INSERT INTO lines VALUES (1, 1, 'pen'), (2, 2, 'ink');
         INSERT INTO notes VALUES (1, NULL, 'hello');",
    );
    // Both sides take the next ids of every table.
    env.write(
        "shop@main",
        "INSERT INTO orders(who) VALUES ('cat');
         INSERT INTO lines VALUES (3, 3, 'cup');
         INSERT INTO receipts VALUES (3, 30);
         INSERT INTO tags VALUES (3, 'gift');
         INSERT INTO notes VALUES (2, 1, 'main says hi')",
    );
    env.write(
        "shop@agent",
        "INSERT INTO orders(who) VALUES ('dan'), ('eve');
         INSERT INTO lines VALUES (3, 3, 'bag'), (4, 4, 'box'), (5, 1, 'pad');
         INSERT INTO receipts VALUES (3, 300), (4, 400);
         INSERT INTO tags VALUES (3, 'gift'), (4, 'rush');
         INSERT INTO notes VALUES (2, 1, 'agent says hi'), (3, 2, 'agent answers itself');
         UPDATE lines SET order_id = 4 WHERE id = 2",
    );
    env
}

/// Database `shop` made by `schema`, forked as `agent`; these merge into main freely.
fn forked(schema: &str) -> Env {
    let env = Env::new();
    env.create("shop", schema);
    env.fork("shop@main", "agent");
    env.scion
        .engine()
        .set_protected(&"shop@main".parse().unwrap(), false)
        .unwrap();
    env
}

/// Merge the agent into main with `renumber`.
fn merge_renumbering(env: &Env) -> scion_merge::MergeReport {
    let opts = MergeOptions {
        renumber: true,
        ..Default::default()
    };
    env.merge("shop@agent", "shop@main", &opts)
}

fn all(env: &Env) -> Vec<String> {
    env.rows(
        "shop@main",
        "SELECT 'order', id, who FROM orders
         UNION ALL SELECT 'line', l.id, l.item || ' of ' || o.who FROM lines l JOIN orders o ON o.id = l.order_id
         UNION ALL SELECT 'receipt', r.order_id, o.who || ' ' || r.total FROM receipts r JOIN orders o ON o.id = r.order_id
         UNION ALL SELECT 'tag', t.order_id, o.who || ' ' || t.tag FROM tags t JOIN orders o ON o.id = t.order_id
         UNION ALL SELECT 'note', n.id, n.body || coalesce(' (re: ' || p.body || ')', '') FROM notes n LEFT JOIN notes p ON p.id = n.reply_to
         ORDER BY 1, 2, 3",
    )
}

#[test]
fn without_renumber_rows_appended_on_both_sides_conflict_by_id() {
    let env = shop();
    let r = env.merge("shop@agent", "shop@main", &MergeOptions::default());
    assert_eq!(r.outcome, Outcome::Conflicts, "{r:#?}");
    let ids: Vec<&str> = r
        .conflicts
        .iter()
        .filter(|c| c.kind == ConflictKind::InsertInsert)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["lines:3", "notes:2", "orders:3", "receipts:3"],
        "{r:#?}"
    );
    assert!(r.renumbered.is_empty());
}

#[test]
fn renumbered_rows_follow_their_references_and_the_destination_keeps_its_ids() {
    let env = shop();
    let opts = MergeOptions {
        renumber: true,
        ..Default::default()
    };
    let dry = env.merge(
        "shop@agent",
        "shop@main",
        &MergeOptions {
            dry_run: true,
            ..opts.clone()
        },
    );
    let r = env.merge("shop@agent", "shop@main", &opts);
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert!(r.conflicts.is_empty(), "{:#?}", r.conflicts);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    // A dry run reports the same ids.
    assert_eq!(dry.renumbered, r.renumbered);
    assert_eq!(dry.followed_references, r.followed_references);
    let moved: Vec<String> = r
        .renumbered
        .iter()
        .map(|n| format!("{}.{} {}→{}", n.table, n.column, n.from, n.to))
        .collect();
    assert_eq!(
        moved,
        [
            "lines.id 3→4",
            "lines.id 4→5",
            "lines.id 5→6",
            "notes.id 2→3",
            "notes.id 3→4",
            "orders.id 3→4",
            "orders.id 4→5",
        ]
    );
    let followed: Vec<String> = r
        .followed_references
        .iter()
        .map(|f| format!("{}.{} → {}: {}", f.table, f.column, f.parent, f.rows))
        .collect();
    // lines: the two new lines of new orders and the changed line 2; notes: the answer
    // to the agent's own note (the reply to note 1 is to a base row and stays);
    // receipts and tags: the new orders' rows.
    assert_eq!(
        followed,
        [
            "lines.order_id → orders: 3",
            "notes.reply_to → notes: 1",
            "receipts.order_id → orders: 2",
            "tags.order_id → orders: 2",
        ]
    );
    assert_eq!(
        all(&env),
        [
            "line|1|pen of ann",
            "line|2|ink of eve",
            "line|3|cup of cat",
            "line|4|bag of dan",
            "line|5|box of eve",
            "line|6|pad of ann",
            "note|1|hello",
            "note|2|main says hi (re: hello)",
            "note|3|agent says hi (re: hello)",
            "note|4|agent answers itself (re: agent says hi)",
            "order|1|ann",
            "order|2|bob",
            "order|3|cat",
            "order|4|dan",
            "order|5|eve",
            "receipt|3|cat 30",
            "receipt|4|dan 300",
            "receipt|5|eve 400",
            "tag|3|cat gift",
            "tag|4|dan gift",
            "tag|5|eve rush",
        ]
    );
    let c = env.open("shop@main");
    assert_eq!(common::rows(&c, "PRAGMA integrity_check"), ["ok"]);
    assert!(common::rows(&c, "PRAGMA foreign_key_check").is_empty());
    // AUTOINCREMENT hands out the id after the highest one either side used.
    assert_eq!(
        common::rows(&c, "SELECT seq FROM sqlite_sequence WHERE name = 'orders'"),
        ["5"]
    );
    drop(c);
    env.write("shop@main", "INSERT INTO orders(who) VALUES ('fay')");
    assert_eq!(
        env.rows("shop@main", "SELECT id FROM orders WHERE who = 'fay'"),
        ["6"]
    );
}

#[test]
fn the_same_row_added_on_both_sides_agrees_and_is_not_renumbered() {
    let env = forked(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT);
         INSERT INTO t VALUES (1, 'base');",
    );
    env.write("shop@main", "INSERT INTO t VALUES (2, 'same'), (3, 'main')");
    env.write(
        "shop@agent",
        "INSERT INTO t VALUES (2, 'same'), (3, 'agent'), (4, 'agent too')",
    );
    let r = merge_renumbering(&env);
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    let moved: Vec<(i64, i64)> = r.renumbered.iter().map(|n| (n.from, n.to)).collect();
    assert_eq!(moved, [(3, 4), (4, 5)]);
    assert_eq!(
        env.rows("shop@main", "SELECT * FROM t ORDER BY id"),
        ["1|base", "2|same", "3|main", "4|agent", "5|agent too"]
    );
    // Merged again: the source's rows are there already, under their new ids.
    env.write("shop@agent", "INSERT INTO t VALUES (6, 'later')");
    let again = merge_renumbering(&env);
    assert_eq!(again.outcome, Outcome::Merged, "{again:#?}");
    assert_eq!(
        env.rows("shop@main", "SELECT * FROM t ORDER BY id"),
        [
            "1|base",
            "2|same",
            "3|main",
            "4|agent",
            "5|agent too",
            "6|later"
        ]
    );
}

/// Only a table keyed by its rowid is renumbered: a key of another kind (`INT PRIMARY
/// KEY` is not a rowid, a text key names a thing) still conflicts, and says so.
#[test]
fn keys_that_are_not_row_ids_still_conflict() {
    let env = forked(
        "CREATE TABLE k(id INT PRIMARY KEY, a TEXT);
         CREATE TABLE n(name TEXT PRIMARY KEY, a TEXT);",
    );
    env.write(
        "shop@main",
        "INSERT INTO k VALUES (1, 'main'); INSERT INTO n VALUES ('x', 'main')",
    );
    env.write(
        "shop@agent",
        "INSERT INTO k VALUES (1, 'agent'); INSERT INTO n VALUES ('x', 'agent')",
    );
    let r = merge_renumbering(&env);
    assert_eq!(r.outcome, Outcome::Conflicts, "{r:#?}");
    let ids: Vec<&str> = r.conflicts.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["k:1", "n:\"x\""]);
    assert!(r.renumbered.is_empty());
    assert!(r.tables.iter().all(|t| !t.keyed_by_id), "{:#?}", r.tables);
}

/// Children that look alike on both sides (the same values, under the same ids) but belong
/// to different new parents are different rows: whether a child agrees is judged after its
/// reference follows its parent's new id.
#[test]
fn children_alike_but_of_different_new_parents_are_both_kept() {
    let env = forked(
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, who TEXT);
         CREATE TABLE lines(id INTEGER PRIMARY KEY, order_id INT REFERENCES orders(id), item TEXT);",
    );
    for (branch, who) in [("shop@main", "ann"), ("shop@agent", "bob")] {
        env.write(
            branch,
            &format!(
                "INSERT INTO orders(who) VALUES ('{who}');
                 INSERT INTO lines(order_id, item) VALUES (last_insert_rowid(), 'pen')"
            ),
        );
    }
    let r = merge_renumbering(&env);
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    assert_eq!(
        env.rows(
            "shop@main",
            "SELECT l.id, o.who, l.item FROM lines l JOIN orders o ON o.id = l.order_id ORDER BY l.id"
        ),
        ["1|ann|pen", "2|bob|pen"]
    );
}

/// A source merged with renumbered rows keeps them under its own ids. Merged again before
/// it is brought up to date, a change to those rows (or to rows that refer to them) is
/// refused, naming the merge; rows it only added merge as usual; brought up to date (a
/// fast-forward), its changes land on the rows' new ids.
#[test]
fn a_renumbered_source_must_be_brought_up_to_date_before_it_changes_those_rows() {
    let env = forked(
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, who TEXT);
         CREATE TABLE lines(id INTEGER PRIMARY KEY, order_id INT REFERENCES orders(id), item TEXT);
         CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);",
    );
    env.write("shop@main", "INSERT INTO orders(who) VALUES ('ann')");
    env.write("shop@agent", "INSERT INTO orders(who) VALUES ('bob')");
    let r = merge_renumbering(&env);
    assert_eq!(r.outcome, Outcome::Merged, "{r:#?}");
    env.fork("shop@agent", "adder");
    env.fork("shop@agent", "later");

    env.write(
        "shop@agent",
        "UPDATE orders SET who = 'bob!' WHERE id = 1; INSERT INTO lines(order_id, item) VALUES (1, 'pen')",
    );
    let err = env
        .try_merge("shop@agent", "shop@main", &MergeOptions::default())
        .unwrap_err();
    assert!(
        matches!(&err, scion_merge::MergeError::RenumberedSource { entry: 2, tables, .. } if tables == &["lines", "orders"]),
        "{err}"
    );
    assert_eq!(err.describe().code, "renumbered_source");
    assert_eq!(
        env.rows("shop@main", "SELECT * FROM orders ORDER BY id"),
        ["1|ann", "2|bob"]
    );

    // Only new rows: merged as any others.
    env.write("shop@adder", "INSERT INTO notes(body) VALUES ('hi')");
    let added = merge_from(&env, "shop@adder");
    assert_eq!(added.outcome, Outcome::Merged, "{added:#?}");

    // Brought up to date first: the change lands on the row's id in main.
    let up = env.merge("shop@main", "shop@later", &MergeOptions::default());
    assert_eq!(up.outcome, Outcome::FastForward, "{up:#?}");
    env.write(
        "shop@later",
        "UPDATE orders SET who = 'bob!' WHERE who = 'bob'",
    );
    let later = merge_from(&env, "shop@later");
    assert_eq!(later.outcome, Outcome::FastForward, "{later:#?}");
    assert_eq!(
        env.rows("shop@main", "SELECT * FROM orders ORDER BY id"),
        ["1|ann", "2|bob!"]
    );
}

fn merge_from(env: &Env, src: &str) -> scion_merge::MergeReport {
    let opts = MergeOptions {
        renumber: true,
        ..Default::default()
    };
    env.merge(src, "shop@main", &opts)
}

/// A full-text index's rowids are the module's: never renumbered, and not offered as
/// renumberable. One that copies a renumbered table's rows under their ids (by a trigger)
/// conflicts where the two sides' copies share a rowid, and the merge stops.
#[test]
fn a_full_text_index_is_not_renumbered() {
    let env = forked(
        "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT);
         CREATE VIRTUAL TABLE f USING fts5(name);
         CREATE TRIGGER ai AFTER INSERT ON items BEGIN INSERT INTO f(rowid, name) VALUES (new.id, new.name); END;
         INSERT INTO items(name) VALUES ('apple');",
    );
    env.write("shop@main", "INSERT INTO items(name) VALUES ('main kiwi')");
    env.write(
        "shop@agent",
        "INSERT INTO items(name) VALUES ('agent plum')",
    );
    let r = merge_renumbering(&env);
    assert_eq!(r.outcome, Outcome::Conflicts, "{r:#?}");
    let moved: Vec<String> = r
        .renumbered
        .iter()
        .map(|n| format!("{} {}→{}", n.table, n.from, n.to))
        .collect();
    assert_eq!(moved, ["items 2→3"]);
    let ids: Vec<&str> = r.conflicts.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["f:2"]);
    let keyed: Vec<(&str, bool)> = r
        .tables
        .iter()
        .map(|t| (t.table.as_str(), t.keyed_by_id))
        .collect();
    assert_eq!(keyed, [("f", false), ("items", true)]);
}
