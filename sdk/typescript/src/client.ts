// The client of `scion serve`'s /v1 API: databases, branches, checkpoints, diff, export,
// sessions and events. Every call takes an AbortSignal; errors are ScionError subclasses.

import { call, CallOptions, Connection, open } from "./transport.js";
import { ScionError } from "./errors.js";

export type Json = Record<string, unknown>;

export interface ForkOptions extends CallOptions {
  /** A checkpoint of the source to fork at (default: its head). */
  at?: string;
  /** Let the branch be reaped after this long without activity ("2h"). */
  ttl?: string;
}

export interface MoveOptions extends CallOptions {
  force?: boolean;
  noBackup?: boolean;
  backupTtl?: string;
}

export interface MergeOptions extends CallOptions {
  /** Compute and check everything, publish nothing. */
  dryRun?: boolean;
  /** For conflicts no resolution names: "fail" (default: publish nothing), "ours" or "theirs". */
  strategy?: "fail" | "ours" | "theirs";
  /** By conflict id (from a report): "ours", "theirs", or the value(s) to write. */
  resolutions?: Record<string, unknown>;
  conflictGranularity?: "cell" | "row";
  schemaPolicy?: "refuse" | "one-sided";
  allowViolations?: boolean;
  /**
   * Rows both sides added under the same INTEGER PRIMARY KEY are kept as two rows: the
   * source's get ids after the destination's, and its rows that refer to them by a foreign
   * key follow. The report's `renumbered` lists each id given.
   */
  renumber?: boolean;
  /** db@branch[@checkpoint]: the common version, where the version graph cannot tell. */
  base?: string;
  /** Needed to merge into a protected branch. */
  force?: boolean;
}

export interface PushOptions extends CallOptions {
  /** The branch's name at the remote (default: the same). */
  as?: string;
  /** Send the branch's checkpoints too. */
  checkpoints?: boolean;
  /** Replace a remote head this one does not descend from, only if it is still the version
   * last seen here (the remote-tracking branch `db@REMOTE~BRANCH`). */
  forceWithLease?: boolean;
  /** Needed to replace a protected branch's head at the remote. */
  force?: boolean;
}

export interface PullOptions extends CallOptions {
  /** The remote's branch: a name, or db@branch (default: the branch pulled into). */
  from?: string;
  strategy?: "fail" | "ours" | "theirs";
  /** Only move the remote-tracking branch. */
  fetchOnly?: boolean;
  /** As for a merge: rows both sides added under one INTEGER PRIMARY KEY are kept. */
  renumber?: boolean;
  /** Needed to move a protected branch. */
  force?: boolean;
}

export interface DiffOptions extends CallOptions {
  table?: string;
  rows?: boolean;
  limit?: number;
  sql?: boolean;
  /** Read a side whose checkout holds changes not checkpointed from that file. */
  working?: boolean;
}

export interface SessionOptions extends CallOptions {
  /** The database. */
  db: string;
  /** The branch to capture; with `forkFrom`, the new branch's name. */
  branch?: string;
  /** Fork this branch (`main`, or `main@checkpoint`) first. */
  forkFrom?: string;
  ttl?: string;
  idleTimeout?: string;
  /** Destroy the branch when the session closes (needs `forkFrom`). */
  ephemeral?: boolean;
  /** Mark the fork ephemeral without destroying it on close: its history goes with it
   * when it is destroyed later (needs `forkFrom`). */
  forkEphemeral?: boolean;
  /** Close the session when this process exits (`"peer"`: the calling process). */
  ownerPid?: number | "peer";
}

export interface FlushResult {
  version: number;
  committed: boolean;
  pages: number;
  bytes: number;
  transactions: number;
  checkpoint: string | null;
}

export interface ClosedSession {
  id: string;
  branch: string;
  reason: string;
  version: number;
  destroyed: boolean;
  error: string | null;
}

export interface SessionInfo {
  id: string;
  branch: string;
  path: string;
  state: "open" | "fenced" | "closed";
  durable_version: number;
  durable_age_ms: number;
  capture_lag_bytes: number;
  pending_transactions: number;
  transactions_captured: number;
  /** How the session kept the WAL short: PASSIVE checkpoints, and the second tier's barriers. */
  recycling: {
    passive_checkpoints: number;
    barriers: number;
    barriers_skipped: number;
    barrier_max_hold_us: number;
  };
  ephemeral: boolean;
  fenced_reason: string | null;
}

