// HTTP/1.1 over the daemon's unix socket (or TCP with a bearer token), with node:http and
// nothing else.

import * as http from "node:http";
import { errorFor, ScionError } from "./errors.js";

/** Where the daemon listens: its unix socket (the default), or a TCP URL with a token. */
export interface Connection {
  /** The unix socket (default: SCION_SOCKET). */
  socketPath?: string;
  /** `http://host:port` of a daemon started with `--listen`. */
  url?: string;
  /** The bearer token TCP needs. */
  token?: string;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Sent as `Idempotency-Key`: a retry with the same key gets the first answer again. */
  idempotencyKey?: string;
}

export interface Reply {
  status: number;
  body: unknown;
  headers: http.IncomingHttpHeaders;
}

function base(conn: Connection): http.RequestOptions {
  if (conn.url) {
    const u = new URL(conn.url);
    return { host: u.hostname, port: u.port || 80, headers: conn.token ? { authorization: `Bearer ${conn.token}` } : {} };
  }
  const socketPath = conn.socketPath ?? process.env.SCION_SOCKET;
  if (!socketPath) {
    throw new ScionError({
      code: "daemon_unreachable",
      message: "no daemon socket: pass socketPath or set SCION_SOCKET",
      retryable: false,
      hint: "`scion serve` prints its socket",
    });
  }
  return { socketPath, headers: {} };
}

/** Open a request; the response is handed over as it starts (for streams). */
export function open(
  conn: Connection,
  method: string,
  path: string,
  body: unknown,
  opts: CallOptions & { headers?: Record<string, string> } = {},
): Promise<http.IncomingMessage> {
  const o = base(conn);
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const headers: Record<string, string | number> = { host: "scion", ...(o.headers as Record<string, string>), ...(opts.headers ?? {}) };
  if (payload) {
    headers["content-type"] = "application/json";
    headers["content-length"] = payload.length;
  }
  if (opts.idempotencyKey) headers["idempotency-key"] = opts.idempotencyKey;
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) {
      reject(opts.signal.reason ?? new DOMException("aborted", "AbortError"));
      return;
    }
    const req = http.request({ ...o, method, path, headers, signal: opts.signal }, resolve);
    req.on("error", (e: NodeJS.ErrnoException) => {
      if (e.name === "AbortError") return reject(opts.signal?.reason ?? e);
      if (e.code === "ENOENT" || e.code === "ECONNREFUSED") {
        return reject(
          new ScionError({
            code: "daemon_unreachable",
            message: `cannot reach the daemon: ${e.message}`,
            retryable: true,
            hint: "start it with `scion serve`, or point SCION_SOCKET at its socket",
          }),
        );
      }
      reject(e);
    });
    if (payload) req.write(payload);
    req.end();
  });
}

/** One request, its whole answer; an error status throws the code's ScionError subclass. */
export async function call(conn: Connection, method: string, path: string, body?: unknown, opts: CallOptions = {}): Promise<Reply> {
  const res = await open(conn, method, path, body, opts);
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* text bodies (metrics, health) stay text */
  }
  const status = res.statusCode ?? 0;
  if (status >= 400) {
    const e = (parsed as { error?: { code: string; message: string; retryable: boolean; hint?: string; exit_code?: number } })?.error;
    throw errorFor(e ?? { code: "daemon_error", message: `status ${status}: ${text}`, retryable: false }, status);
  }
  return { status, body: parsed, headers: res.headers };
}
