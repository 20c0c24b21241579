"""An agent loop over database states: fork per attempt, let each attempt change its own
copy, score it with a diff against main, promote the best, and let the others go.

    python examples/python/agent_loop.py [--store DIR] [--attempts N]

Each "agent" here is a deterministic function standing in for a model's tool calls; the
scion calls around it are the real thing.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Callable, List, Tuple

import scion


def seed_file(path: Path) -> Path:
    conn = sqlite3.connect(str(path))
    conn.executescript(
        """
        CREATE TABLE products(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price_cents INTEGER NOT NULL,
                              stock INTEGER NOT NULL);
        """
    )
    rng = random.Random(7)
    conn.executemany(
        "INSERT INTO products(name, price_cents, stock) VALUES (?, ?, ?)",
        [(f"product-{i}", rng.randint(100, 10_000), rng.randint(0, 50)) for i in range(2_000)],
    )
    conn.commit()
    conn.close()
    return path


# The task: "discount what is overstocked by 10 %, without touching anything out of stock".
# Each attempt is one strategy; some are wrong in the ways agents are wrong.
def discount_overstocked(db: sqlite3.Connection) -> None:
    db.execute("UPDATE products SET price_cents = price_cents * 9 / 10 WHERE stock > 40")


def discount_everything(db: sqlite3.Connection) -> None:
    db.execute("UPDATE products SET price_cents = price_cents * 9 / 10")


def delete_out_of_stock(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM products WHERE stock = 0")
    db.execute("UPDATE products SET price_cents = price_cents * 9 / 10 WHERE stock > 40")


STRATEGIES: List[Tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("overstocked", discount_overstocked),
    ("everything", discount_everything),
    ("delete-oos", delete_out_of_stock),
]


def score(store: scion.Store, main: scion.Branch, fork: scion.Branch, expected: int) -> float:
    """1.0 for exactly the expected rows changed and nothing added or removed."""
    items = store.diff(main, fork).table("products")
    if items is None:
        return 0.0
    if items.added or items.removed:
        return 0.0
    return max(0.0, 1.0 - abs(items.changed - expected) / max(expected, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store directory (default: a temporary one)")
    parser.add_argument("--attempts", type=int, default=len(STRATEGIES))
    args = parser.parse_args()
    # The seed file (and the store, unless --store names one) live here, removed at the end.
    with tempfile.TemporaryDirectory(prefix="scion-agent-") as tmp:
        run(Path(tmp), args)


def run(workdir: Path, args: argparse.Namespace) -> None:
    store = scion.open_store(args.store or workdir / "store", create=True)
    main_branch = store.create("shop", source=seed_file(workdir / "shop.db"))
    with main_branch.connect() as db:
        expected = db.execute("SELECT count(*) FROM products WHERE stock > 40").fetchone()[0]

    results = []
    for i in range(args.attempts):
        label, strategy = STRATEGIES[i % len(STRATEGIES)]
        fork = main_branch.fork(f"attempt-{i}-{label}", ttl="1h", meta={"strategy": label})
        with fork.connect() as db:
            strategy(db)
        fork.checkpoint("done", meta={"strategy": label})
        s = score(store, main_branch, fork, expected)
        results.append((s, fork))
        print(f"attempt {i} ({label:<11}): score {s:.2f}")

    results.sort(key=lambda r: r[0], reverse=True)
    best_score, best = results[0]
    if best_score < 1.0:
        print("no attempt was right; main is unchanged")
    else:
        moved = best.promote("main", force=True)  # main is protected: promoting onto it is deliberate
        print(f"promoted {best.ref} onto main (version {moved.version}; old head kept as {moved.safety_fork})")
    for _, fork in results:
        fork.destroy(force=True)
    print("branches left:", [b.branch for b in store.branches("shop")])


if __name__ == "__main__":
    main()
