//! `checkpoint`: commit what changed in a branch's checkout and bind a name to the result.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::checkout::{scan, DbFiles, Fingerprint, RecordHeader, Sidecar};
use crate::commit::Commit;
use crate::error::{CoreError, CoreResult, EngineError, EngineResult};
use crate::format::{page_contribution, page_hash, Parents, RootRecord, Slot};
use crate::history::{HeadMove, HeadOp};
use crate::names::{BranchRef, CheckpointName};
use crate::ops::lease::OPERATION_LEASE;
use crate::ops::pages::MAX_DELTA_PAGES;
use crate::pagemap::{depth_for, lookup, TreeUpdate};
use crate::refs::{Lease, Ref};
use crate::writer::WriteStats;
use crate::Scion;
use scion_store::ETag;

#[derive(Debug, Clone, Serialize)]
pub struct CheckpointReport {
    pub checkpoint: String,
    pub version: u64,
    /// Whether a new version was committed (false: the checkout was clean).
    pub committed: bool,
    pub pages_changed: u64,
    pub page_count: u32,
    pub store: WriteStats,
}

/// What a checkpoint keeps besides its name; the default keeps nothing else.
#[derive(Debug, Clone, Default)]
pub struct CheckpointOptions {
    /// The user's entries (who made it and why), shown by `checkpoints --json`.
    pub meta: BTreeMap<String, String>,
}

