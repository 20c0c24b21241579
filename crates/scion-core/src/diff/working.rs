//! A diff that takes a side's checkout file as it is, changes not checkpointed included,
//! as `git diff` takes the working tree: `scion diff --working`.
//!
//! The file has no page map, so nothing tells which of its pages differ: the committed
//! state of the file is read once, in one read transaction (other connections may keep
//! writing), into a temporary copy, and every page of both sides is compared. O(size),
//! where a diff of two versions is O(changed pages).

use std::io::Write;

use scion_engine::diff::{DiffOptions, DiffReport, WholeFile};
use scion_engine::progress::Silent;
use scion_engine::ResolvedVersion;

use crate::checkout::CheckoutState;
use crate::error::{CoreError, CoreResult, EngineError};
use crate::names::Target;
use crate::Scion;

/// One side of a working diff: its version, and the copy of its checkout's file when that
/// holds changes never checkpointed.
struct Side {
    version: ResolvedVersion,
    file: Option<WholeFile>,
    /// The temporary copy of the checkout, removed when the diff is done.
    _copy: Option<tempfile::NamedTempFile>,
}

impl Scion {
    /// [`Scion::diff`], with each side that is a branch head whose checkout holds changes
    /// not checkpointed taken from that file.
    pub fn diff_working(
        &self,
        left: &Target,
        right: &Target,
        opts: &DiffOptions,
    ) -> CoreResult<DiffReport> {
        let (a, b) = (self.working_side(left)?, self.working_side(right)?);
        if a.file.is_none() && b.file.is_none() {
            return self.diff(left, right, opts);
        }
        let (wa, wb) = (a.file.is_some(), b.file.is_some());
        let mut report = self.engine.diff_whole_files(
            (left, &a.version, a.file),
            (right, &b.version, b.file),
            opts,
        )?;
        report.working_files = [(left, wa), (right, wb)]
            .into_iter()
            .filter(|(_, w)| *w)
            .map(|(t, _)| t.branch.to_string())
            .collect();
        Ok(report)
    }

    fn working_side(&self, t: &Target) -> CoreResult<Side> {
        let v = self.engine.resolve(t)?;
        let committed = |version: ResolvedVersion| Side {
            version,
            file: None,
            _copy: None,
        };
        if t.checkpoint.is_some() {
            return Ok(committed(v));
        }
        if !matches!(
            self.checkout_state(&t.branch, &v.root)?,
            CheckoutState::Dirty | CheckoutState::Unknown
        ) {
            return Ok(committed(v));
        }
        let path = self.checkout_path(&t.branch);
        let mut copy =
            tempfile::NamedTempFile::new().map_err(|e| CoreError::io(std::env::temp_dir(), e))?;
        let info = scion_engine::sqlite_io::read_snapshot(&path, true, &Silent, |_, page| {
            copy.write_all(page)
                .map_err(|e| EngineError::io(copy.path(), e))
        })?;
        copy.flush().map_err(|e| CoreError::io(copy.path(), e))?;
        let file = copy.reopen().map_err(|e| CoreError::io(copy.path(), e))?;
        Ok(Side {
            version: v,
            file: Some(WholeFile {
                file,
                page_size: info.page_size,
                page_count: info.page_count,
            }),
            _copy: Some(copy),
        })
    }
}
