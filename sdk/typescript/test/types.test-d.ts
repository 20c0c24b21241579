// Type tests: what compiles and what must not.
import { ScionClient, ScionError, BranchNotFoundError, type SessionInfo } from "../src/index.js";
import { freshDb, startDaemon, type FreshDb } from "../src/testkit.js";

async function typed(): Promise<void> {
  const c = new ScionClient({ socketPath: "/tmp/x.sock" });
  const dbs: string[] = await c.databases();
  const s = await c.openSession({ db: "shop", forkFrom: "main", ephemeral: true, signal: AbortSignal.timeout(1000) });
  const path: string = s.path;
  const info: SessionInfo = await s.info();
  const state: "open" | "fenced" | "closed" = info.state;
  const err: ScionError = new BranchNotFoundError({ code: "branch_not_found", message: "", retryable: false });
  const d = await startDaemon();
  const f: FreshDb = await freshDb(d, "shop");
  // @ts-expect-error: openSession needs a database
  await c.openSession({ branch: "x" });
  // @ts-expect-error: ownerPid is a pid or "peer"
  await c.openSession({ db: "x", ownerPid: "me" });
  // @ts-expect-error: flush returns a FlushResult, not a string
  const wrong: string = await s.flush();
  void [dbs, path, state, err, f, wrong];
}
void typed;
