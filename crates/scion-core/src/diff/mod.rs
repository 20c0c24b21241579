//! `diff` in the working tree: the engine's diff of two versions, read from clean checkout
//! files where they hold a side, and told which sides' checkouts hold unsaved changes.

mod working;

pub use scion_engine::diff::*;
use scion_engine::{ResolvedVersion, Target};

use crate::checkout::CheckoutState;
use crate::error::CoreResult;
use crate::Scion;

impl Scion {
    /// Rows and schema changed between two versions, read from clean checkouts of either
    /// side where there are any; sides whose checkout holds changes never checkpointed are
    /// named in the report (those changes are not in the diff: see `diff_working`).
    pub fn diff(
        &self,
        left: &Target,
        right: &Target,
        opts: &DiffOptions,
    ) -> CoreResult<DiffReport> {
        let (lv, rv) = (self.engine.resolve(left)?, self.engine.resolve(right)?);
        let mut unsaved = Vec::new();
        for (t, v) in [(left, &lv), (right, &rv)] {
            if t.checkpoint.is_none()
                && matches!(
                    self.checkout_state(&t.branch, &v.root)?,
                    CheckoutState::Dirty | CheckoutState::Unknown
                )
                && !unsaved.contains(&t.branch.to_string())
            {
                unsaved.push(t.branch.to_string());
            }
        }
        // A clean checkout of either side is read locally instead of from the store.
        let local = |t: &Target, v: &ResolvedVersion| {
            self.clean_file(t, v).and_then(|c| {
                c.open()
                    .map(|file| LocalCopy::new(file, move || c.still_clean()))
            })
        };
        let (la, lb) = (local(left, &lv), local(right, &rv));
        let mut report = self
            .engine
            .diff_versions((left, &lv, la), (right, &rv, lb), opts)?;
        report.unsaved_checkouts = unsaved;
        Ok(report)
    }
}
