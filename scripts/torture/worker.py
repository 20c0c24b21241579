"""One host of a torture run: a `scion serve` and writers, inside the host's own network,
UTS and pid namespaces, against the shared store.

    worker.py --host N --incarnation K --bin SCION --out DIR --lease-ttl SECS [--skew +10m]

Every operation is recorded before it starts and again when it answers, one JSON line
each, in DIR/h<N>/history-<K>.jsonl, with times of CLOCK_MONOTONIC (one clock for every
host of the machine, and never skewed: the worker itself does not run under faketime). A
record without its answer is an operation its host died in. The worker runs until
DIR/stop exists, then closes its sessions and stops its daemon.

The writers: `scion sql` (the VFS) on the shared branches b0 and b1; sessions of the
host's daemon on s0 and s1, written with Python's sqlite3 and flushed on request; and the
stock sqlite3 shell on checkouts of forks of the host's own, which it destroys again.
Every commit inserts a token, so the final heads show which acknowledged commits survived.
"""

import argparse
import http.client
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import time

DB = "torture"
VFS_BRANCHES = ("b0", "b1")
SESSION_BRANCHES = ("s0", "s1")
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
# Exit codes by which scion says it changed nothing (not found, exists, conflict,
# refused, invalid input); any other failure may have landed.
REFUSALS = {3, 4, 5, 6, 8}
COMMAND_TIMEOUT = 60


