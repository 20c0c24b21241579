//! Commit a set of changed pages onto a branch head: what live capture (the daemon's
//! sessions) and anything else that already knows which pages changed uses. The cost is
//! O(changed pages): the new version path-copies the page map, and its whole-database
//! checksum is updated from the old and new hashes of the changed pages alone.

use std::collections::{BTreeMap, BTreeSet};

use scion_store::ETag;
use serde::Serialize;

use crate::commit::Commit;
use crate::error::{EngineError, EngineResult};
use crate::format::{page_contribution, page_hash, Locator, Parents, RootRecord, Slot};
use crate::history::{HeadMove, HeadOp};
use crate::names::{BranchRef, CheckpointName};
use crate::ops::spill::SpilledPages;
use crate::pagemap::{depth_for, leaves, lookup, Changes, TreeUpdate};
use crate::refs::Ref;
use crate::writer::WriteStats;
use crate::Engine;

/// At most this many pages of one commit are stored as deltas: each costs a read of its
/// base, which pays off for small commits and not for bulk rewrites.
pub(crate) const MAX_DELTA_PAGES: usize = 256;

/// The pages that changed since a head, with the database's size after the change.
#[derive(Debug, Clone, Default)]
pub struct PageChanges {
    /// The database's page size in bytes.
    pub page_size: u32,
    /// The database's size in pages after the change; pages above it cease to exist.
    pub page_count: u32,
    /// New images by page number (1-based), page 1 normalized (bytes 18/19 = 1). Pages
    /// above `page_count` must not be present.
    pub pages: BTreeMap<u32, Vec<u8>>,
    /// More new images, set aside in a temporary file; a page is in `pages` or here, not
    /// in both.
    pub spilled: SpilledPages,
}

impl PageChanges {
    /// Whether no page changed.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty() && self.spilled.is_empty()
    }

    /// The bytes of every changed page, in memory and set aside.
    pub fn bytes(&self) -> u64 {
        self.pages.values().map(|p| p.len() as u64).sum::<u64>() + self.spilled.bytes()
    }

    /// Every changed page number, in order.
    fn pgnos(&self) -> Vec<u32> {
        let mut all: Vec<u32> = self
            .pages
            .keys()
            .copied()
            .chain(self.spilled.pgnos())
            .collect();
        all.sort_unstable();
        all
    }

    /// The new image of `pgno` (one of [`Self::pgnos`]).
    fn page(&self, pgno: u32) -> EngineResult<std::borrow::Cow<'_, [u8]>> {
        if let Some(p) = self.pages.get(&pgno) {
            return Ok(std::borrow::Cow::Borrowed(p));
        }
        self.spilled
            .get(pgno)?
            .map(std::borrow::Cow::Owned)
            .ok_or_else(|| EngineError::InvalidInput {
                reason: format!("page {pgno} is not among the changes"),
            })
    }
}

/// Makes the `meta` entries a new version's ref carries, given the version's root.
pub(crate) type MetaFor<'a> = &'a dyn Fn(&Locator) -> BTreeMap<String, String>;

/// One commit of changed pages onto a branch head, for [`Engine::commit_pages`](crate::Engine::commit_pages): the head
/// it builds on (as read, with the etag to compare-and-swap) and the changes, plus what
/// only some writers have (the old pages' hashes, entries for the ref's `meta`), each
/// optional.
pub struct PageCommit<'a> {
    branch: &'a BranchRef,
    base: &'a Ref,
    etag: ETag,
    changes: &'a PageChanges,
    known_hash: Option<&'a dyn Fn(u32) -> Option<u64>>,
    meta: Option<MetaFor<'a>>,
    writer: PageWriter,
}

/// Who commits the pages: a page writer of its own (the VFS), or the capturer of the
/// branch's checkout file, whose changes these are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum PageWriter {
    /// Refused while the branch is checked out anywhere ([`EngineError::CheckedOut`]).
    #[default]
    Own,
    /// The pages come from the branch's checkout file.
    Checkout,
}

