//! A diff that takes a side's checkout file as it is, changes not checkpointed included,
//! as `git diff` takes the working tree: `scion diff --working`.
//!
//! The file has no page map, so nothing tells which of its pages differ: the committed
//! state of the file is read once, in one read transaction (other connections may keep
//! writing), into a temporary copy, and every page of both sides is compared. O(size),
//! where a diff of two versions is O(changed pages).

use std::collections::BTreeSet;
use std::io::Write;

use crate::checkout::CheckoutState;
use crate::error::{CoreError, CoreResult, EngineError};
use crate::format::RootRecord;
use crate::names::Target;
use crate::pagemap::DEFAULT_FANOUT_BITS;
use crate::progress::Silent;
use crate::Scion;

use super::report::{DiffOptions, DiffReport};

/// One side of a working diff: its pages, and where they come from.
struct Side {
    root: RootRecord,
    file: Option<std::fs::File>,
    /// The temporary copy of the checkout, removed when the diff is done.
    _copy: Option<tempfile::NamedTempFile>,
    working: bool,
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
        if !a.working && !b.working {
            return self.diff(left, right, opts);
        }
        let pages = a.root.page_count.max(b.root.page_count);
        let every: BTreeSet<u32> = (1..=pages).collect();
        let mut report = self.diff_pages(
            left,
            right,
            opts,
            &every,
            (a.root, a.file),
            (b.root, b.file),
        )?;
        report.working_files = [(left, a.working), (right, b.working)]
            .into_iter()
            .filter(|(_, w)| *w)
            .map(|(t, _)| t.branch.to_string())
            .collect();
        Ok(report)
    }

    fn working_side(&self, t: &Target) -> CoreResult<Side> {
        let v = self.engine.resolve(t)?;
        let committed = |s: &Scion| -> CoreResult<Side> {
            Ok(Side {
                root: s.engine.reader.root(&v.root)?,
                file: None,
                _copy: None,
                working: false,
            })
        };
        if t.checkpoint.is_some() {
            return committed(self);
        }
        if !matches!(
            self.checkout_state(&t.branch, &v.root)?,
            CheckoutState::Dirty | CheckoutState::Unknown
        ) {
            return committed(self);
        }
        let path = self.checkout_path(&t.branch);
        let mut copy =
            tempfile::NamedTempFile::new().map_err(|e| CoreError::io(std::env::temp_dir(), e))?;
        let info = crate::sqlite_io::read_snapshot(&path, true, &Silent, |_, page| {
            copy.write_all(page)
                .map_err(|e| EngineError::io(copy.path(), e))
        })?;
        copy.flush().map_err(|e| CoreError::io(copy.path(), e))?;
        let file = copy.reopen().map_err(|e| CoreError::io(copy.path(), e))?;
        Ok(Side {
            root: RootRecord {
                fanout_bits: DEFAULT_FANOUT_BITS,
                depth: 0,
                page_size: info.page_size,
                page_count: info.page_count,
                change_counter: 0,
                db_checksum: 0,
                node: None,
                ancestry: None,
            },
            file: Some(file),
            _copy: Some(copy),
            working: true,
        })
    }
}