export interface ScionEvent {
  id: number;
  kind: string;
  at_ms: number;
  data: Json;
}

/** A live session: its file is captured as SQLite clients commit to it. */
export class Session {
  #closed: ClosedSession | undefined;

  constructor(
    readonly client: ScionClient,
    readonly id: string,
    readonly branch: string,
    readonly path: string,
    readonly version: number,
  ) {}

  /** Make everything committed so far durable; optionally name it as a checkpoint. */
  flush(opts: CallOptions & { checkpoint?: string; meta?: Record<string, string> } = {}): Promise<FlushResult> {
    return this.client.flushSession(this.id, opts);
  }

  /** Flush and close (closing again answers the same). */
  async close(opts: CallOptions = {}): Promise<ClosedSession> {
    this.#closed ??= await this.client.closeSession(this.id, opts);
    return this.#closed;
  }

  info(opts: CallOptions = {}): Promise<SessionInfo> {
    return this.client.session(this.id, opts);
  }

  /** `await using session = await client.openSession(...)` closes it at the end of scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

const q = encodeURIComponent;

export class ScionClient {
  constructor(readonly connection: Connection = {}) {}

  async #json<T>(method: string, path: string, body?: unknown, opts: CallOptions = {}): Promise<T> {
    return (await call(this.connection, method, path, body, opts)).body as T;
  }

  health(opts: CallOptions = {}): Promise<string> {
    return this.#json("GET", "/healthz", undefined, opts);
  }

  status(opts: CallOptions = {}): Promise<Json> {
    return this.#json("GET", "/v1/status", undefined, opts);
  }

  async databases(opts: CallOptions = {}): Promise<string[]> {
    return (await this.#json<{ databases: string[] }>("GET", "/v1/databases", undefined, opts)).databases;
  }

  /** Create a database, empty or imported from a SQLite file on the daemon's host. */
  createDatabase(name: string, opts: CallOptions & { from?: string } = {}): Promise<Json> {
    return this.#json("POST", "/v1/databases", { name, from: opts.from }, opts);
  }

  async branches(db: string, opts: CallOptions = {}): Promise<Json[]> {
    return (await this.#json<{ branches: Json[] }>("GET", `/v1/databases/${q(db)}/branches`, undefined, opts)).branches;
  }

  /** One branch (`db@branch`), with its live session's id if it has one. */
  branch(ref: string, opts: CallOptions = {}): Promise<Json> {
    return this.#json("GET", `/v1/branches/${q(ref)}`, undefined, opts);
  }

  /** Fork `source` (`db[@branch]`) as `name`: O(1). */
  fork(source: string, name: string, opts: ForkOptions = {}): Promise<Json> {
    return this.#json("POST", "/v1/branches", { source, name, at: opts.at, ttl: opts.ttl }, opts);
  }

  destroy(ref: string, opts: CallOptions & { force?: boolean } = {}): Promise<Json> {
    return this.#json("DELETE", `/v1/branches/${q(ref)}?force=${opts.force === true}`, undefined, opts);
  }

  /** The branch's SQLite file (materialized if needed): `{path, ...}`. */
  checkout(ref: string, opts: CallOptions & { force?: boolean; readOnly?: boolean; checkpoint?: string } = {}): Promise<Json & { path: string }> {
    return this.#json("POST", `/v1/branches/${q(ref)}/checkout`, { force: opts.force ?? false, read_only: opts.readOnly ?? false, checkpoint: opts.checkpoint }, opts);
  }

  /** End the branch's writable checkout on the daemon's host (its file is removed; VFS writers may write again). `force` discards changes never checkpointed. */
  releaseCheckout(ref: string, opts: CallOptions & { force?: boolean } = {}): Promise<Json & { files_removed: number; remaining: string[] }> {
    return this.#json("DELETE", `/v1/branches/${q(ref)}/checkout${opts.force ? "?force=true" : ""}`, undefined, opts);
  }

  async checkpoints(ref: string, opts: CallOptions = {}): Promise<Json[]> {
    return (await this.#json<{ checkpoints: Json[] }>("GET", `/v1/branches/${q(ref)}/checkpoints`, undefined, opts)).checkpoints;
  }

  /** Checkpoint a checkout at rest (a branch with a live session: flush the session). */
  checkpoint(ref: string, name: string, opts: CallOptions = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/checkpoints`, { name }, opts);
  }

  rollback(ref: string, to: string, opts: MoveOptions = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/rollback`, { to, force: opts.force, no_backup: opts.noBackup, backup_ttl: opts.backupTtl }, opts);
  }

  /** Every move of the branch's head, newest first (a destroyed branch's, while its history lasts). */
  history(ref: string, opts: CallOptions & { limit?: number } = {}): Promise<Json> {
    const limit = opts.limit === undefined ? "" : `?limit=${opts.limit}`;
    return this.#json("GET", `/v1/branches/${q(ref)}/history${limit}`, undefined, opts);
  }

  /** Take back the latest head move not undone yet; a protected branch needs `force`. */
  undo(ref: string, opts: CallOptions & { force?: boolean } = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/undo`, { force: opts.force }, opts);
  }

  /** Put the head where history entry `to` left it, or bring a destroyed branch back. */
  restore(ref: string, opts: CallOptions & { to?: number; force?: boolean } = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/restore`, { to: opts.to, force: opts.force }, opts);
  }

