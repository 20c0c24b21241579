//! Committing the pages of a whole SQLite file onto a branch head as they are read, for a
//! caller that knows which pages changed (the working tree's checkpoint of a checkout).
//! Pages go to the segment writer as they stream in, deltas against the head's frames where
//! they pay, so memory holds no more than the writer's buffers whatever the file's size.
//!
//! The branch's lease is taken at the first changed page and held to the publish (or
//! given back if the commit stops early): a file whose pages all hash as before takes no
//! lease, so a checkpoint with nothing to commit writes only its name.

use std::cell::Cell;
use std::collections::BTreeMap;

use scion_store::ETag;

use crate::commit::{Commit, Sealed};
use crate::error::{EngineError, EngineResult};
use crate::format::{page_contribution, page_hash, Locator, Parents, RootRecord, Slot};
use crate::history::{HeadMove, HeadOp};
use crate::names::{BranchRef, CheckpointName};
use crate::ops::lease::OPERATION_LEASE;
use crate::ops::pages::MAX_DELTA_PAGES;
use crate::pagemap::{depth_for, lookup, TreeUpdate};
use crate::refs::{Lease, Ref};
use crate::writer::WriteStats;
use crate::Engine;

/// The shape of the file a commit read: its page size and page count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileShape {
    /// The file's page size in bytes.
    pub page_size: u32,
    /// The file's number of pages.
    pub page_count: u32,
}

/// Where a streamed commit got to.
pub enum FileCommit<'a> {
    /// Every page hashed as the head's and the shape is the same: nothing was written and
    /// no lease taken.
    Unchanged {
        /// The hash of every page of the file.
        hashes: Vec<u64>,
    },
    /// A new version is written, not yet the head: [`SealedFile::publish`] makes it so.
    Sealed(Box<SealedFile<'a>>),
}

/// A version written from a file, waiting to be published as the branch's head, with the
/// branch's lease held for it.
pub struct SealedFile<'a> {
    engine: &'a Engine,
    branch: &'a BranchRef,
    sealed: Sealed,
    /// The branch as leased for this commit, and whether the lease was this process's
    /// before the commit began (then it is kept after the publish).
    leased: (Ref, ETag),
    held_before: bool,
    lease: OperationLease<'a>,
    /// Pages that differed from the head's.
    pub pages_changed: u64,
    /// The hash of every page of the file.
    pub hashes: Vec<u64>,
}

impl<'a> SealedFile<'a> {
    /// The new version's root.
    pub fn root(&self) -> Locator {
        self.sealed.root
    }

    /// The number the new version will have as the head.
    pub fn version(&self) -> u64 {
        self.leased.0.version + 1
    }

    /// The new version's root record (page size, page count, checksum).
    pub fn record(&self) -> &RootRecord {
        &self.sealed.record
    }

    /// What writing the version cost the store.
    pub fn stats(&self) -> WriteStats {
        self.sealed.stats
    }

    /// Make the version the branch's head, recorded in its head history as a commit
    /// with `detail`, and give back the lease the commit took for itself. On an error the
    /// head may or may not have moved: the ref decides, not the error.
    pub fn publish(self, detail: String) -> EngineResult<Published<'a>> {
        let SealedFile {
            engine,
            branch,
            sealed,
            leased: (r, etag),
            held_before,
            lease,
            ..
        } = self;
        let (root, version, record) = (sealed.root, r.version + 1, sealed.record);
        let touched = engine.store_time()?;
        let mv = HeadMove::with_detail(HeadOp::Commit, detail);
        let published = engine.publish_head(branch, &r, etag, Some(&sealed), &mv, |next| {
            if !held_before {
                next.lease = None;
            }
            next.root = root;
            next.version = version;
            next.page_size = record.page_size;
            next.page_count = record.page_count;
            next.touched_at = touched;
            Ok(())
        })?;
        lease.armed.set(false);
        Ok(Published {
            engine,
            branch,
            root,
            version,
            head: published.0,
        })
    }
}

/// A version a streamed commit made the branch's head.
pub struct Published<'a> {
    engine: &'a Engine,
    branch: &'a BranchRef,
    root: Locator,
    version: u64,
    /// The branch's ref as published.
    pub head: Ref,
}

impl Published<'_> {
    /// Bind checkpoint `name` (checked beforehand by
    /// [`Engine::check_checkpoint_name`]) to the version. A destroy of the branch that
    /// raced the commit takes the name away again, and says so.
    pub fn name(self, name: &CheckpointName, meta: BTreeMap<String, String>) -> EngineResult<()> {
        let (engine, b) = (self.engine, self.branch);
        engine.bind_checkpoint(b, name, self.root, self.version, meta)?;
        if engine.read_ref(b).is_err() {
            let _ = engine.backend.delete(&crate::refs::checkpoint_key(b, name));
            return Err(EngineError::BeingDestroyed { branch: b.clone() });
        }
        Ok(())
    }
}

