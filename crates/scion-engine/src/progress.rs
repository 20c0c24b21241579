//! Progress of long operations (imports, checkouts, exports, checkpoints of big files),
//! reported to whoever wants it. The library never draws anything itself.

use std::sync::Arc;

/// Receives progress of one phase at a time.
pub trait Progress: Send + Sync {
    /// A phase starts: `what` is a short verb ("reading", "writing"), `total` its pages.
    fn start(&self, what: &'static str, total: u64);
    /// `n` more pages done.
    fn advance(&self, n: u64);
    /// The phase is done.
    fn finish(&self);
}

/// Progress that goes nowhere.
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _: &'static str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// A shareable progress sink (for [`crate::EngineOptions`] and the working tree's options).
#[derive(Clone)]
pub struct ProgressSink(pub Arc<dyn Progress>);

impl Default for ProgressSink {
    fn default() -> Self {
        ProgressSink(Arc::new(Silent))
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

impl std::ops::Deref for ProgressSink {
    type Target = dyn Progress;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref()
    }
}
