// Errors of the scion daemon's API: one class per code (the same codes as the CLI's
// `--json` and exit codes), all subclasses of ScionError.

export interface ErrorBody {
  code: string;
  message: string;
  retryable: boolean;
  hint?: string | null;
  exit_code?: number;
}

export class ScionError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  readonly hint: string | undefined;
  readonly status: number;
  readonly exitCode: number | undefined;

  constructor(body: ErrorBody, status = 0) {
    super(body.message);
    this.name = new.target.name;
    this.code = body.code;
    this.retryable = body.retryable;
    this.hint = body.hint ?? undefined;
    this.status = status;
    this.exitCode = body.exit_code;
  }
}

/** `invalid_name` */
export class InvalidNameError extends ScionError {}

/** `not_initialized` */
export class NotInitializedError extends ScionError {}

/** `already_initialized` */
export class AlreadyInitializedError extends ScionError {}

/** `format_too_new` */
export class FormatTooNewError extends ScionError {}

/** `database_not_found` */
export class DatabaseNotFoundError extends ScionError {}

/** `database_exists` */
export class DatabaseExistsError extends ScionError {}

/** `branch_not_found` */
export class BranchNotFoundError extends ScionError {}

/** `branch_exists` */
export class BranchExistsError extends ScionError {}

/** `remote_not_found` */
export class RemoteNotFoundError extends ScionError {}

/** `remote_exists` */
export class RemoteExistsError extends ScionError {}

/** `not_fast_forward`: the remote's branch holds versions this store does not; pull and merge first */
export class NotFastForwardError extends ScionError {}

/** `remote_moved` */
export class RemoteMovedError extends ScionError {}

/** `tracking_branch`: only a pull moves a remote-tracking branch */
export class TrackingBranchError extends ScionError {}

/** `checkpoint_not_found` */
export class CheckpointNotFoundError extends ScionError {}

/** `checkpoint_exists` */
export class CheckpointExistsError extends ScionError {}

/** `reserved_name` */
export class ReservedNameError extends ScionError {}

/** `conflict` */
export class ConflictError extends ScionError {}

/** `dirty_checkout` */
export class DirtyCheckoutError extends ScionError {}

/** `unknown_checkout` */
export class UnknownCheckoutError extends ScionError {}

/** `stale_checkout` */
export class StaleCheckoutError extends ScionError {}

/** `checkout_busy` */
export class CheckoutBusyError extends ScionError {}

/** `checked_out`: the branch is written through its checkout file. */
export class CheckedOutError extends ScionError {}

/** `not_sqlite` */
export class NotSqliteError extends ScionError {}

/** `journal_leftovers` */
export class JournalLeftoversError extends ScionError {}

/** `checkpoint_target` */
export class CheckpointTargetError extends ScionError {}

/** `no_such_directory` */
export class NoSuchDirectoryError extends ScionError {}

/** `output_is_directory` */
export class OutputIsDirectoryError extends ScionError {}

/** `inside_store` */
export class InsideStoreError extends ScionError {}

/** `source_busy` */
export class SourceBusyError extends ScionError {}

/** `hot_journal` */
export class HotJournalError extends ScionError {}

/** `output_exists` */
export class OutputExistsError extends ScionError {}

/** `clone_unsupported` */
export class CloneUnsupportedError extends ScionError {}

/** `corrupt` */
export class CorruptError extends ScionError {}

/** `protected` */
export class ProtectedError extends ScionError {}

/** `lease_held` */
export class LeaseHeldError extends ScionError {}

/** `being_destroyed` */
export class BeingDestroyedError extends ScionError {}

/** `no_such_table` */
export class NoSuchTableError extends ScionError {}

/** `invalid_duration` */
export class InvalidDurationError extends ScionError {}

/** `nothing_to_undo` */
export class NothingToUndoError extends ScionError {}

/** `history_entry_not_found` */
export class HistoryEntryNotFoundError extends ScionError {}

/** `invalid_input` */
export class InvalidInputError extends ScionError {}

/** `segment_collision` */
export class SegmentCollisionError extends ScionError {}

/** `commit_expired` */
export class CommitExpiredError extends ScionError {}

/** `commit_lost` */
export class CommitLostError extends ScionError {}

/** `verify_failed` */
export class VerifyFailedError extends ScionError {}

/** `grace_below_minimum` */
export class GraceBelowMinimumError extends ScionError {}

/** `store_transient` */
export class StoreTransientError extends ScionError {}