impl<'a> PageCommit<'a> {
    /// Commit `changes` onto `base`, the head of `branch` read with `etag`.
    pub fn onto(
        branch: &'a BranchRef,
        base: &'a Ref,
        etag: ETag,
        changes: &'a PageChanges,
    ) -> Self {
        PageCommit {
            branch,
            base,
            etag,
            changes,
            known_hash: None,
            meta: None,
            writer: PageWriter::Own,
        }
    }

    /// The hash a page had in `base`, where the caller knows it (a capturer keeps a
    /// table); without it, a changed page's old hash is read from the store.
    pub fn with_known_hashes(mut self, known: &'a dyn Fn(u32) -> Option<u64>) -> Self {
        self.known_hash = Some(known);
        self
    }

    /// Entries to set on the ref's `meta`, made for the new version's root, in the same
    /// compare-and-swap (a capture cursor travels with the version it describes).
    pub fn with_meta(mut self, meta: MetaFor<'a>) -> Self {
        self.meta = Some(meta);
        self
    }

    /// The pages are the branch's checkout file's changes (a capturer): committed even
    /// though the branch is checked out.
    pub fn from_checkout(mut self) -> Self {
        self.writer = PageWriter::Checkout;
        self
    }
}

/// Refuse a page writer of its own on a branch that is checked out: its file would go
/// stale under it, and its changes could no longer be checkpointed.
pub fn refuse_checked_out(b: &BranchRef, r: &Ref) -> EngineResult<()> {
    if r.checkouts.is_empty() {
        return Ok(());
    }
    Err(EngineError::CheckedOut {
        branch: b.clone(),
        checkouts: r.checkouts.iter().map(|c| c.to_string()).collect(),
    })
}

/// What a page commit made.
#[derive(Debug, Clone, Serialize)]
pub struct PagesCommitted {
    /// The new head's number.
    pub version: u64,
    /// The new head's root record.
    #[serde(skip)]
    pub root: Locator,
    /// Pages that differed from the head's and were written.
    pub pages: u64,
    /// The new version's number of pages.
    pub page_count: u32,
    /// What writing it cost the store.
    pub store: WriteStats,
    /// New hash of every page written (page number, hash), for the caller's hash table.
    #[serde(skip)]
    pub hashes: Vec<(u32, u64)>,
}

impl Engine {
    /// The hash of every page of the version at `root` (an absent page hashes as zeros),
    /// read from the store: O(size), for a caller that lost its own table.
    pub fn page_hashes(&self, root: &Locator) -> EngineResult<Vec<u64>> {
        let rec = self.reader.root(root)?;
        let zero = page_hash(&vec![0u8; rec.page_size as usize]);
        let mut hashes = vec![zero; rec.page_count as usize];
        let slots = leaves(&self.reader, rec.node, rec.depth, rec.fanout_bits)?
            .into_iter()
            .map(|(idx, slot)| (slot, idx + 1))
            .collect();
        self.reader.for_each_page(slots, |page| {
            hashes[*page.tag as usize - 1] = page.hash;
            Ok(())
        })?;
        Ok(hashes)
    }

    /// How the version at `root` is stored: its root record, and the frame holding each
    /// page that is present (page numbers from 1), read from the store in O(size). For
    /// tools and tests that look at a version's layout (which pages are deltas).
    pub fn page_slots(&self, root: &Locator) -> EngineResult<(RootRecord, Vec<(u32, Slot)>)> {
        let rec = self.reader.root(root)?;
        let slots = leaves(&self.reader, rec.node, rec.depth, rec.fanout_bits)?
            .into_iter()
            .map(|(idx, slot)| (idx + 1, slot))
            .collect();
        Ok((rec, slots))
    }

