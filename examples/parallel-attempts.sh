#!/usr/bin/env bash
# Parallel attempts: fork a database three times, try a different migration on each
# fork, compare the results, keep the one that is right. Runs in the current directory,
# with the default store ./.scion. Needs `scion` on PATH and python3 (for SQL).
set -euo pipefail

sql() { python3 - "$@" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
cur = con.cursor()
for stmt in sys.argv[2].split(";\n"):
    if stmt.strip():
        cur.execute(stmt)
        rows = cur.fetchall()
        for r in rows:
            print("|".join(str(v) for v in r))
con.commit()
PY
}

echo "== seed a shop database (20,000 orders)"
sql shop.db "PRAGMA journal_mode=WAL;
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, email TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount_cents INTEGER, status TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000)
  INSERT INTO customers SELECT i, 'customer ' || i, 'c' || i || '@example.com' FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 20000)
  INSERT INTO orders SELECT i, 1 + i % 2000, (i * 7919) % 100000, CASE i % 3 WHEN 0 THEN 'paid' WHEN 1 THEN 'shipped' ELSE 'new' END FROM n" >/dev/null

scion init
scion create shop --from shop.db

echo
echo "== fork three attempts (O(1) each, whatever the size)"
for attempt in add-index add-total-column drop-and-rebuild; do
  scion fork shop "$attempt"
done

echo
echo "== run a different migration on each"
sql "$(scion checkout shop@add-index)" \
  "CREATE INDEX orders_by_customer ON orders(customer_id)"
sql "$(scion checkout shop@add-total-column)" \
  "ALTER TABLE customers ADD COLUMN total_cents INTEGER NOT NULL DEFAULT 0;
UPDATE customers SET total_cents = (SELECT coalesce(sum(amount_cents), 0) FROM orders WHERE customer_id = customers.id)"
# A migration with a bug: it loses the orders that are still 'new'.
sql "$(scion checkout shop@drop-and-rebuild)" \
  "CREATE TABLE orders2 AS SELECT * FROM orders WHERE status != 'new';
DROP TABLE orders;
ALTER TABLE orders2 RENAME TO orders"
for attempt in add-index add-total-column drop-and-rebuild; do
  scion checkpoint "shop@$attempt" migrated
done

echo
echo "== what each attempt changed, against main"
for attempt in add-index add-total-column drop-and-rebuild; do
  scion diff shop "shop@$attempt"
done

echo
echo "== compare: every attempt must keep all 20,000 orders and their total"
expected=$(sql "$(scion checkout shop)" "SELECT count(*), sum(amount_cents) FROM orders")
echo "main:              $expected"
winner=""
for attempt in add-index add-total-column drop-and-rebuild; do
  got=$(sql "$(scion checkout shop@$attempt)" "SELECT count(*), sum(amount_cents) FROM orders")
  printf '%-18s %s' "$attempt:" "$got"
  if [ "$got" = "$expected" ]; then
    echo "   ok"
    [ -z "$winner" ] && winner=$attempt
  else
    echo "   LOST DATA"
  fi
done

echo
echo "== keep the winner ($winner): promote it onto main, destroy the other attempts"
safety=$(scion --json promote "shop@$winner" --onto main --force | python3 -c 'import json, sys; print(json.load(sys.stdin)["safety_fork"])')
echo "promoted shop@$winner onto shop@main; the old main is kept as $safety"
for attempt in add-index add-total-column drop-and-rebuild; do
  [ "$attempt" = "$winner" ] || scion destroy "shop@$attempt"
done
scion gc --grace 0 --force
scion export shop shop-migrated.db
scion status
echo
echo "Done. The store is $(pwd)/.scion; main holds the winning migration, and the old main"
echo "is kept for 24 h as $safety. Try: sqlite3 \"\$(scion --store $(pwd)/.scion checkout shop)\""
