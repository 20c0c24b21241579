"""What a torture run's history and final store say: the histories merged for the
linearizability checker, the acknowledged commits that are missing from the final heads,
and the counts the report gives."""

import collections
import glob
import json
import os
import sqlite3
import subprocess

SHARED = ("b0", "b1", "s0", "s1")


def merged_history(out):
    """Every host's records, each operation's call and answer joined into one line."""
    ops = []
    for path in sorted(glob.glob(os.path.join(out, "*", "history-*.jsonl"))):
        incarnation = int(path.rsplit("-", 1)[1].split(".")[0])
        calls, rets = {}, {}
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    # The last line of a host killed while writing it.
                    continue
                (calls if rec["phase"] == "call" else rets)[rec["id"]] = rec
        for id_, c in calls.items():
            r = rets.get(id_)
            op = {"branch": c["branch"], "client": c["host"] * 1000 + incarnation,
                  "call": c["call"], "op": c["op"], "outcome": "unknown",
                  "token": c.get("token"), "writer": c.get("writer")}
            if "frm" in c:
                op["from"] = c["frm"]
            if "to" in c:
                op["to"] = c["to"]
            if r is not None:
                op["ret"] = r["ret"]
                op["outcome"] = r["outcome"]
                op["code"] = r.get("code")
                if r.get("pid"):
                    op["pid"] = r["pid"]
                if "attach" in r:
                    op["attach"] = r["attach"]
                if "value" in r:
                    op["value"] = r["value"]
                if "frm" in r:
                    op["from"] = r["frm"]
                if "to" in r:
                    op["to"] = r["to"]
            ops.append(op)
    ops.sort(key=lambda o: o["call"])
    return ops


def check_linearizable(lincheck, ops, out):
    path = os.path.join(out, "history.jsonl")
    with open(path, "w") as f:
        for op in ops:
            f.write(json.dumps({k: v for k, v in op.items()
                                if k not in ("token", "writer", "code", "attach", "pid")}) + "\n")
    p = subprocess.run([lincheck, "--json", "--timeout", "120s", path],
                       capture_output=True, text=True)
    if p.returncode == 2 and not p.stdout.strip():
        raise SystemExit(f"lincheck failed: {p.stderr}")
    result = json.loads(p.stdout)
    result["exit"] = p.returncode
    return result


def tokens_in(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in con.execute("select token from t")}
    finally:
        con.close()


def lost_commits(ops, final_tokens):
    """Acknowledged commits whose token is not in their branch's final head. A fork that
    was destroyed at the end has no final head and is not judged."""
    lost = []
    for op in ops:
        if op["op"] != "cas" or op["outcome"] != "ok":
            continue
        branch = op["branch"].split("@", 1)[1]
        if branch in final_tokens and op["token"] not in final_tokens[branch]:
            lost.append(op)
    return lost


def counts(ops):
    by_kind = collections.Counter()
    codes = collections.Counter()
    for op in ops:
        key = op["op"] if op["op"] != "cas" else f"commit ({op.get('writer')})"
        by_kind[(key, op["outcome"])] += 1
        if op["outcome"] != "ok" and op.get("code"):
            codes[op["code"]] += 1
    table = collections.defaultdict(dict)
    for (k, outcome), n in sorted(by_kind.items()):
        table[k][outcome] = n
    return dict(table), dict(codes)