    /// The pages (numbered from 1) where the versions at `a` and `b` differ, found from
    /// their page maps: only map nodes that differ are read, no page.
    pub fn changed_pages(&self, a: &Locator, b: &Locator) -> EngineResult<BTreeSet<u32>> {
        let (a, b) = (self.reader.root(a)?, self.reader.root(b)?);
        crate::diff::pages::changed_pages(&self.reader, &a, &b)
    }

    /// Read pages `pgnos` of the version at `root` from the store (not through the page
    /// cache), each with its hash, in an order that suits the store (a page the version
    /// does not hold reads as zeros). A page whose frame is not of the version's page size
    /// is damage.
    pub fn for_each_page_of(
        &self,
        root: &Locator,
        pgnos: &BTreeSet<u32>,
        mut f: impl FnMut(u32, Vec<u8>, u64) -> EngineResult<()>,
    ) -> EngineResult<()> {
        let rec = self.reader.root(root)?;
        let page_size = rec.page_size as usize;
        let mut slots = Vec::new();
        for &pgno in pgnos {
            let slot = if pgno <= rec.page_count {
                lookup(&self.reader, rec.node, rec.depth, rec.fanout_bits, pgno - 1)?
            } else {
                None
            };
            match slot {
                Some(slot) => slots.push((slot, pgno)),
                None => {
                    let zero = vec![0u8; page_size];
                    let hash = page_hash(&zero);
                    f(pgno, zero, hash)?;
                }
            }
        }
        self.reader.for_each_page(slots, |frame| {
            let pgno = *frame.tag;
            if frame.raw.len() != page_size {
                return Err(EngineError::corrupt(
                    format!("version {root}"),
                    format!("page {pgno} is {} bytes", frame.raw.len()),
                ));
            }
            f(pgno, frame.raw, frame.hash)
        })
    }

    /// Name the version `root` (number `version`) of `b` as checkpoint `name`, with
    /// `meta`: what a writer that committed the version itself (a capture flush) uses.
    pub fn name_version(
        &self,
        b: &BranchRef,
        name: &CheckpointName,
        root: Locator,
        version: u64,
        meta: BTreeMap<String, String>,
    ) -> EngineResult<()> {
        self.check_checkpoint_name(b, name, &meta)?;
        self.bind_checkpoint(b, name, root, version, meta)
            .map(|_| ())
    }

