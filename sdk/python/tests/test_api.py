"""The embedded API: every method's success and error paths, against real stores and
real SQLite files."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

import scion
from conftest import make_sqlite, rows


def test_open_store_create_and_reopen(tmp_path: Path) -> None:
    s = scion.open_store(tmp_path / "s", create=True)
    assert s.location == str(tmp_path / "s")
    again = scion.open_store(tmp_path / "s")
    assert again.store_id == s.store_id
    assert s.databases() == []


def test_a_store_created_without_page_compression_keeps_raw_pages(tmp_path: Path) -> None:
    s = scion.open_store(tmp_path / "raw", create=True, page_compression="none")
    assert s.status()["page_compression"] == "none"
    # A store that exists keeps its own setting; asking it for another is an error.
    assert scion.open_store(tmp_path / "raw", create=True).status()["page_compression"] == "none"
    assert scion.open_store(tmp_path / "raw", page_compression="none").location == s.location
    with pytest.raises(scion.InvalidInput, match=r"keeps pages none.*scion config --page-compression lz4"):
        scion.open_store(tmp_path / "raw", create=True, page_compression="lz4")
    assert scion.open_store(tmp_path / "lz4", create=True).status()["page_compression"] == "lz4"
    src = make_sqlite(tmp_path / "src.db", rows=2000)
    main = s.create("shop", src)
    assert rows(main.checkout()) == rows(src)
    segments = sum(f.stat().st_size for f in (tmp_path / "raw" / "segments").iterdir())
    assert segments >= src.stat().st_size
    with pytest.raises(ValueError, match="zstd"):
        scion.open_store(tmp_path / "other", create=True, page_compression="zstd")
    assert not (tmp_path / "other").exists()


def test_open_store_missing_is_not_initialized(tmp_path: Path) -> None:
    with pytest.raises(scion.NotInitialized) as e:
        scion.open_store(tmp_path / "nope")
    assert isinstance(e.value, scion.NotFound)
    assert e.value.code == "not_initialized"
    assert e.value.exit_code == 3
    assert "scion init" in (e.value.hint or "")


def test_open_store_from_env_and_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = scion.open_store(tmp_path / "envstore", create=True)
    monkeypatch.setenv("SCION_STORE", str(tmp_path / "envstore"))
    assert scion.open_store().store_id == s.store_id
    monkeypatch.delenv("SCION_STORE")
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    monkeypatch.chdir(project)
    made = scion.open_store(create=True)
    assert made.location == str(project / ".scion")
    monkeypatch.chdir(project / "sub")
    assert scion.open_store().store_id == made.store_id


def test_open_store_bad_spec(tmp_path: Path) -> None:
    with pytest.raises(scion.InvalidInput):
        scion.open_store("ftp://example.com/x")


def test_create_from_file_and_empty(store: scion.Store, tmp_path: Path) -> None:
    main = store.create("shop", source=make_sqlite(tmp_path / "a.db"))
    assert main.ref == "shop@main"
    assert rows(main.checkout())[0] == (1, "item-0", 0)
    empty = store.create("blank")
    conn = empty.connect()
    conn.execute("CREATE TABLE t(x)")
    conn.commit()
    conn.close()
    assert sorted(store.databases()) == ["blank", "shop"]


def test_create_errors(store: scion.Store, tmp_path: Path) -> None:
    store.create("shop")
    with pytest.raises(scion.DatabaseExists):
        store.create("shop")
    with pytest.raises(scion.InvalidName) as e:
        store.create("Bad Name!")
    assert isinstance(e.value, scion.InvalidInput) and e.value.exit_code == 8
    with pytest.raises(FileNotFoundError):
        store.create("other", source=tmp_path / "missing.db")
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(scion.NotSqlite):
        store.create("junk", source=tmp_path / "junk.db")


def test_fork_is_isolated_and_keeps_meta_and_ttl(shop: scion.Branch) -> None:
    fork = shop.fork("exp", ttl=timedelta(hours=2), meta={"agent": "a1", "attempt": 3})
    assert fork.ref == "shop@exp"
    info = fork.info()
    assert info.meta == {"agent": "a1", "attempt": "3"}
    assert info.ttl_secs == 7200
    assert info.parent is not None and "shop@main" in info.parent
    with fork.connect() as conn:
        conn.execute("DELETE FROM items")
    assert rows(fork.checkout()) == []
    assert len(rows(shop.checkout())) == 3
    # Released, the checkout file goes; one holding changes is kept unless forced.
    fork.checkpoint("emptied")
    path = fork.checkout()
    released = fork.release_checkout()
    assert released["files_removed"] >= 1 and released["remaining"] == []
    assert not path.exists()
    with sqlite3.connect(fork.checkout()) as conn:
        conn.execute("INSERT INTO items VALUES (99, 'kept', 1)")
    with pytest.raises(scion.DirtyCheckout):
        fork.release_checkout()
    assert fork.release_checkout(force=True)["discarded"] == "dirty"


def test_fork_errors(shop: scion.Branch) -> None:
    shop.fork("a")
    with pytest.raises(scion.BranchExists) as e:
        shop.fork("a")
    assert isinstance(e.value, scion.AlreadyExists) and e.value.hint
    with pytest.raises(scion.CheckpointNotFound):
        shop.fork("b", at="never")
    with pytest.raises(scion.InvalidInput):
        shop.fork("c", meta={"scion.capture": "x"})
    with pytest.raises(scion.InvalidDuration):
        shop.fork("d", ttl="soon")
    with pytest.raises(ValueError):
        shop.fork("e", ttl=0)
    with pytest.raises(TypeError):
        shop.fork("f", ttl=1.5)  # type: ignore[arg-type]
    with pytest.raises(scion.BranchNotFound):
        shop._api.branch("shop@ghost").fork("g")
    with pytest.raises(ValueError):
        shop._api.branch("shop@main@cp")


def test_checkpoint_rollback_and_checkpoints(shop: scion.Branch) -> None:
    with shop.connect() as conn:
        conn.execute("UPDATE items SET price = 999 WHERE id = 1")
    cp = shop.checkpoint("priced", meta={"why": "sale"})
    assert cp.committed and cp.pages_changed >= 1 and cp.target == "shop@main@priced"
    again = shop.checkpoint("same")
    assert not again.committed and again.version == cp.version
    names = {c.name: c for c in shop.checkpoints()}
    assert names["priced"].meta == {"why": "sale"} and "same" in names
    with shop.connect() as conn:
        conn.execute("DELETE FROM items")
    # main is protected: rolling it back needs force, whatever the checkout holds.
    with pytest.raises(scion.Protected):
        shop.rollback("priced")
    shop.protect(False)
    with pytest.raises(scion.DirtyCheckout) as e:
        shop.rollback("priced")
    assert isinstance(e.value, scion.Refused) and "--force" in (e.value.hint or "")
    moved = shop.rollback("priced", force=True)
    assert moved.discarded_changes and moved.safety_fork
    assert rows(shop.checkout())[1] == (1, "item-0", 999) or rows(shop.checkout())[0][2] == 999
    with pytest.raises(scion.CheckpointExists):
        shop.checkpoint("priced")
    with pytest.raises(scion.CheckpointNotFound):
        shop.rollback("nope")


def test_history_undo_and_restore(store: scion.Store, shop: scion.Branch) -> None:
    work = shop.fork("work")
    with work.connect() as conn:
        conn.execute("UPDATE items SET price = 1")
    work.checkpoint("one")
    with work.connect() as conn:
        conn.execute("UPDATE items SET price = 2")
    work.checkpoint("two")
    moved = work.rollback("one")
    assert moved.history_entry == 3
    history = work.history()
    assert history.live and [e.op for e in history.entries] == ["rollback", "commit", "commit"]
    assert history.entries[0].detail == "shop@work@one" and history.entries[0].seq == 3
    assert len(work.history(limit=1).entries) == 1 and work.history(limit=1).more
    work.undo()
    assert {r[2] for r in rows(work.checkout())} == {2}
    work.restore(1)
    assert {r[2] for r in rows(work.checkout())} == {1}
    with pytest.raises(scion.HistoryEntryNotFound):
        work.restore(99)
    # A destroyed branch comes back by name.
    work.destroy()
    gone = store.branch("shop@work").history()
    assert not gone.live and gone.entries[0].destroyed
    back = store.branch("shop@work").restore()
    assert back.branch == "shop@work"
    assert {r[2] for r in rows(store.branch("shop@work").checkout())} == {1}
    # main is protected: undo needs force; a fresh branch has nothing to undo.
    with pytest.raises(scion.Protected):
        shop.undo()
    with pytest.raises(scion.NothingToUndo):
        shop.fork("fresh").undo()


def test_promote_and_attempt(store: scion.Store, shop: scion.Branch) -> None:
    with shop.attempt(meta={"try": "1"}) as bad:
        with bad.connect() as conn:
            conn.execute("DELETE FROM items")
        bad.checkpoint("done")
        bad_ref = bad.ref
    assert not store.branch(bad_ref).exists()

    with shop.attempt("good") as good:
        with good.connect() as conn:
            conn.execute("INSERT INTO items(name, price) VALUES ('new', 1)")
        good.checkpoint("done")
        with pytest.raises(scion.Protected):
            good.promote("main")
        result = good.promote("main", force=True)
        assert result.branch == "shop@main"
    assert store.branch("shop@good").exists()
    assert len(rows(shop.checkout())) == 4

    with shop.attempt("kept") as kept:
        kept.keep()
    assert store.branch("shop@kept").exists()

    with pytest.raises(RuntimeError):
        with shop.attempt("boom") as boom:
            raise RuntimeError("the block failed")
    assert not boom.exists()


def test_promote_errors(store: scion.Store, shop: scion.Branch, tmp_path: Path) -> None:
    fork = shop.fork("f")
    other = store.create("other")
    with pytest.raises(ValueError):
        fork.promote(other)
    with pytest.raises(scion.BranchNotFound):
        store.branch("shop@ghost").promote("main")


def test_destroy_touch_protect(store: scion.Store, shop: scion.Branch) -> None:
    fork = shop.fork("f", ttl="1h")
    fork.touch(None)
    assert fork.info().ttl_secs is None
    fork.touch("30m")
    assert fork.info().ttl_secs == 1800
    fork.touch()
    assert fork.info().ttl_secs == 1800
    fork.protect()
    assert fork.info().protected
    with pytest.raises(scion.Protected):
        fork.destroy()
    fork.unprotect()
    with fork.connect() as conn:
        conn.execute("DELETE FROM items")
    with pytest.raises(scion.DirtyCheckout):
        fork.destroy()
    fork.destroy(force=True)
    assert not fork.exists()
    with pytest.raises(scion.BranchNotFound):
        fork.destroy()
    fork.destroy(missing_ok=True)
    with pytest.raises(scion.BranchNotFound):
        fork.touch()


def test_branches_and_info(store: scion.Store, shop: scion.Branch) -> None:
    shop.fork("x", meta={"k": "v"})
    listed = {b.branch: b for b in store.branches("shop")}
    assert set(listed) == {"shop@main", "shop@x"}
    assert listed["shop@x"].meta == {"k": "v"}
    assert listed["shop@main"].protected
    with pytest.raises(scion.DatabaseNotFound):
        store.branches("ghost")


def test_diff_structured_and_sql(store: scion.Store, shop: scion.Branch, tmp_path: Path) -> None:
    fork = shop.fork("d")
    with fork.connect() as conn:
        conn.execute("INSERT INTO items(name, price) VALUES ('n', 5)")
        conn.execute("UPDATE items SET price = 1 WHERE id = 1")
        conn.execute("DELETE FROM items WHERE id = 2")
        conn.execute("CREATE TABLE extra(a)")
    fork.checkpoint("c")
    d = store.diff(shop, fork, rows=True)
    assert d and not d.empty
    items = d.table("items")
    assert items is not None
    assert (items.added, items.removed, items.changed) == (1, 1, 1)
    assert items.changed_rows[0].before == {"id": 1, "name": "item-0", "price": 0}
    assert [s.name for s in d.schema_changes] == ["extra"]
    sql = d.sql()
    assert "INSERT INTO" in sql and "DELETE FROM" in sql
    # The SQL turns left into right: applied to a copy of main, the rows agree.
    left = store.export(shop, tmp_path / "left.db")
    conn = sqlite3.connect(str(left.path))
    conn.executescript(sql)
    conn.close()
    assert rows(left.path) == rows(fork.checkout())
    same = store.diff("shop@main", "shop@main")
    assert same.empty and not same
    only = store.diff(shop, fork, table="items")
    assert [t.table for t in only.tables] == ["items"]
    with pytest.raises(scion.NoSuchTable):
        store.diff(shop, fork, table="ghost")
    with pytest.raises(scion.BranchNotFound):
        store.diff(shop, "shop@ghost")


def test_diff_working_reads_changes_not_checkpointed(store: scion.Store, shop: scion.Branch) -> None:
    fork = shop.fork("w")
    path = fork.checkout()
    conn = sqlite3.connect(str(path))
    conn.execute("DELETE FROM items WHERE id <= 3")
    conn.commit()
    conn.close()
    committed = store.diff(shop, fork)
    assert committed.empty
    assert committed.unsaved_checkouts == ("shop@w",)
    working = store.diff(shop, fork, working=True, rows=True)
    items = working.table("items")
    assert items is not None and items.removed == 3
    assert working.working_files == ("shop@w",)
    assert working.sql().count("DELETE FROM") == 3


def test_export(store: scion.Store, shop: scion.Branch, tmp_path: Path) -> None:
    out = store.export(shop, tmp_path / "out.db")
    assert out.path == tmp_path / "out.db" and out.bytes > 0
    assert rows(out.path) == rows(shop.checkout())
    with pytest.raises(scion.OutputExists):
        store.export(shop, tmp_path / "out.db")
    store.export(shop, tmp_path / "out.db", force=True)
    with pytest.raises(scion.NoSuchDirectory):
        store.export(shop, tmp_path / "no" / "dir" / "x.db")
    with pytest.raises(scion.InsideStore):
        store.export(shop, Path(store.location) / "x.db")


def test_checkout_read_only(shop: scion.Branch) -> None:
    with shop.connect() as conn:
        conn.execute("DELETE FROM items WHERE id = 1")
    shop.checkpoint("two")
    ro = shop.checkout_read_only(at="init")
    assert len(rows(ro)) == 3
    with pytest.raises(sqlite3.OperationalError):
        conn = sqlite3.connect(f"file:{ro}?mode=ro", uri=True)
        conn.execute("DELETE FROM items")
    with pytest.raises(scion.CheckpointNotFound):
        shop.checkout_read_only(at="ghost")


def test_gc_and_status(store: scion.Store, shop: scion.Branch) -> None:
    fork = shop.fork("g")
    with fork.connect() as conn:
        conn.execute("UPDATE items SET price = price + 1")
    fork.checkpoint("c")
    fork.destroy(force=True)
    report = store.gc(grace="1h")
    assert report["grace_secs"] == 3600
    with pytest.raises(scion.GraceBelowMinimum):
        store.gc(grace="1s")
    status = store.status()
    assert status["store"] == store.location
    assert [d["db"] for d in status["databases"]] == ["shop"]


def test_error_attributes_and_str(shop: scion.Branch) -> None:
    with pytest.raises(scion.Error) as e:
        shop.fork("main")
    err = e.value
    assert err.code == "branch_exists" and err.retryable is False
    assert err.exit_code == 4 and err.status == 409
    assert "hint:" in str(err) and err.message in str(err)


def test_merge_two_forks_with_a_resolution(store: scion.Store, shop: scion.Branch) -> None:
    a, b = shop.fork("agent-a"), shop.fork("agent-b")
    for branch, sql in [
        (a, "UPDATE items SET price = 10 WHERE id = 1"),
        (b, "UPDATE items SET price = 20 WHERE id = 1; UPDATE items SET name = 'b' WHERE id = 2"),
    ]:
        with branch.connect() as conn:
            conn.executescript(sql)
        branch.checkpoint("done")
    with pytest.raises(scion.Protected):
        shop.merge(a)
    first = shop.merge(a, force=True)
    assert first.outcome == "fast_forward" and first.version is not None
    dry = shop.merge(b, dry_run=True, force=True)
    assert dry.stopped and dry.unresolved == 1
    (conflict,) = dry.conflicts
    assert conflict.id == "items:1:price" and conflict.kind == "update/update"
    assert (conflict.columns[0].ours, conflict.columns[0].theirs) == (10, 20)
    done = shop.merge(b, resolutions={conflict.id: 15}, force=True)
    assert done.outcome == "merged" and not done.stopped
    with sqlite3.connect(shop.checkout()) as conn:
        got = conn.execute("SELECT id, name, price FROM items WHERE id IN (1, 2) ORDER BY id").fetchall()
    assert got[0][2] == 15 and got[1][1] == "b"
    assert shop.history(limit=1).entries[0].op == "merge"
    assert shop.merge(b, force=True).outcome == "up_to_date"


def test_rows_both_forks_appended_merge_with_renumber(shop: scion.Branch) -> None:
    a, b = shop.fork("append-a"), shop.fork("append-b")
    for branch in (a, b):
        with branch.connect() as conn:
            conn.execute("INSERT INTO items(name, price) VALUES (?, 1)", (branch.name,))
        branch.checkpoint("appended")
    assert shop.merge(a, force=True).outcome == "fast_forward"
    clash = shop.merge(b, dry_run=True, force=True)
    assert [c.kind for c in clash.conflicts] == ["insert/insert"] and clash.stopped
    done = shop.merge(b, renumber=True, force=True)
    assert done.outcome == "merged", done.raw
    assert done.renumbered == ({"table": "items", "column": "id", "from": 4, "to": 5},)
    got = rows(shop.checkout(), "SELECT id, name FROM items WHERE id > 3 ORDER BY id")
    assert got == [(4, "append-a"), (5, "append-b")]


def test_a_connection_used_as_a_with_block_is_committed_and_closed(shop: scion.Branch) -> None:
    fork = shop.fork("closing")
    with fork.connect() as db:
        db.execute("DELETE FROM items")
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")  # closed at the end of the block
    fork.checkpoint("emptied")
    # Nothing holds the checkout: the fork goes without force.
    fork.destroy()


def test_a_with_block_that_raises_rolls_back_and_closes(shop: scion.Branch) -> None:
    fork = shop.fork("raising")
    with pytest.raises(RuntimeError):
        with fork.connect() as db:
            db.execute("DELETE FROM items")
            raise RuntimeError("the agent gave up")
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")
    fresh = sqlite3.connect(fork.checkout())
    assert fresh.execute("SELECT count(*) FROM items").fetchone()[0] == 3
    fresh.close()


def test_head_history_iterates_and_a_merge_report_has_what_was_published(shop: scion.Branch) -> None:
    fork = shop.fork("hist")
    with fork.connect() as db:
        db.execute("UPDATE items SET price = 1 WHERE id = 1")
    fork.checkpoint("one")
    history = fork.history()
    assert len(history) == 1 and [e.op for e in history] == ["commit"] and history[0].op == "commit"
    report = shop.merge("hist", force=True)
    assert report.published is not None and report.published["version"] == report.version
    dry = shop.merge("hist", dry_run=True)
    assert dry.published is None


def test_push_and_pull_between_two_stores(store: scion.Store, shop: scion.Branch, tmp_path: Path) -> None:
    bucket = scion.open_store(tmp_path / "bucket", create=True)
    store.add_remote("origin", str(tmp_path / "bucket"))
    assert store.remotes() == {"origin": str(tmp_path / "bucket")}
    first = shop.push("origin")
    assert first.outcome == "created" and first.transfer.objects_sent >= 1
    assert first.tracking == "shop@origin~main"
    assert shop.push("origin").outcome == "up_to_date"

    # A commit made at the other store comes back by a pull.
    theirs = bucket.branch("shop")
    with theirs.connect() as conn:
        conn.execute("UPDATE items SET price = 99 WHERE id = 1")
    theirs.checkpoint("p99")
    mirror = store.branch("shop@mirror")
    made = mirror.pull("origin", source="main")
    assert made.outcome == "created" and made.transfer.objects_sent == 1
    with pytest.raises(scion.Protected):
        shop.pull("origin")
    ff = shop.pull("origin", force=True)
    assert ff.outcome == "fast_forward" and ff.merge is not None
    with shop.connect() as conn:
        assert conn.execute("SELECT price FROM items WHERE id = 1").fetchone() == (99,)

    # Both moved: the push is refused, the pull merges.
    with theirs.connect() as conn:
        conn.execute("UPDATE items SET price = 1 WHERE id = 2")
    theirs.checkpoint("p1")
    with shop.connect() as conn:
        conn.execute("UPDATE items SET name = 'here' WHERE id = 3")
    shop.checkpoint("here")
    with pytest.raises(scion.NotFastForward):
        shop.push("origin")
    merged = shop.pull("origin", force=True)
    assert merged.outcome == "merged" and merged.merge is not None and not merged.merge.stopped
    # The other store's main is checked out there (its writes went through that file): a
    # push onto it is refused unless forced.
    with pytest.raises(scion.CheckedOut):
        shop.push("origin")
    assert shop.push("origin", force=True).outcome == "fast_forward"
    with pytest.raises(scion.RemoteNotFound):
        shop.push("nowhere")
    assert store.remove_remote("origin") == str(tmp_path / "bucket")