  promote(ref: string, opts: MoveOptions & { onto?: string } = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/promote`, { onto: opts.onto, force: opts.force, no_backup: opts.noBackup, backup_ttl: opts.backupTtl }, opts);
  }

  /**
   * Bring `from` (a branch of the same database, or db@branch[@checkpoint]) into `ref`,
   * three-way at the cell, atomically. The answer is the merge's report whatever its
   * outcome: `"conflicts"` published nothing and lists every conflict and violation.
   */
  merge(ref: string, from: string, opts: MergeOptions = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/merge`, {
      from,
      dry_run: opts.dryRun ?? false,
      strategy: opts.strategy,
      resolutions: opts.resolutions,
      conflict_granularity: opts.conflictGranularity,
      schema_policy: opts.schemaPolicy,
      allow_violations: opts.allowViolations,
      renumber: opts.renumber,
      base: opts.base,
      force: opts.force ?? false,
    }, opts);
  }

  /**
   * Send `ref` to `remote` and move the branch there, fast-forward only: only what the
   * remote lacks travels. A remote head `ref` does not descend from is refused with
   * NotFastForwardError (pull and merge first).
   */
  push(ref: string, remote: string, opts: PushOptions = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/push`, {
      remote,
      as: opts.as,
      checkpoints: opts.checkpoints ?? false,
      force_with_lease: opts.forceWithLease ?? false,
      force: opts.force ?? false,
    }, opts);
  }

  /**
   * Bring the remote's branch into `ref`: its head into `db@REMOTE~BRANCH`, then `ref` is
   * made, fast-forwarded or merged (the report's `merge` says how; conflicts publish nothing).
   */
  pull(ref: string, remote: string, opts: PullOptions = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/pull`, {
      remote,
      from: opts.from,
      strategy: opts.strategy,
      fetch_only: opts.fetchOnly ?? false,
      renumber: opts.renumber,
      force: opts.force ?? false,
    }, opts);
  }

  /** The other stores this one pushes to and pulls from: [{remote, location}]. */
  remotes(opts: CallOptions = {}): Promise<Array<{ remote: string; location: string }>> {
    return this.#json("GET", "/v1/remotes", undefined, opts);
  }

  addRemote(name: string, location: string, opts: CallOptions = {}): Promise<Json> {
    return this.#json("POST", "/v1/remotes", { name, location }, opts);
  }

  removeRemote(name: string, opts: CallOptions = {}): Promise<Json> {
    return this.#json("DELETE", `/v1/remotes/${q(name)}`, undefined, opts);
  }

  /** Reset the TTL clock; `ttl` sets ("2h") or clears ("") the TTL. */
  touch(ref: string, opts: CallOptions & { ttl?: string } = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/touch`, { ttl: opts.ttl }, opts);
  }

  protect(ref: string, protectedFlag: boolean, opts: CallOptions = {}): Promise<Json> {
    return this.#json("POST", `/v1/branches/${q(ref)}/protect`, { protected: protectedFlag }, opts);
  }

  diff(from: string, to: string, opts: DiffOptions = {}): Promise<Json> {
    let path = `/v1/diff?from=${q(from)}&to=${q(to)}`;
    if (opts.table) path += `&table=${q(opts.table)}`;
    if (opts.rows) path += `&rows=true&limit=${opts.limit ?? 100}`;
    if (opts.sql) path += "&sql=true";
    if (opts.working) path += "&working=true";
    return this.#json("GET", path, undefined, opts);
  }

  /** Write a version to a SQLite file on the daemon's host (unix socket only). */
  export(target: string, path: string, opts: CallOptions & { force?: boolean } = {}): Promise<Json> {
    return this.#json("POST", "/v1/export", { target, path, force: opts.force ?? false }, opts);
  }

  gc(opts: CallOptions & { grace?: string; force?: boolean } = {}): Promise<Json> {
    return this.#json("POST", "/v1/gc", { grace: opts.grace, force: opts.force ?? false }, opts);
  }

  /** Open a session: (fork,) checkout, lease and live capture in one call. */
  async openSession(opts: SessionOptions): Promise<Session> {
    const body = {
      db: opts.db,
      branch: opts.branch,
      fork_from: opts.forkFrom,
      ttl: opts.ttl,
      idle_timeout: opts.idleTimeout,
      ephemeral: opts.ephemeral ?? false,
      fork_ephemeral: opts.forkEphemeral,
      owner_pid: opts.ownerPid,
    };
    const v = await this.#json<{ id: string; branch: string; path: string; version: number }>("POST", "/v1/sessions", body, opts);
    return new Session(this, v.id, v.branch, v.path, v.version);
  }

  async sessions(opts: CallOptions = {}): Promise<SessionInfo[]> {
    return (await this.#json<{ sessions: SessionInfo[] }>("GET", "/v1/sessions", undefined, opts)).sessions;
  }

  session(id: string, opts: CallOptions = {}): Promise<SessionInfo> {
    return this.#json("GET", `/v1/sessions/${q(id)}`, undefined, opts);
  }

  flushSession(id: string, opts: CallOptions & { checkpoint?: string; meta?: Record<string, string> } = {}): Promise<FlushResult> {
    return this.#json("POST", `/v1/sessions/${q(id)}/flush`, { checkpoint: opts.checkpoint, meta: opts.meta ?? {} }, opts);
  }

  closeSession(id: string, opts: CallOptions = {}): Promise<ClosedSession> {
    return this.#json("DELETE", `/v1/sessions/${q(id)}`, undefined, opts);
  }

  /**
   * The daemon's events, as they happen (after event `since` first, when given). A dropped
   * connection is re-established with `Last-Event-ID`, so nothing is missed or repeated;
   * the iteration ends when `signal` aborts.
   */
  async *events(opts: { since?: number; signal?: AbortSignal; retryMs?: number } = {}): AsyncGenerator<ScionEvent> {
    let last = opts.since;
    while (!opts.signal?.aborted) {
      let res;
      try {
        const headers: Record<string, string> = { accept: "text/event-stream" };
        if (last !== undefined) headers["last-event-id"] = String(last);
        res = await open(this.connection, "GET", "/v1/events", undefined, { signal: opts.signal, headers });
      } catch (e) {
        if (opts.signal?.aborted) return;
        if (e instanceof ScionError && e.retryable) {
          await new Promise((r) => setTimeout(r, opts.retryMs ?? 500));
          continue;
        }
        throw e;
      }
      let buf = "";
      try {
        for await (const chunk of res) {
          buf += (chunk as Buffer).toString("utf8");
          let end;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            const data = block
              .split("\n")
              .filter((l) => l.startsWith("data:"))
              .map((l) => l.slice(5).trimStart())
              .join("\n");
            if (!data) continue;
            const event = JSON.parse(data) as ScionEvent;
            last = event.id;
            yield event;
          }
        }
      } catch (e) {
        if (opts.signal?.aborted) return;
        if (!(e instanceof Error) || !/aborted|ECONNRESET|socket hang up/.test(e.message)) throw e;
      }
      if (opts.signal?.aborted) return;
      // The stream ended (the daemon restarted or closed it): reconnect from `last`.
      await new Promise((r) => setTimeout(r, opts.retryMs ?? 500));
    }
  }
}
