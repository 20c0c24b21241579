export { ScionClient, Session } from "./client.js";
export type { ClosedSession, DiffOptions, FlushResult, ForkOptions, Json, MergeOptions, MoveOptions, ScionEvent, SessionInfo, SessionOptions } from "./client.js";
export * from "./errors.js";
export type { CallOptions, Connection } from "./transport.js";