    /// Commit a set of changed pages through the one commit path. A head that moved, or
    /// a lease that changed hands, is a [`EngineError::Conflict`]: the caller has been
    /// fenced.
    pub fn commit_pages(&self, c: PageCommit<'_>) -> EngineResult<(Ref, ETag, PagesCommitted)> {
        let PageCommit {
            branch: b,
            base,
            etag,
            changes,
            known_hash,
            meta,
            writer,
        } = c;
        let admit = |r: &Ref| match writer {
            PageWriter::Own => refuse_checked_out(b, r),
            PageWriter::Checkout => Ok(()),
        };
        admit(base)?;
        // A page's old hash, for the whole-database checksum, is the one its frame
        // records: a caller's table (a capturer keeps one) is only a cross-check, since a
        // table out of step with `base` would leave a checksum no read can match.
        let old_hash = |slot: &Slot, pgno: u32| -> EngineResult<u64> {
            let stored = self.reader.page_hash_at(slot, pgno)?;
            if let Some(known) = known_hash.and_then(|f| f(pgno)) {
                if known != stored {
                    tracing::warn!(branch = %b, pgno, "the writer's page-hash table was out of step with the head; the stored hash is used");
                }
            }
            Ok(stored)
        };
        let old = self.reader.root(&base.root)?;
        if changes.page_size != old.page_size && old.page_count > 0 {
            return Err(EngineError::InvalidInput {
                reason: format!(
                    "page size {} differs from the branch's {}",
                    changes.page_size, old.page_size
                ),
            });
        }
        let last = changes
            .pages
            .last_key_value()
            .map(|(&p, _)| p)
            .max(changes.spilled.last());
        if let Some(last) = last {
            if last > changes.page_count {
                return Err(EngineError::InvalidInput {
                    reason: format!(
                        "page {last} is past the database's end ({} pages)",
                        changes.page_count
                    ),
                });
            }
        }
        let zero = page_hash(&vec![0u8; changes.page_size as usize]);
        let (sealed, hashes) = crate::retry::with_fresh_ids(|| {
            let mut commit = Commit::begin(self)?;
            let writer = &mut commit.writer;
            let mut tree: Changes = BTreeMap::new();
            let mut checksum = old.db_checksum;
            let mut hashes = Vec::with_capacity(changes.pages.len() + changes.spilled.len());
            let mut deltas = 0;
            for pgno in changes.pgnos() {
                let page = changes.page(pgno)?;
                let page = page.as_ref();
                let hash = page_hash(page);
                let slot = if pgno <= old.page_count {
                    lookup(&self.reader, old.node, old.depth, old.fanout_bits, pgno - 1)?
                } else {
                    None
                };
                let mut base_frame = None;
                let previous = match &slot {
                    None => zero,
                    Some(s) => old_hash(s, pgno)?,
                };
                if previous == hash {
                    continue;
                }
                checksum = checksum
                    .wrapping_sub(page_contribution(pgno, previous, zero))
                    .wrapping_add(page_contribution(pgno, hash, zero));
                hashes.push((pgno, hash));
                if hash == zero {
                    tree.insert(pgno - 1, None);
                    continue;
                }
                if let Some(s) = slot.filter(|_| deltas < MAX_DELTA_PAGES) {
                    base_frame = Some(self.reader.delta_base(&s, pgno)?);
                }
                let (slot, _) = writer.add_page(
                    pgno,
                    page,
                    base_frame.as_ref().map(|(l, r)| (*l, r.as_slice())),
                )?;
                if slot.base.is_some() {
                    deltas += 1;
                }
                tree.insert(pgno - 1, Some(slot));
            }
            // Pages past a shrunk end leave the checksum with their old hashes.
            for pgno in changes.page_count + 1..=old.page_count {
                let Some(slot) =
                    lookup(&self.reader, old.node, old.depth, old.fanout_bits, pgno - 1)?
                else {
                    continue;
                };
                let previous = old_hash(&slot, pgno)?;
                checksum = checksum.wrapping_sub(page_contribution(pgno, previous, zero));
            }
            let update = TreeUpdate {
                reader: &self.reader,
                fanout_bits: old.fanout_bits,
                limit: changes.page_count,
            };
            let new_depth = old
                .depth
                .max(depth_for(changes.page_count, old.fanout_bits));
            let node = update.apply(writer, old.node, old.depth, new_depth, &tree)?;
            let ancestry = commit.ancestry(self, Parents::One(base.root))?;
            let record = RootRecord {
                fanout_bits: old.fanout_bits,
                depth: if node.is_some() { new_depth } else { 0 },
                page_size: changes.page_size,
                page_count: if node.is_some() {
                    changes.page_count
                } else {
                    0
                },
                change_counter: 0,
                db_checksum: checksum,
                node,
                ancestry: Some(ancestry),
            };
            Ok((commit.seal(record)?, hashes))
        })?;
        let version = base.version + 1;
        let (root, page_count) = (sealed.root, sealed.record.page_count);
        let touched = self.store_time()?;
        let meta = meta.map(|f| f(&root)).unwrap_or_default();
        let mv = HeadMove::new(HeadOp::Commit);
        let (r, etag) = self.publish_head(b, base, etag, Some(&sealed), &mv, |next| {
            admit(next)?;
            next.root = root;
            next.version = version;
            next.page_size = changes.page_size;
            next.page_count = page_count;
            next.touched_at = touched;
            for (k, v) in &meta {
                next.meta.insert(k.clone(), v.clone());
            }
            Ok(())
        })?;
        let committed = PagesCommitted {
            version,
            root,
            pages: hashes.len() as u64,
            page_count,
            store: sealed.stats,
            hashes,
        };
        Ok((r, etag, committed))
    }
}