impl Scion {
    /// Commit the pages of `b`'s checkout that differ from the version it was made from,
    /// reading one consistent committed state (other connections may keep writing), then
    /// bind `name` to the new head. A clean checkout (or none) binds the current head.
    pub fn checkpoint(
        &self,
        b: &BranchRef,
        name: &CheckpointName,
        options: CheckpointOptions,
    ) -> CoreResult<CheckpointReport> {
        let CheckpointOptions { meta } = options;
        crate::refs::check_user_meta(&meta)?;
        self.engine.check_new_checkpoint_name(b, name)?;
        let (r, etag) = self.engine.read_ref(b)?;
        // Another holder (a daemon's session) is committing this branch: its changes go
        // through it, and the file may hold what only it has captured.
        self.engine.check_not_leased(b, &r, false)?;
        let path = self.checkout_path(b);
        let (head_root, head_version, head_pages) = (r.root, r.version, r.page_count);
        let bind_head = |stats: WriteStats| -> CoreResult<CheckpointReport> {
            self.engine.bind_checkpoint_with_meta(
                b,
                name,
                head_root,
                head_version,
                meta.clone(),
            )?;
            Ok(CheckpointReport {
                checkpoint: format!("{b}@{name}"),
                version: head_version,
                committed: false,
                pages_changed: 0,
                page_count: head_pages,
                store: stats,
            })
        };
        if !path.exists() {
            return bind_head(WriteStats::default());
        }
        // No scion replaces the file while it is read and its record rewritten.
        let _inspecting = DbFiles::checkout(path.clone()).inspect_lock()?;
        // A clean checkout of the head binds the name in O(1): the record's header proves
        // it, and its page hashes are not read.
        if let Some(fp) = Fingerprint::of(&path)? {
            if RecordHeader::proving(&path, &fp)?.is_some_and(|h| h.root == r.root) {
                return bind_head(WriteStats::default());
            }
        }
        let Some(mut sidecar) = Sidecar::load(&path, &r.root)? else {
            return Err(CoreError::UnknownCheckout {
                path,
                branch: b.clone(),
            });
        };
        if sidecar.root != r.root {
            return Err(CoreError::StaleCheckout {
                path,
                branch: b.clone(),
            });
        }
        // Stamp, then fingerprint, before any SQLite connection opens the file.
        let stamp = crate::checkout::now_ns();
        let fingerprint = Fingerprint::of(&path)?.unwrap_or_default();
        if sidecar.proves_unmodified(&fingerprint) {
            return bind_head(WriteStats::default());
        }
        // Moving the head: hold the branch's lease from the first changed page to the
        // publish. A file whose pages all hash as before takes no lease, so a checkpoint
        // with nothing to commit writes only its name (it works on a full disk too, as far
        // as the name goes).
        let held_before = self.engine.holds_lease(&r)?;
        let mut leased: Option<(Ref, ETag)> = held_before.then(|| (r.clone(), etag.clone()));
        let lease_guard = OperationLease {
            scion: self,
            branch: b,
            armed: std::cell::Cell::new(false),
        };
        let lease_now = |leased: &mut Option<(Ref, ETag)>| -> EngineResult<()> {
            if leased.is_none() {
                *leased = Some(self.take_operation_lease(b, &r, &etag)?);
                lease_guard.armed.set(true);
            }
            Ok(())
        };
        let old = self.engine.reader.root(&r.root)?;
        let committed = crate::retry::with_fresh_ids(|| {
            let mut commit = Commit::begin(&self.engine)?;
            let writer = &mut commit.writer;
            let mut changes: BTreeMap<u32, Option<Slot>> = BTreeMap::new();
            let mut zero = None;
            let mut deltas = 0;
            let (info, hashes) = scan(
                &path,
                Some(&sidecar),
                &*self.engine.progress,
                |pgno, page, hash| {
                    lease_now(&mut leased)?;
                    let zero = *zero.get_or_insert_with(|| page_hash(&vec![0u8; page.len()]));
                    if hash == zero {
                        changes.insert(pgno - 1, None);
                        return Ok(());
                    }
                    let mut base = None;
                    if deltas < MAX_DELTA_PAGES && page.len() == old.page_size as usize {
                        if let Some(slot) = lookup(
                            &self.engine.reader,
                            old.node,
                            old.depth,
                            old.fanout_bits,
                            pgno - 1,
                        )? {
                            base = Some(self.engine.reader.delta_base(&slot, pgno)?);
                        }
                    }
                    let (slot, _) = writer.add_page(
                        pgno,
                        page,
                        base.as_ref().map(|(l, r)| (*l, r.as_slice())),
                    )?;
                    if slot.base.is_some() {
                        deltas += 1;
                    }
                    changes.insert(pgno - 1, Some(slot));
                    Ok(())
                },
            )?;
            let same_shape = info.page_size == old.page_size && info.page_count == old.page_count;
            if changes.is_empty() && same_shape {
                return Ok((None, hashes));
            }
            lease_now(&mut leased)?;
            let zero = page_hash(&vec![0u8; info.page_size as usize]);
            let db_checksum = hashes.iter().enumerate().fold(0u64, |acc, (i, h)| {
                acc.wrapping_add(page_contribution(i as u32 + 1, *h, zero))
            });
            // A new page size makes every page new: start from an empty tree.
            let (top, old_depth) = if info.page_size == old.page_size {
                (old.node, old.depth)
            } else {
                (None, 0)
            };
            let new_depth = old_depth.max(depth_for(info.page_count, old.fanout_bits));
            let update = TreeUpdate {
                reader: &self.engine.reader,
                fanout_bits: old.fanout_bits,
                limit: info.page_count,
            };
            let node = update.apply(writer, top, old_depth, new_depth, &changes)?;
            let ancestry = commit.ancestry(&self.engine, Parents::One(r.root))?;
            let record = RootRecord {
                fanout_bits: old.fanout_bits,
                depth: if node.is_some() { new_depth } else { 0 },
                page_size: info.page_size,
                page_count: if node.is_some() { info.page_count } else { 0 },
                change_counter: 0,
                db_checksum,
                node,
                ancestry: Some(ancestry),
            };
            let pages = changes.len() as u64;
            Ok((Some((commit.seal(record)?, pages)), hashes))
        })?;
        let (commit, hashes) = committed;
        let Some((sealed, pages_changed)) = commit else {
            sidecar.fingerprint = fingerprint;
            sidecar.stamp_ns = stamp;
            sidecar.store(&path)?;
            return bind_head(WriteStats::default());
        };
        let (r, etag) = leased.expect("a commit with changes holds the lease");
        let version = r.version + 1;
        let (root, record, stats) = (sealed.root, sealed.record, sealed.stats);
        let new_sidecar = Sidecar {
            page_size: record.page_size,
            root,
            version,
            fingerprint,
            stamp_ns: stamp,
            hashes,
        };
        // Adopted by the next load only if the ref below really moves to `root`.
        new_sidecar.store_pending(&path)?;
        let touched = self.engine.store_time()?;
        let mv = HeadMove::with_detail(HeadOp::Commit, format!("{b}@{name}"));
        let published = self
            .engine
            .publish_head(b, &r, etag, Some(&sealed), &mv, |next| {
                if !held_before {
                    next.lease = None;
                }
                next.root = root;
                next.version = version;
                next.page_size = record.page_size;
                next.page_count = record.page_count;
                next.touched_at = touched;
                Ok(())
            });
        if let Err(e) = published {
            // The pending record is adopted only if the head really names the new version
            // (an unknown outcome is decided by the ref, not by the error). Unpublished
            // segments are left to GC.
            if let Ok((head, _)) = self.engine.read_ref(b) {
                Sidecar::load(&path, &head.root)?;
            }
            return Err(e.into());
        }
        lease_guard.armed.set(false);
        new_sidecar.store(&path)?;
        Sidecar::load(&path, &root)?;
        self.engine
            .bind_checkpoint_with_meta(b, name, root, version, meta)?;
        // A destroy that raced this commit must not leave the name behind.
        if self.engine.read_ref(b).is_err() {
            let _ = self
                .engine
                .backend
                .delete(&crate::refs::checkpoint_key(b, name));
            return Err(EngineError::BeingDestroyed { branch: b.clone() }.into());
        }
        Ok(CheckpointReport {
            checkpoint: format!("{b}@{name}"),
            version,
            committed: true,
            pages_changed,
            page_count: record.page_count,
            store: WriteStats {
                objects: stats.objects + 2,
                ..stats
            },
        })
    }
}

impl Scion {
    /// Take `b`'s lease (read as `r` with `etag`) for the length of one operation.
    fn take_operation_lease(
        &self,
        b: &BranchRef,
        r: &Ref,
        etag: &ETag,
    ) -> EngineResult<(Ref, ETag)> {
        let now = self.engine.store_time()?;
        let mut leased = r.clone();
        leased.epoch += 1;
        leased.lease = Some(Lease {
            holder: self.engine.holder().to_string(),
            epoch: leased.epoch,
            expires: now.saturating_add(OPERATION_LEASE),
        });
        let etag = self.engine.write_ref(b, &mut leased, etag)?;
        Ok((leased, etag))
    }
}

/// Releases the lease a checkpoint took for itself if the checkpoint stops early.
struct OperationLease<'a> {
    scion: &'a Scion,
    branch: &'a BranchRef,
    armed: std::cell::Cell<bool>,
}

impl Drop for OperationLease<'_> {
    fn drop(&mut self) {
        if !self.armed.get() {
            return;
        }
        let holder = self.scion.engine.holder().to_string();
        let _ = self.scion.engine.update_ref(self.branch, |r| {
            if r.lease.as_ref().is_some_and(|l| l.holder == holder) {
                r.lease = None;
            }
            Ok(())
        });
    }
}
