//! How the working tree's errors are presented by every front end: the engine's words
//! (`scion-described`, re-exported here) and those about this host's checkout files.

pub use scion_described::*;

use crate::error::CoreError;
use crate::names::BranchRef;

/// How `e` is presented when the command `context` failed.
pub fn describe(e: &CoreError, context: Context) -> Described {
    use CoreError::*;
    let d = |exit, code, hint: Option<String>| Described { exit, code, hint };
    match e {
        Engine(e) => describe_engine(e),
        DirtyCheckout { branch, .. } => d(Exit::Refused, "dirty_checkout", Some(unsaved_hint(branch, context, &format!("keep the changes with `scion checkpoint {branch} <name>`, or discard them with `scion checkout {branch} --force`")))),
        // A file scion has no record of cannot be checkpointed: keeping it means moving it.
        UnknownCheckout { branch, .. } => d(Exit::Refused, "unknown_checkout", Some(match context.discarding_command() {
            Some(cmd) => format!("move the file away to keep it, or repeat `scion {cmd}` with --force to discard it"),
            None if context == Context::Release => format!("move the file away to keep it, or discard it with `scion checkout {branch} --release --force`"),
            None => format!("move the file away to keep it, or replace it with `scion checkout {branch} --force`"),
        })),
        StaleCheckout { branch, path } => d(Exit::Refused, "stale_checkout", Some(format!(
            "its changes were made on an older head and cannot be checkpointed; to keep them, copy the file with its WAL (`sqlite3 {} '.backup kept.db'`; `scion create <db> --from kept.db` makes a database of it), then {}",
            shell_quoted(path),
            match context.discarding_command() {
                Some(cmd) => format!("repeat `scion {cmd}` with --force"),
                None if context == Context::Release => format!("`scion checkout {branch} --release --force` removes it"),
                None => format!("`scion checkout {branch} --force` brings the head"),
            }
        ))),
        CheckoutBusy { .. } => d(Exit::Refused, "checkout_busy", Some("close the connections that have it open and retry".into())),
        JournalLeftovers { .. } => d(Exit::Refused, "journal_leftovers", Some("they may belong to another database that was deleted; remove them, or pass --force to have them removed".into())),
        NoSuchDirectory { .. } => d(Exit::InvalidInput, "no_such_directory", Some("create the directory first (scion does not create directories for exports)".into())),
        OutputIsDirectory { .. } => d(Exit::InvalidInput, "output_is_directory", None),
        InsideStore { .. } => d(Exit::InvalidInput, "inside_store", Some("write exports outside the store directory and the checkouts directories".into())),
        OutputExists { .. } => d(Exit::AlreadyExists, "output_exists", Some("pass --force to replace it".into())),
        CloneUnsupported { .. } => d(Exit::Unsupported, "clone_unsupported", Some("use --clone auto on this filesystem, or put checkouts on XFS/btrfs".into())),
    }
}

/// What to do about a checkout holding changes, said for the command that refused.
fn unsaved_hint(branch: &BranchRef, context: Context, discard_with_checkout: &str) -> String {
    if context == Context::Merge {
        return format!(
            "keep the changes with `scion checkpoint {branch} <name>` first, then merge again"
        );
    }
    if context == Context::Release {
        return format!(
            "keep the changes with `scion checkpoint {branch} <name>` first, or discard them with `scion checkout {branch} --release --force`"
        );
    }
    match context.discarding_command() {
        Some(cmd) => format!(
            "keep the changes with `scion checkpoint {branch} <name>` first, or repeat `scion {cmd}` with --force to discard them"
        ),
        None => discard_with_checkout.to_string(),
    }
}

impl DescribedError for CoreError {
    fn describe(&self, context: Context) -> Described {
        describe(self, context)
    }

    fn is_retryable(&self) -> bool {
        CoreError::is_retryable(self)
    }

    fn engine_error(&self) -> Option<&crate::EngineError> {
        match self {
            CoreError::Engine(e) => Some(e),
            _ => None,
        }
    }
}
