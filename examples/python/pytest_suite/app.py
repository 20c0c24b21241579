"""The code under test: a tiny billing module working on a SQLite connection."""

import sqlite3


def upgrade(db: sqlite3.Connection, email: str) -> None:
    cur = db.execute("UPDATE users SET plan = 'pro' WHERE email = ? AND plan = 'free'", (email,))
    if cur.rowcount != 1:
        raise ValueError(f"no free user {email}")
    db.execute("INSERT INTO invoices(user_id, cents) SELECT id, 2900 FROM users WHERE email = ?", (email,))
    db.commit()


def delete_user(db: sqlite3.Connection, email: str) -> None:
    db.execute("DELETE FROM invoices WHERE user_id = (SELECT id FROM users WHERE email = ?)", (email,))
    db.execute("DELETE FROM users WHERE email = ?", (email,))
    db.commit()


def revenue(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT coalesce(sum(cents), 0) FROM invoices").fetchone()[0])