impl Engine {
    /// Commit onto `b`'s head (read as `r` with `etag`) the pages `scan` streams from a
    /// SQLite file. `scan` calls its argument with each page that may differ from the
    /// head's (page number from 1, bytes, hash) and returns the file's shape and the hash
    /// of every page; it may be called again if the commit must start over.
    pub fn commit_file<'a, F>(
        &'a self,
        b: &'a BranchRef,
        r: &Ref,
        etag: &ETag,
        mut scan: F,
    ) -> EngineResult<FileCommit<'a>>
    where
        F: FnMut(
            &mut dyn FnMut(u32, &[u8], u64) -> EngineResult<()>,
        ) -> EngineResult<(FileShape, Vec<u64>)>,
    {
        let held_before = self.holds_lease(r)?;
        let mut leased: Option<(Ref, ETag)> = held_before.then(|| (r.clone(), etag.clone()));
        let lease = OperationLease {
            engine: self,
            branch: b,
            armed: Cell::new(false),
        };
        let lease_now = |leased: &mut Option<(Ref, ETag)>| -> EngineResult<()> {
            if leased.is_none() {
                *leased = Some(self.take_operation_lease(b, r, etag)?);
                lease.armed.set(true);
            }
            Ok(())
        };
        let old = self.reader.root(&r.root)?;
        let (sealed, hashes) = crate::retry::with_fresh_ids(|| {
            let mut commit = Commit::begin(self)?;
            let writer = &mut commit.writer;
            let mut changes: BTreeMap<u32, Option<Slot>> = BTreeMap::new();
            let mut zero = None;
            let mut deltas = 0;
            let (shape, hashes) = scan(&mut |pgno, page, hash| {
                lease_now(&mut leased)?;
                let zero = *zero.get_or_insert_with(|| page_hash(&vec![0u8; page.len()]));
                if hash == zero {
                    changes.insert(pgno - 1, None);
                    return Ok(());
                }
                let mut base = None;
                if deltas < MAX_DELTA_PAGES && page.len() == old.page_size as usize {
                    if let Some(slot) =
                        lookup(&self.reader, old.node, old.depth, old.fanout_bits, pgno - 1)?
                    {
                        base = Some(self.reader.delta_base(&slot, pgno)?);
                    }
                }
                let (slot, _) =
                    writer.add_page(pgno, page, base.as_ref().map(|(l, r)| (*l, r.as_slice())))?;
                if slot.base.is_some() {
                    deltas += 1;
                }
                changes.insert(pgno - 1, Some(slot));
                Ok(())
            })?;
            let same_shape = shape.page_size == old.page_size && shape.page_count == old.page_count;
            if changes.is_empty() && same_shape {
                return Ok((None, hashes));
            }
            lease_now(&mut leased)?;
            let zero = page_hash(&vec![0u8; shape.page_size as usize]);
            let db_checksum = hashes.iter().enumerate().fold(0u64, |acc, (i, h)| {
                acc.wrapping_add(page_contribution(i as u32 + 1, *h, zero))
            });
            // A new page size makes every page new: start from an empty tree.
            let (top, old_depth) = if shape.page_size == old.page_size {
                (old.node, old.depth)
            } else {
                (None, 0)
            };
            let new_depth = old_depth.max(depth_for(shape.page_count, old.fanout_bits));
            let update = TreeUpdate {
                reader: &self.reader,
                fanout_bits: old.fanout_bits,
                limit: shape.page_count,
            };
            let node = update.apply(writer, top, old_depth, new_depth, &changes)?;
            let ancestry = commit.ancestry(self, Parents::One(r.root))?;
            let record = RootRecord {
                fanout_bits: old.fanout_bits,
                depth: if node.is_some() { new_depth } else { 0 },
                page_size: shape.page_size,
                page_count: if node.is_some() { shape.page_count } else { 0 },
                change_counter: 0,
                db_checksum,
                node,
                ancestry: Some(ancestry),
            };
            let pages = changes.len() as u64;
            Ok((Some((commit.seal(record)?, pages)), hashes))
        })?;
        let Some((sealed, pages_changed)) = sealed else {
            return Ok(FileCommit::Unchanged { hashes });
        };
        let leased = leased.expect("a commit with changes holds the lease");
        Ok(FileCommit::Sealed(Box::new(SealedFile {
            engine: self,
            branch: b,
            sealed,
            leased,
            held_before,
            lease,
            pages_changed,
            hashes,
        })))
    }

    /// Take `b`'s lease (read as `r` with `etag`) for the length of one operation.
    fn take_operation_lease(
        &self,
        b: &BranchRef,
        r: &Ref,
        etag: &ETag,
    ) -> EngineResult<(Ref, ETag)> {
        let now = self.store_time()?;
        let mut leased = r.clone();
        leased.epoch += 1;
        leased.lease = Some(Lease {
            holder: self.holder().to_string(),
            epoch: leased.epoch,
            expires: now.saturating_add(OPERATION_LEASE),
        });
        let etag = self.write_ref(b, &mut leased, etag)?;
        Ok((leased, etag))
    }
}

/// Gives back the lease a commit took for itself if the commit stops before its publish.
struct OperationLease<'a> {
    engine: &'a Engine,
    branch: &'a BranchRef,
    armed: Cell<bool>,
}

impl Drop for OperationLease<'_> {
    fn drop(&mut self) {
        if !self.armed.get() {
            return;
        }
        let holder = self.engine.holder().to_string();
        let _ = self.engine.update_ref(self.branch, |r| {
            if r.lease.as_ref().is_some_and(|l| l.holder == holder) {
                r.lease = None;
            }
            Ok(())
        });
    }
}