/** `missing_data` */
export class MissingDataError extends ScionError {}

/** `unauthorized` */
export class UnauthorizedError extends ScionError {}

/** `store_config` */
export class StoreConfigError extends ScionError {}

/** `store_error` */
export class StoreErrorError extends ScionError {}

/** `sqlite_error` */
export class SqliteErrorError extends ScionError {}

/** `io_error` */
export class IoErrorError extends ScionError {}

/** `fenced` */
export class FencedError extends ScionError {}

/** `not_wal` */
export class NotWalError extends ScionError {}

/** `capture_unsettled` */
export class CaptureUnsettledError extends ScionError {}

/** `session_not_found` */
export class SessionNotFoundError extends ScionError {}

/** `no_such_endpoint` */
export class NoSuchEndpointError extends ScionError {}

/** `socket_only` */
export class SocketOnlyError extends ScionError {}

/** `forbidden` */
export class ForbiddenError extends ScionError {}

/** `request_in_progress` */
export class RequestInProgressError extends ScionError {}

/** `internal` */
export class InternalError extends ScionError {}

/** `daemon_unreachable` */
export class DaemonUnreachableError extends ScionError {}

/** `daemon_error` */
export class DaemonErrorError extends ScionError {}

const byCode: Record<string, new (body: ErrorBody, status?: number) => ScionError> = {
  invalid_name: InvalidNameError,
  not_initialized: NotInitializedError,
  already_initialized: AlreadyInitializedError,
  format_too_new: FormatTooNewError,
  database_not_found: DatabaseNotFoundError,
  database_exists: DatabaseExistsError,
  branch_not_found: BranchNotFoundError,
  branch_exists: BranchExistsError,
  remote_not_found: RemoteNotFoundError,
  remote_exists: RemoteExistsError,
  not_fast_forward: NotFastForwardError,
  remote_moved: RemoteMovedError,
  tracking_branch: TrackingBranchError,
  checkpoint_not_found: CheckpointNotFoundError,
  checkpoint_exists: CheckpointExistsError,
  reserved_name: ReservedNameError,
  conflict: ConflictError,
  dirty_checkout: DirtyCheckoutError,
  unknown_checkout: UnknownCheckoutError,
  stale_checkout: StaleCheckoutError,
  checkout_busy: CheckoutBusyError,
  checked_out: CheckedOutError,
  not_sqlite: NotSqliteError,
  journal_leftovers: JournalLeftoversError,
  checkpoint_target: CheckpointTargetError,
  no_such_directory: NoSuchDirectoryError,
  output_is_directory: OutputIsDirectoryError,
  inside_store: InsideStoreError,
  source_busy: SourceBusyError,
  hot_journal: HotJournalError,
  output_exists: OutputExistsError,
  clone_unsupported: CloneUnsupportedError,
  corrupt: CorruptError,
  protected: ProtectedError,
  lease_held: LeaseHeldError,
  being_destroyed: BeingDestroyedError,
  no_such_table: NoSuchTableError,
  invalid_duration: InvalidDurationError,
  invalid_input: InvalidInputError,
  nothing_to_undo: NothingToUndoError,
  history_entry_not_found: HistoryEntryNotFoundError,
  segment_collision: SegmentCollisionError,
  commit_expired: CommitExpiredError,
  commit_lost: CommitLostError,
  verify_failed: VerifyFailedError,
  grace_below_minimum: GraceBelowMinimumError,
  store_transient: StoreTransientError,
  missing_data: MissingDataError,
  unauthorized: UnauthorizedError,
  store_config: StoreConfigError,
  store_error: StoreErrorError,
  sqlite_error: SqliteErrorError,
  io_error: IoErrorError,
  fenced: FencedError,
  not_wal: NotWalError,
  capture_unsettled: CaptureUnsettledError,
  session_not_found: SessionNotFoundError,
  no_such_endpoint: NoSuchEndpointError,
  socket_only: SocketOnlyError,
  forbidden: ForbiddenError,
  request_in_progress: RequestInProgressError,
  internal: InternalError,
  daemon_unreachable: DaemonUnreachableError,
  daemon_error: DaemonErrorError,
};

/** The error class for `body.code` (ScionError itself for a code this version does not know). */
export function errorFor(body: ErrorBody, status = 0): ScionError {
  const C = byCode[body.code] ?? ScionError;
  return new C(body, status);
}

/** Every code this client knows. */
export const ERROR_CODES: readonly string[] = Object.keys(byCode);
