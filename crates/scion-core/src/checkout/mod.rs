//! Checkouts: stock SQLite files in WAL mode at a fixed path per branch, each with a
//! sidecar that proves, usually without reading the file, whether it still holds exactly
//! the version it was made from.

mod claims;
mod clean;
mod clone;
mod files;
mod guard;
pub use guard::CheckoutFiles;
pub use scion_engine::live;
mod lock;
mod patch;
mod sidecar;
mod state;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub use claims::ReleaseReport;
pub(crate) use clone::CopyKind;
pub use clone::{probe as probe_clone, CloneCapability, ClonePolicy};
pub(crate) use files::{DbFiles, Expect, Install};
pub(crate) use sidecar::RecordHeader;
pub use sidecar::{Fingerprint, Sidecar};

use crate::error::{CoreError, CoreResult};
use crate::format::Locator;
use crate::names::{BranchRef, Target};
use crate::refs::Ref;
use crate::Scion;
use scion_engine::materialize::{Durability, JournalMode};
pub use sidecar::now_ns;
pub(crate) use state::{refuse_unsaved, scan, Inspection, JUDGE_TRIES};
pub use state::{CheckoutAction, CheckoutReport, CheckoutState};

impl Scion {
    /// The fixed path of a branch's writable checkout (whether or not it exists).
    pub fn checkout_path(&self, b: &BranchRef) -> PathBuf {
        self.options
            .checkouts_dir
            .join(b.db.as_str())
            .join(format!("{}.db", b.branch))
    }

    /// Where read-only historical checkouts of `db` live.
    pub(crate) fn read_only_dir(&self, db: &crate::names::DbName) -> PathBuf {
        self.read_only_root().join(db.as_str())
    }

    /// Where the read-only checkout of the version `v` that `t` names lives:
    /// `{branch}@{checkpoint}.db`, or `{branch}@v{version}.db` for a head.
    pub(crate) fn read_only_path(
        &self,
        t: &crate::names::Target,
        v: &crate::ResolvedVersion,
    ) -> PathBuf {
        let label = match &t.checkpoint {
            Some(c) => format!("{}@{c}.db", t.branch.branch),
            None => format!("{}@v{}.db", t.branch.branch, v.version),
        };
        self.read_only_dir(&t.branch.db).join(label)
    }

    /// The tree of read-only checkouts: a sibling of the checkouts tree (`checkouts-ro`).
    pub(crate) fn read_only_root(&self) -> PathBuf {
        let base = &self.options.checkouts_dir;
        let name = format!(
            "{}-ro",
            base.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("checkouts")
        );
        base.with_file_name(name)
    }