class History:
    def __init__(self, path, host):
        self.f = open(path, "a", buffering=1)
        self.host = host
        self.seq = 0

    def call(self, branch, op, at=None, **fields):
        """Record an operation's start (`at`: when it started, if before now)."""
        self.seq += 1
        rec = {"phase": "call", "id": self.seq, "host": self.host, "branch": branch,
               "op": op, "call": at or time.monotonic_ns(), **fields}
        self.f.write(json.dumps(rec) + "\n")
        return self.seq

    def ret(self, id_, outcome, **fields):
        rec = {"phase": "ret", "id": id_, "ret": time.monotonic_ns(), "outcome": outcome,
               **fields}
        self.f.write(json.dumps(rec) + "\n")


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("scion", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


class Host:
    def __init__(self, args):
        self.args = args
        self.dir = os.path.join(args.out, f"h{args.host}")
        os.makedirs(self.dir, exist_ok=True)
        self.hist = History(os.path.join(self.dir, f"history-{args.incarnation}.jsonl"),
                            args.host)
        self.rng = random.Random(args.seed)
        self.tokens = 0
        self.scratch = []
        self.scratch_made = 0
        self.env = dict(os.environ)
        self.env["SCION_CHECKOUTS"] = os.path.join(self.dir, "checkouts")
        self.env["SCION_LOG"] = "warn"
        if args.skew:
            self.env.update({"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": args.skew,
                             "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
        self.sock = os.path.join(self.dir, f"daemon-{args.incarnation}.sock")
        self.daemon = None
        self.last_pid = None

    def token(self):
        self.tokens += 1
        return f"h{self.args.host}-i{self.args.incarnation}-{self.tokens}"

    def scion(self, *argv):
        """Run a scion command; (exit code, parsed stdout or error object)."""
        p = subprocess.Popen([self.args.bin, "--json", *argv], env=self.env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Its pid names it in the head history's holders (`host:boot:pidns/pid`).
        self.last_pid = p.pid
        try:
            stdout, stderr = p.communicate(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return None, {"code": "timeout"}
        if p.returncode == 0:
            try:
                return 0, json.loads(stdout) if stdout.strip() else {}
            except json.JSONDecodeError:
                return 0, {}
        try:
            err = json.loads(stderr.strip().splitlines()[-1])["error"]
        except (json.JSONDecodeError, IndexError, KeyError, TypeError):
            err = {"code": "unparsed", "message": stderr[-300:]}
        return p.returncode, err

    def settle(self, id_, code, err):
        """Record a failed command's answer: refused, or unknown."""
        outcome = "fail" if code in REFUSALS else "unknown"
        self.hist.ret(id_, outcome, code=err.get("code"), exit=code, pid=self.last_pid)
        return outcome

    def api(self, method, path, body=None):
        conn = UnixHTTP(self.sock, timeout=COMMAND_TIMEOUT)
        try:
            data = json.dumps(body) if body is not None else None
            headers = {"Content-Type": "application/json"} if data else {}
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            text = r.read().decode()
            try:
                return r.status, (json.loads(text) if text else {})
            except json.JSONDecodeError:
                return r.status, {"text": text}
        finally:
            conn.close()

    def start_daemon(self):
        self.daemon = subprocess.Popen(
            [self.args.bin, "serve", "--socket", self.sock, "--lease-ttl",
             f"{self.args.lease_ttl}s", "--flush-every", "1h", "--janitor-every", "5s",
             "--gc-every", "never"],
            env=self.env, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, f"daemon-{self.args.incarnation}.log"), "a"))
        for _ in range(600):
            if os.path.exists(self.sock):
                try:
                    if self.api("GET", "/healthz")[0] == 200:
                        return
                except OSError:
                    pass
            if self.daemon.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit(f"host {self.args.host}: the daemon did not come up")

    # -- operations -------------------------------------------------------------------

    def vfs_commit(self):
        b = self.rng.choice(VFS_BRANCHES)
        tok = self.token()
        started = time.monotonic_ns()
        id_ = self.hist.call(f"{DB}@{b}", "cas", at=started, token=tok, writer="vfs")
        code, out = self.scion("sql", f"{DB}@{b}",
                               f"insert into t(token, host) values('{tok}', {self.args.host})")
        if code == 0:
            # A statement that lost its commit's compare-and-swap runs again on the new
            # head: the commit that landed is the one this connection reports it made
            # (`committed`, on the version before it), whatever other writers moved the
            # head to since; the head it first saw was `version_before`.
            committed = out.get("committed")
            if committed is None:
                self.hist.ret(id_, "unknown", code="no commit reported", pid=self.last_pid)
                return
            self.hist.ret(id_, "ok", frm=committed - 1, to=committed, pid=self.last_pid)
            read = self.hist.call(f"{DB}@{b}", "read", at=started)
            self.hist.ret(read, "ok", value=out["version_before"])
        else:
            self.settle(id_, code, out)

    def read_all(self):
        ids = {b: self.hist.call(f"{DB}@{b}", "read")
               for b in VFS_BRANCHES + SESSION_BRANCHES + tuple(self.scratch)}
        code, out = self.scion("branches", DB)
        if code != 0:
            for id_ in ids.values():
                self.hist.ret(id_, "unknown", code=out.get("code"), exit=code)
            return
        heads = {b["branch"]: b["version"] for b in out["branches"]}
        for b, id_ in ids.items():
            self.hist.ret(id_, "ok", value=heads.get(b, -1))

    def fork(self):
        src = self.rng.choice(VFS_BRANCHES)
        self.scratch_made += 1
        name = f"h{self.args.host}-i{self.args.incarnation}-f{self.scratch_made}"
        id_ = self.hist.call(f"{DB}@{name}", "create")
        code, out = self.scion("fork", f"{DB}@{src}", name)
        if code == 0:
            self.hist.ret(id_, "ok", to=out["version"])
            self.scratch.append(name)
        else:
            if self.settle(id_, code, out) == "unknown":
                self.scratch.append(name)

    def checkout_commit(self):
        """The stock sqlite3 shell writes a checkout of a fork; a checkpoint commits it."""
        if not self.scratch:
            return self.fork()
        b = self.rng.choice(self.scratch)
        target = f"{DB}@{b}"
        code, out = self.scion("checkout", "--force", target)
        if code != 0:
            return
        base = out["version"]
        tok = self.token()
        w = subprocess.run(["sqlite3", out["path"],
                            f"insert into t(token, host) values('{tok}', {self.args.host})"],
                           capture_output=True, timeout=COMMAND_TIMEOUT)
        if w.returncode != 0:
            return
        id_ = self.hist.call(target, "cas", frm=base, to=base + 1, token=tok, writer="sqlite3")
        code, out = self.scion("checkpoint", target, f"c{self.tokens}")
        if code == 0:
            self.hist.ret(id_, "ok", frm=out.get("version_before", base), to=out["version"])
        else:
            self.settle(id_, code, out)

    def destroy(self):
        if not self.scratch:
            return
        b = self.scratch.pop(self.rng.randrange(len(self.scratch)))
        id_ = self.hist.call(f"{DB}@{b}", "destroy")
        code, out = self.scion("destroy", f"{DB}@{b}")
        if code == 0:
            self.hist.ret(id_, "ok")
        elif self.settle(id_, code, out) == "unknown":
            self.scratch.append(b)

    def session(self):
        """A session on a shared branch: Python's sqlite3 writes its file, flushes commit."""
        b = self.rng.choice(SESSION_BRANCHES)
        target = f"{DB}@{b}"
        id_ = self.hist.call(target, "read")
        try:
            status, out = self.api("POST", "/v1/sessions", {"db": DB, "branch": b})
        except OSError as e:
            self.hist.ret(id_, "unknown", code=type(e).__name__)
            return
        if status != 201:
            self.hist.ret(id_, "unknown", code=out.get("error", {}).get("code"), http=status)
            return
        self.hist.ret(id_, "ok", value=out["version"], attach=out.get("attach"))
        sid, base = out["id"], out["version"]
        try:
            for _ in range(self.rng.randint(1, 3)):
                tok = self.token()
                # Recorded before the write: from then on the daemon may commit it (a
                # stopping daemon flushes what it captured).
                id_ = self.hist.call(target, "cas", frm=base, to=base + 1, token=tok,
                                     writer="session")
                try:
                    con = sqlite3.connect(out["path"], timeout=10)
                    con.execute("insert into t(token, host) values(?, ?)",
                                (tok, self.args.host))
                    con.commit()
                    con.close()
                except sqlite3.Error as e:
                    self.hist.ret(id_, "unknown", code=f"sqlite: {e}")
                    return
                try:
                    status, rep = self.api("POST", f"/v1/sessions/{sid}/flush")
                except OSError as e:
                    self.hist.ret(id_, "unknown", code=type(e).__name__)
                    return
                if status == 200 and rep.get("committed"):
                    self.hist.ret(id_, "ok", to=rep["version"])
                    base = rep["version"]
                else:
                    code = rep.get("error", {}).get("code")
                    # A flush that did not commit leaves the write in the checkout: the
                    # next session on this host's checkout resumes from the branch's mark
                    # and commits it if the head has not moved (a fenced session's hint
                    # says so). No failed flush is a definite refusal of its write.
                    self.hist.ret(id_, "unknown", code=code, http=status)
                    return
        finally:
            try:
                self.api("POST", f"/v1/sessions/{sid}/close")
            except OSError:
                pass

    def gc(self):
        self.scion("gc", "--grace", f"{self.args.gc_grace}s")

    def run(self):
        self.start_daemon()
        ops = [(self.vfs_commit, 4), (self.session, 3), (self.read_all, 2),
               (self.checkout_commit, 2), (self.fork, 1), (self.destroy, 1), (self.gc, 0.3)]
        fns, weights = zip(*ops)
        stop = os.path.join(self.args.out, "stop")
        while not os.path.exists(stop):
            self.rng.choices(fns, weights)[0]()
        self.daemon.terminate()
        try:
            self.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", type=int, required=True)
    ap.add_argument("--incarnation", type=int, required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lease-ttl", type=int, default=2)
    ap.add_argument("--gc-grace", type=int, default=4)
    ap.add_argument("--skew", default="")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    subprocess.run(["hostname", f"scion-host-{args.host}"], check=True)
    Host(args).run()


if __name__ == "__main__":
    sys.exit(main())
