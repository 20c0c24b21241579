// A test kit for harnesses: start a daemon on a temporary store, seed a database once, and
// hand each test a fresh fork of it (an ephemeral session: destroyed when the test ends).

import { spawn, spawnSync, ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ScionClient, Session } from "./client.js";
import { ScionError } from "./errors.js";

export interface DaemonOptions {
  /** The `scion` binary (default: SCION_BIN, else `scion` on PATH). */
  scion?: string;
  /** An existing store (default: a new one in a temporary directory, removed on stop). */
  store?: string;
  /** The socket (default: one in a temporary directory). */
  socket?: string;
  /** More `scion serve` arguments, e.g. ["--flush-every", "1s"]. */
  args?: string[];
  /** How long to wait for the daemon to answer (default 30 s). */
  timeoutMs?: number;
}

export interface Daemon {
  readonly client: ScionClient;
  readonly store: string;
  readonly socket: string;
  /** What the daemon wrote to stderr so far. */
  stderr(): string;
  /** SIGTERM (the daemon flushes and closes every session), wait, clean up. */
  stop(): Promise<void>;
}

function scionBin(opts: DaemonOptions): string {
  return opts.scion ?? process.env.SCION_BIN ?? "scion";
}

/** Start `scion serve` on a store (a new temporary one by default) and wait until it answers. */
export async function startDaemon(opts: DaemonOptions = {}): Promise<Daemon> {
  const bin = scionBin(opts);
  const dir = mkdtempSync(join(tmpdir(), "scion-testkit-"));
  const store = opts.store ?? join(dir, "store");
  const socket = opts.socket ?? join(dir, "run", "scion.sock");
  const env = { ...process.env, SCION_STORE: store, SCION_SOCKET: socket };
  if (!opts.store) {
    const init = spawnSync(bin, ["init"], { env, encoding: "utf8" });
    if (init.status !== 0) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`scion init failed (${bin}): ${init.error?.message ?? init.stderr}`);
    }
  }
  const child: ChildProcess = spawn(bin, ["serve", "--gc-every", "never", ...(opts.args ?? [])], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  const client = new ScionClient({ socketPath: socket });
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  for (;;) {
    try {
      await client.health();
      break;
    } catch (e) {
      const gone = await Promise.race([exited, new Promise((r) => setTimeout(() => r("waiting"), 20))]);
      if (gone !== "waiting") {
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`scion serve exited (${gone}) before answering:\n${stderr}`);
      }
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`scion serve did not answer within ${opts.timeoutMs ?? 30_000} ms:\n${stderr}`, { cause: e });
      }
    }
  }
  // A test runner that exits without calling stop() (a worker torn down, a forgotten
  // afterAll) must not leave the daemon running on its own.
  const stopOnExit = () => {
    if (child.exitCode === null) child.kill("SIGTERM");
  };
  process.once("exit", stopOnExit);
  let stopped = false;
  return {
    client,
    store,
    socket,
    stderr: () => stderr,
    async stop() {
      if (stopped) return;
      stopped = true;
      process.removeListener("exit", stopOnExit);
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const code = await exited;
        if (code !== 0) process.emitWarning(`scion serve exited with ${code}:\n${stderr}`);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface SeedOptions {
  /** The database's name. */
  db: string;
  /** A SQLite file (on this host) to import. */
  fromFile?: string;
  /** Or: fill the new database's file yourself (with better-sqlite3, node:sqlite, ...). */
  build?: (path: string) => void | Promise<void>;
}

/** Create the database every test forks from: once per run. */
export async function seed(daemon: Daemon, opts: SeedOptions): Promise<void> {
  await daemon.client.createDatabase(opts.db, { from: opts.fromFile });
  if (opts.build) {
    const session = await daemon.client.openSession({ db: opts.db });
    try {
      await opts.build(session.path);
    } finally {
      await session.close();
    }
  }
}

export interface FreshDb {
  /** The SQLite file to open. */
  readonly path: string;
  /** `db@branch` of this test's fork. */
  readonly branch: string;
  readonly session: Session;
  /** Close the session and destroy the fork (idempotent). */
  release(): Promise<void>;
}

let counter = 0;

/** A fresh fork of `db` (of `from`, default main) for one test, captured live. */
export async function freshDb(daemon: Daemon, db: string, opts: { from?: string; name?: string } = {}): Promise<FreshDb> {
  counter += 1;
  const name = opts.name ?? `t-${process.pid}-${counter}-${Date.now().toString(36)}`;
  const session = await daemon.client.openSession({ db, branch: name, forkFrom: opts.from ?? "main", ephemeral: true });
  return {
    path: session.path,
    branch: session.branch,
    session,
    async release() {
      try {
        await session.close();
      } catch (e) {
        // A daemon that already stopped took the session with it.
        if (!(e instanceof ScionError && (e.code === "session_not_found" || e.code === "daemon_unreachable"))) throw e;
      }
    },
  };
}