    /// Materialize a checkpoint (or any version a target names) as a read-only file
    /// (mode 0444, rollback-journal mode so readers need no `-wal`/`-shm`), reused when an
    /// unmodified copy is already there.
    pub fn checkout_read_only(&self, t: &crate::names::Target) -> CoreResult<CheckoutReport> {
        let v = self.engine.resolve(t)?;
        let path = self.read_only_path(t, &v);
        if let Some(fp) = Fingerprint::of(&path)? {
            if RecordHeader::proving(&path, &fp)?.is_some_and(|h| h.root == v.root) {
                return Ok(CheckoutReport {
                    branch: t.clone(),
                    path,
                    version: v.version,
                    action: CheckoutAction::Reused,
                    discarded: None,
                    dirty: false,
                });
            }
        }
        let files = DbFiles::checkout(path.clone());
        let tmp = files.temp()?;
        let m = self.engine.materialize(
            &v.root,
            (tmp.as_file(), tmp.path()),
            JournalMode::Rollback,
            Durability::Cache,
        )?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o444))
            .map_err(|e| CoreError::io(tmp.path(), e))?;
        tmp.as_file()
            .set_modified(SystemTime::now() - Duration::from_secs(2))
            .map_err(|e| CoreError::io(tmp.path(), e))?;
        let record = Sidecar {
            page_size: m.root.page_size,
            root: v.root,
            version: v.version,
            fingerprint: Fingerprint::default(),
            stamp_ns: 0,
            hashes: m.hashes,
        };
        // Read-only files hold no changes of anyone's: whatever is there is replaced.
        files.install(tmp, Expect::Anything, Some(record))?;
        Ok(CheckoutReport {
            branch: t.clone(),
            path,
            version: v.version,
            action: CheckoutAction::Materialized,
            discarded: None,
            dirty: false,
        })
    }

    /// Compare the checkout at `path` with its sidecar and with the branch head, holding
    /// off scion's replacements of the file meanwhile. A path that is not a regular file
    /// (a directory, say) is `Unknown`.
    pub(crate) fn inspect(&self, path: &Path, head: &Locator) -> CoreResult<Inspection> {
        let unknown = |seen| Inspection {
            state: CheckoutState::Unknown,
            current: false,
            seen,
            file_hashes: None,
        };
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Inspection {
                    state: CheckoutState::None,
                    current: false,
                    seen: None,
                    file_hashes: None,
                })
            }
            Err(e) => return Err(CoreError::io(path, e)),
            Ok(md) if !md.is_file() => return Ok(unknown(Fingerprint::of(path)?)),
            Ok(_) => {}
        }
        let _lock = DbFiles::checkout(path.to_path_buf()).inspect_lock()?;
        let stamp = now_ns();
        let seen = Fingerprint::of(path)?;
        if seen.is_none() {
            // Deleted while the lock was awaited.
            return Ok(Inspection {
                state: CheckoutState::None,
                current: false,
                seen: None,
                file_hashes: None,
            });
        }
        // The usual case, in O(1): the record's header proves the file unmodified, and the
        // page hashes (8 bytes a page) are never read.
        if let Some(header) = RecordHeader::proving(path, &seen.unwrap_or_default())? {
            files::drop_marker_beside_record(path)?;
            let current = header.root == *head;
            return Ok(Inspection {
                state: if current {
                    CheckoutState::Clean
                } else {
                    CheckoutState::Stale
                },
                current,
                seen,
                file_hashes: None,
            });
        }
        let Some(mut sidecar) = Sidecar::load(path, head)? else {
            if files::refreshing_marker(path).exists() {
                // An in-place refresh was cut short: scion's own pages, half written.
                return Ok(Inspection {
                    state: CheckoutState::Stale,
                    current: false,
                    seen,
                    file_hashes: None,
                });
            }
            return Ok(unknown(seen));
        };
        files::drop_marker_beside_record(path)?;
        let fp = seen.unwrap_or_default();
        let mut file_hashes = None;
        let unmodified = if sidecar.proves_unmodified(&fp) {
            true
        } else {
            // A file SQLite cannot read is a file scion cannot account for.
            let scanned = scan(path, None, &**self.engine.progress(), |_, _, _| Ok(()));
            let (info, hashes) = match scanned {
                Ok(s) => s,
                Err(e) if e.is_unreadable_database() => return Ok(unknown(seen)),
                Err(e) => return Err(e.into()),
            };
            let same = info.page_size == sidecar.page_size && hashes == sidecar.hashes;
            if same {
                // Re-stamp so the next look is O(1) again.
                sidecar.fingerprint = fp;
                sidecar.stamp_ns = stamp;
                sidecar.store(path)?;
            } else if info.page_size == sidecar.page_size {
                file_hashes = Some(hashes);
            }
            same
        };
        let state = match (unmodified, sidecar.root == *head) {
            (true, true) => CheckoutState::Clean,
            (true, false) => CheckoutState::Stale,
            (false, _) => CheckoutState::Dirty,
        };
        Ok(Inspection {
            state,
            current: sidecar.root == *head,
            seen,
            file_hashes,
        })
    }

    /// Checkout state of a branch, for status.
    pub fn checkout_state(&self, b: &BranchRef, head: &Locator) -> CoreResult<CheckoutState> {
        Ok(self.inspect(&self.checkout_path(b), head)?.state)
    }

    /// Make the checkout of `b` hold its head and return its path. A clean, current file
    /// is reused as is, and so is the working copy: a file made from the current head with
    /// changes not yet checkpointed (reported `dirty`). A file with changes made from an
    /// older head (stale and dirty), or without a record, is refused unless `force`; so is
    /// a file written to while the new one was being made.
    pub fn checkout(&self, b: &BranchRef, force: bool) -> CoreResult<CheckoutReport> {
        self.checkout_judged(b, force, None)
    }

    /// [`Scion::checkout`] after a caller's own judgement of the file (`judged`, taken
    /// before the head moved). With `force`, a file judged dirty or unreadable that has
    /// not been written since is replaced on that judgement instead of being hashed again:
    /// the outcome is the same, and hashing a large file twice is most of the cost.
    pub(crate) fn checkout_judged(
        &self,
        b: &BranchRef,
        force: bool,
        judged: Option<Inspection>,
    ) -> CoreResult<CheckoutReport> {
        let files = DbFiles::checkout(self.checkout_path(b));
        let (r, _) = self.claim_checkout(b, files.db())?;
        let report = |action, discarded, dirty| CheckoutReport {
            branch: Target {
                branch: b.clone(),
                checkpoint: None,
            },
            path: files.db().to_path_buf(),
            version: r.version,
            action,
            discarded,
            dirty,
        };
        let mut prepared = None;
        let mut judged = judged
            .filter(|j| force && matches!(j.state, CheckoutState::Dirty | CheckoutState::Unknown));
        for _ in 0..JUDGE_TRIES {
            let inspection = match judged.take() {
                Some(j) if j.seen.map_or(Ok(false), |seen| seen.still_at(files.db()))? => {
                    Inspection {
                        current: false,
                        ..j
                    }
                }
                _ => self.inspect(files.db(), &r.root)?,
            };
            let working_copy = inspection.state == CheckoutState::Dirty && inspection.current;
            if inspection.state == CheckoutState::Clean || (working_copy && !force) {
                if working_copy && r.ttl_secs.is_some() {
                    // Changes in the working copy are activity: its TTL counts from now.
                    self.engine.touch(b, None)?;
                }
                return Ok(report(CheckoutAction::Reused, None, working_copy));
            }
            let discarded = match inspection.state {
                CheckoutState::None | CheckoutState::Stale => None,
                CheckoutState::Dirty | CheckoutState::Unknown if !force => {
                    refuse_unsaved(&inspection, files.db(), b)?;
                    None
                }
                other => Some(other),
            };
            // A clean file of an older version, or (with force) a changed one whose pages
            // were just hashed, is rewritten in place where few pages differ.
            let in_place = match inspection.state {
                CheckoutState::Stale => true,
                CheckoutState::Dirty => force && inspection.file_hashes.is_some(),
                _ => false,
            };
            if in_place && prepared.is_none() {
                if let Some(seen) = inspection.seen {
                    let file_hashes = inspection.file_hashes.as_deref();
                    if self.refresh_in_place(&files, seen, &r, file_hashes)? {
                        return Ok(report(CheckoutAction::Patched, discarded, false));
                    }
                }
            }
            let (tmp, action, hashes) = match prepared.take() {
                Some(p) => p,
                None => self.prepare_checkout(b, &files, &r)?,
            };
            let record = Sidecar::unstamped(&r, hashes.clone());
            match files.install(tmp, inspection.expect(), Some(record))? {
                Install::Done => return Ok(report(action, discarded, false)),
                // Written to, replaced or created meanwhile: judge it again.
                Install::Changed(tmp) => prepared = Some((tmp, action, hashes)),
            }
        }
        Err(CoreError::CheckoutBusy {
            path: files.db().to_path_buf(),
        })
    }

    /// Write the head of `r` into a temp file beside the checkout, cloned or copied from
    /// another clean checkout of the same version where there is one.
    fn prepare_checkout(
        &self,
        b: &BranchRef,
        files: &DbFiles,
        r: &Ref,
    ) -> CoreResult<(tempfile::NamedTempFile, CheckoutAction, Vec<u64>)> {
        let mut tmp = files.temp()?;
        let dir = files.db().parent().expect("checkout paths have a parent");
        if self.options.clone_policy == ClonePolicy::Always {
            if let CloneCapability::Unsupported { reason } = probe_clone(dir)? {
                return Err(CoreError::CloneUnsupported {
                    reason: format!("{} cannot clone files ({reason})", dir.display()),
                });
            }
        }
        // Writable checkouts of the database first, then its read-only ones.
        let places = [dir.to_path_buf(), self.read_only_dir(&b.db)];
        let mut duplicated = None;
        if let Some((src, sidecar)) = clone::find_source(&places, files.db(), &r.root)? {
            let policy = self.options.clone_policy;
            match clone::duplicate_checked(&src, &sidecar, tmp.as_file(), tmp.path(), policy)? {
                Some(kind) => {
                    let action = match kind {
                        CopyKind::Cloned => CheckoutAction::Cloned,
                        CopyKind::Copied => CheckoutAction::Copied,
                    };
                    duplicated = Some((action, sidecar.hashes));
                }
                // The source was written to while it was copied: build from the store.
                None => tmp = files.temp()?,
            }
        }
        let (action, hashes) = match duplicated {
            Some(done) => done,
            None => {
                let m = self.engine.materialize(
                    &r.root,
                    (tmp.as_file(), tmp.path()),
                    JournalMode::Wal,
                    Durability::Cache,
                )?;
                (CheckoutAction::Materialized, m.hashes)
            }
        };
        // Back-date the file so that any later write, however soon, changes its mtime:
        // the fingerprint is then trustworthy at once.
        tmp.as_file()
            .set_modified(SystemTime::now() - Duration::from_secs(2))
            .map_err(|e| CoreError::io(tmp.path(), e))?;
        Ok((tmp, action, hashes))
    }
}
