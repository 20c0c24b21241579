//! Clean local files of a version: a checkout or read-only checkout whose record proves,
//! from `stat` alone, that it holds exactly that version, so readers can use it instead of
//! the store.

use std::path::PathBuf;

use super::sidecar::{Fingerprint, RecordHeader};
use crate::names::Target;
use crate::{ResolvedVersion, Scion};

/// A file proven to hold one version, and the record that proves it.
#[derive(Debug)]
pub(crate) struct CleanFile {
    pub path: PathBuf,
    record: RecordHeader,
}

impl CleanFile {
    /// Whether the record still proves the file unmodified (checked again after a read, so
    /// a write that raced it is never taken for the version).
    pub(crate) fn still_clean(&self) -> bool {
        Fingerprint::of(&self.path)
            .ok()
            .flatten()
            .is_some_and(|fp| self.record.proves_unmodified(&fp))
    }

    pub(crate) fn open(&self) -> Option<std::fs::File> {
        std::fs::File::open(&self.path).ok()
    }
}

impl Scion {
    /// Whether the checkout of `b` may hold writes its record does not account for, told
    /// from `stat` and the record's header alone (never by reading the file): a file
    /// without a record, or one whose fingerprint moved since the record was written.
    pub fn checkout_maybe_written(&self, b: &crate::names::BranchRef) -> crate::CoreResult<bool> {
        let path = self.checkout_path(b);
        let Some(fp) = Fingerprint::of(&path)? else {
            return Ok(false);
        };
        if RecordHeader::proving(&path, &fp)?.is_some() {
            return Ok(false);
        }
        if super::sidecar::Sidecar::pending_path_for(&path).exists() {
            return Ok(true);
        }
        // Recorded just now (a session closed a moment ago): the same fingerprint, only
        // too recent for the racily-clean rule, is no reason to warn.
        Ok(!RecordHeader::read(&path)?.is_some_and(|h| h.same_fingerprint(&fp)))
    }

    /// A clean local file holding the version `v` that `t` names: the branch's checkout or
    /// a read-only checkout of it. Records are read without adopting or removing anything.
    pub(crate) fn clean_file(&self, t: &Target, v: &ResolvedVersion) -> Option<CleanFile> {
        let candidates = [self.checkout_path(&t.branch), self.read_only_path(t, v)];
        candidates.into_iter().find_map(|path| {
            if scion_engine::live::is_live(&path) {
                return None;
            }
            let fp = Fingerprint::of(&path).ok().flatten()?;
            let record = RecordHeader::proving(&path, &fp).ok().flatten()?;
            (record.root == v.root).then_some(CleanFile { path, record })
        })
    }
}
