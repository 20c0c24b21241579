"""pass^k over database tasks: k trials per task, each on its own fork of one seed.

An agent that passes a task once may fail it the next time; pass^k (as tau-bench reports it)
is the chance that all of k independent trials pass. Each trial here runs on a fresh fork of
the same seed (O(1), whatever the seed's size), and is scored from the database it left: the
rows the task asks for, and a diff against the seed that may touch nothing else. With n
trials of a task and c passes, pass^k is C(c, k) / C(n, k), averaged over tasks.

    python examples/python/pass_k.py [--store DIR] [--trials N]

The "agent" is a deterministic stand-in for a model (a seeded random choice between doing
the task right and the mistakes agents make); the forks, the writes and the diffs are real.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
from dataclasses import dataclass
from math import comb
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import scion


def seed_file(path: Path) -> Path:
    conn = sqlite3.connect(str(path))
    conn.executescript(
        """
        CREATE TABLE flights(id INTEGER PRIMARY KEY, code TEXT UNIQUE NOT NULL, seats_left INTEGER NOT NULL);
        CREATE TABLE bookings(id INTEGER PRIMARY KEY, passenger TEXT NOT NULL,
                              flight_id INTEGER NOT NULL REFERENCES flights(id), status TEXT NOT NULL);
        """
    )
    conn.executemany(
        "INSERT INTO flights(code, seats_left) VALUES (?, ?)", [(f"SC{100 + i}", 5 + i % 7) for i in range(200)]
    )
    conn.executemany(
        "INSERT INTO bookings(passenger, flight_id, status) VALUES (?, ?, 'confirmed')",
        [(f"passenger-{i}", 1 + i % 200) for i in range(1_000)],
    )
    conn.commit()
    conn.close()
    return path


@dataclass(frozen=True)
class Task:
    name: str
    right: Callable[[sqlite3.Connection], object]
    wrong: Callable[[sqlite3.Connection], object]
    # How often the stand-in agent gets it right.
    skill: float
    check: Callable[[sqlite3.Connection], bool]
    # The tables the task may change, with at most this many rows each.
    may_touch: Dict[str, int]


def book(db: sqlite3.Connection, passenger: str, code: str) -> None:
    (flight,) = db.execute("SELECT id FROM flights WHERE code = ?", (code,)).fetchone()
    db.execute("INSERT INTO bookings(passenger, flight_id, status) VALUES (?, ?, 'confirmed')", (passenger, flight))
    db.execute("UPDATE flights SET seats_left = seats_left - 1 WHERE id = ?", (flight,))


def move(db: sqlite3.Connection, passenger: str, old: str, new: str) -> None:
    db.execute(
        "UPDATE bookings SET flight_id = (SELECT id FROM flights WHERE code = ?) WHERE passenger = ?", (new, passenger)
    )
    db.execute("UPDATE flights SET seats_left = seats_left + 1 WHERE code = ?", (old,))
    db.execute("UPDATE flights SET seats_left = seats_left - 1 WHERE code = ?", (new,))


def booked(db: sqlite3.Connection, passenger: str, code: str) -> bool:
    row = db.execute(
        "SELECT count(*) FROM bookings b JOIN flights f ON f.id = b.flight_id "
        "WHERE b.passenger = ? AND f.code = ? AND b.status = 'confirmed'",
        (passenger, code),
    ).fetchone()
    return bool(row[0] == 1)


TASKS = [
    Task(
        "book ada on SC105",
        right=lambda db: book(db, "ada", "SC105"),
        # Books the flight but forgets the seat count.
        wrong=lambda db: db.execute(
            "INSERT INTO bookings(passenger, flight_id, status) "
            "SELECT 'ada', id, 'confirmed' FROM flights WHERE code = 'SC105'"
        ),
        skill=0.9,
        check=lambda db: (
            booked(db, "ada", "SC105")
            and db.execute("SELECT seats_left FROM flights WHERE code = 'SC105'").fetchone()[0] == 9
        ),
        may_touch={"bookings": 1, "flights": 1},
    ),
    Task(
        "cancel passenger-7's booking",
        right=lambda db: db.execute("UPDATE bookings SET status = 'cancelled' WHERE passenger = 'passenger-7'"),
        # Cancels every booking on the same flight.
        wrong=lambda db: db.execute("UPDATE bookings SET status = 'cancelled' WHERE flight_id = 8"),
        skill=0.6,
        check=lambda db: (
            db.execute("SELECT status FROM bookings WHERE passenger = 'passenger-7'").fetchone()[0] == "cancelled"
        ),
        may_touch={"bookings": 1},
    ),
    Task(
        "move passenger-12 from SC112 to SC113",
        right=lambda db: move(db, "passenger-12", "SC112", "SC113"),
        # Books the new flight and leaves the old booking in place.
        wrong=lambda db: book(db, "passenger-12", "SC113"),
        skill=0.5,
        check=lambda db: booked(db, "passenger-12", "SC113") and not booked(db, "passenger-12", "SC112"),
        may_touch={"bookings": 1, "flights": 2},
    ),
]


def run_trial(main: scion.Branch, task: Task, trial: int, store: scion.Store) -> Tuple[bool, str]:
    """One trial on its own fork of the seed: did it pass, and why not."""
    agent = random.Random(f"{task.name}/{trial}")
    with main.attempt(meta={"task": task.name, "trial": str(trial)}) as fork:
        with fork.connect() as db:
            (task.right if agent.random() < task.skill else task.wrong)(db)
        with fork.connect() as db:
            if not task.check(db):
                return False, "the task's rows are not as asked"
        # A diff compares versions: the trial's changes in the checkout become one first.
        fork.checkpoint("scored")
        touched = {t.table: t.added + t.removed + t.changed for t in store.diff(main, fork).tables}
        for table, n in touched.items():
            if n > task.may_touch.get(table, 0):
                return False, f"changed {n} rows of {table}"
    return True, ""


def pass_hat_k(passes: List[bool], k: int) -> float:
    n, c = len(passes), sum(passes)
    return comb(c, k) / comb(n, k)


def main(store_dir: Path, trials: int = 8) -> Dict[str, List[bool]]:
    store = scion.open_store(store_dir, create=True)
    with tempfile.TemporaryDirectory() as tmp:
        seed = store.create("airline", source=seed_file(Path(tmp) / "airline.db"))
    results: Dict[str, List[bool]] = {}
    for task in TASKS:
        results[task.name] = []
        for trial in range(trials):
            passed, why = run_trial(seed, task, trial, store)
            results[task.name].append(passed)
            if not passed:
                print(f"  {task.name} #{trial}: failed ({why})")
    print(f"\n{'task':<40}" + "".join(f"{'pass^' + str(k):>9}" for k in range(1, trials + 1)))
    for name, passes in results.items():
        print(f"{name:<40}" + "".join(f"{pass_hat_k(passes, k):>9.3f}" for k in range(1, trials + 1)))
    mean = [sum(pass_hat_k(p, k) for p in results.values()) / len(results) for k in range(1, trials + 1)]
    print(f"{'all tasks':<40}" + "".join(f"{m:>9.3f}" for m in mean))
    # The seed is untouched by every trial, and no trial's fork is left behind.
    assert [b.branch for b in store.branches("airline")] == ["airline@main"], store.branches("airline")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None)
    parser.add_argument("--trials", type=int, default=8)
    args = parser.parse_args()
    if args.store:
        main(args.store, args.trials)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "store", args.trials)
