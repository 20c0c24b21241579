//! Writes the frames of one commit (or import) into new segments, sealing a segment and
//! starting another when it grows past a size bound, so memory stays bounded and no single
//! object gets huge. A writer that stops part way leaves its sealed segments behind: they
//! are unreachable, and GC removes them after the grace period (see the `commit` module).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use scion_store::{Backend, PutMode, StoreError};

use crate::clock::unix_ms;
use crate::error::{EngineError, EngineResult};
use crate::format::{
    encode_page_frame, FrameKind, Locator, Node, PageCompression, RootRecord, SegmentBuilder,
    SegmentId, Slot,
};

/// A segment is sealed once it holds this many bytes.
pub(crate) const MAX_SEGMENT_BYTES: usize = 64 << 20;

/// What a commit cost in the store.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct WriteStats {
    /// Objects written (segments, refs, checkpoints).
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Page frames written.
    pub pages: u64,
}

pub(crate) struct VersionWriter<'a> {
    backend: &'a Arc<dyn Backend>,
    compression: PageCompression,
    current: SegmentBuilder,
    max_segment_bytes: usize,
    pub stats: WriteStats,
    pub segments: Vec<SegmentId>,
    /// Nodes written by this writer, readable before their segment is sealed.
    nodes: HashMap<Locator, Node>,
}

impl<'a> VersionWriter<'a> {
    /// A writer that stores full page frames as `compression` says.
    pub fn new(backend: &'a Arc<dyn Backend>, compression: PageCompression) -> Self {
        Self::with_limit(backend, compression, MAX_SEGMENT_BYTES)
    }

    pub fn with_limit(
        backend: &'a Arc<dyn Backend>,
        compression: PageCompression,
        max_segment_bytes: usize,
    ) -> Self {
        Self {
            backend,
            compression,
            current: new_builder(),
            max_segment_bytes,
            stats: WriteStats::default(),
            segments: Vec::new(),
            nodes: HashMap::new(),
        }
    }

    pub fn add(&mut self, kind: FrameKind, key: u64, raw: &[u8]) -> EngineResult<(Locator, u64)> {
        if kind == FrameKind::Page {
            // Pages follow the store's compression; nodes and roots are always lz4 (small,
            // and read once per version, not once per page).
            let (slot, hash) = self.add_page(key as u32, raw, None)?;
            return Ok((slot.loc, hash));
        }
        if self.current.len() >= self.max_segment_bytes {
            self.seal()?;
        }
        Ok(self.current.add(kind, key, raw))
    }

    /// Add a page-map node; it stays readable through [`Self::node`] until `finish`.
    pub(crate) fn add_node(&mut self, node: Node) -> EngineResult<Locator> {
        let (loc, _) = self.add(FrameKind::Node, node.level as u64, &node.encode())?;
        self.nodes.insert(loc, node);
        Ok(loc)
    }

    /// A node this writer added (not yet necessarily in the store).
    pub fn node(&self, loc: &Locator) -> Option<&Node> {
        self.nodes.get(loc)
    }

    /// Add a page, as a delta against `base` (its full frame's locator and content) when
    /// that is much smaller. Returns the page's slot and hash.
    pub(crate) fn add_page(
        &mut self,
        pgno: u32,
        raw: &[u8],
        base: Option<(Locator, &[u8])>,
    ) -> EngineResult<(Slot, u64)> {
        if self.current.len() >= self.max_segment_bytes {
            self.seal()?;
        }
        self.stats.pages += 1;
        let (frame, hash, is_delta) =
            encode_page_frame(pgno, raw, base.map(|(_, b)| b), self.compression);
        let loc = self
            .current
            .add_encoded(FrameKind::Page, pgno as u64, &frame);
        let base = if is_delta { base.map(|(l, _)| l) } else { None };
        Ok((Slot { loc, base }, hash))
    }

    fn seal(&mut self) -> EngineResult<()> {
        let builder = std::mem::replace(&mut self.current, new_builder());
        let id = builder.id();
        let bytes = builder.finish();
        match crate::conditional::put_exact(
            self.backend.as_ref(),
            &id.key(),
            &bytes,
            PutMode::Create,
        ) {
            Ok(_) => {}
            Err(StoreError::AlreadyExists { .. }) => {
                return Err(EngineError::SegmentCollision { id: id.to_string() })
            }
            Err(e) => return Err(e.into()),
        }
        self.stats.objects += 1;
        self.stats.bytes += bytes.len() as u64;
        self.segments.push(id);
        Ok(())
    }

    /// Add the root record, seal the last segment and return the root's locator. The
    /// version is durable once this returns; it is published only by a ref write.
    pub fn finish(
        mut self,
        root: &RootRecord,
    ) -> EngineResult<(Locator, WriteStats, Vec<SegmentId>)> {
        let (loc, _) = self.current.add(FrameKind::Root, 0, &root.encode());
        self.seal()?;
        Ok((loc, self.stats, std::mem::take(&mut self.segments)))
    }
}

fn new_builder() -> SegmentBuilder {
    SegmentBuilder::new(SegmentId::random(), unix_ms(SystemTime::now()))
}
