//! The commit path's guarantees, each pinned by a test named after it: the half-grace
//! rule, store-clock stamps, head moves that survive unrelated ref changes, and the
//! refusals that keep uncheckpointed work from being stranded or deleted.

mod common;

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::*;
use scion_core::names::NameError;
use scion_core::{CheckoutState, CoreError, EngineError, LeaseChange, Scion};
use scion_store::{
    Backend, ETag, FaultPlan, FaultyBackend, LocalBackend, ObjectMeta, PutMode, StoreResult,
};

type Hook = Box<dyn Fn(&dyn Backend, &[String]) + Send + Sync>;

/// A backend that lets something else happen in the middle of a commit: after each
/// segment put (`on_segment`) or right after a ref compare-and-swap lands (`on_ref`), with
/// the segments written so far. With `slow`, the store's clock jumps two hours once a
/// segment is written: a commit that took longer than half the grace.
struct Interleave {
    inner: Arc<dyn Backend>,
    segments: Mutex<Vec<String>>,
    on_segment: Option<Hook>,
    on_ref: Option<Hook>,
    slow: bool,
    jumped: AtomicBool,
}

impl std::fmt::Debug for Interleave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interleave")
    }
}

impl Interleave {
    fn new(e: &Env) -> Self {
        Interleave {
            inner: Arc::new(LocalBackend::open(e.store_dir()).unwrap()),
            segments: Mutex::new(Vec::new()),
            on_segment: None,
            on_ref: None,
            slow: false,
            jumped: AtomicBool::new(false),
        }
    }
    fn written(&self) -> Vec<String> {
        self.segments.lock().unwrap().clone()
    }
}

impl Backend for Interleave {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        self.inner.get_range(key, range)
    }
    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        self.inner.head(key)
    }
    fn exists(&self, key: &str) -> StoreResult<bool> {
        self.inner.exists(key)
    }
    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        let is_update = matches!(mode, PutMode::Update(_));
        let etag = self.inner.put(key, data, mode)?;
        if key.starts_with("segments/") {
            self.segments.lock().unwrap().push(key.to_string());
            self.jumped.store(self.slow, Ordering::SeqCst);
            if let Some(h) = &self.on_segment {
                h(self.inner.as_ref(), &self.written());
            }
        } else if key.starts_with("refs/") && is_update {
            if let Some(h) = &self.on_ref {
                h(self.inner.as_ref(), &self.written());
            }
        }
        Ok(etag)
    }
    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> StoreResult<()> {
        self.inner.delete(key)
    }
    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        self.inner.delete_if(key, etag)
    }
    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        self.inner.delete_many(keys)
    }
    fn evict(&self, key: &str) -> StoreResult<()> {
        self.inner.evict(key)
    }
    fn describe(&self) -> String {
        "interleave".into()
    }
    fn now(&self) -> StoreResult<SystemTime> {
        let t = self.inner.now()?;
        Ok(if self.jumped.load(Ordering::SeqCst) {
            t + Duration::from_secs(7200)
        } else {
            t
        })
    }
}

/// `shop` with an uncheckpointed change in main's checkout; returns the dumps before and
/// after the change.
fn dirty_shop() -> (Env, String, String) {
    let e = env();
    create_shop(&e, 500);
    let p = e.scion.checkout(&br("shop"), false).unwrap().path;
    let old = dump(&p);
    exec(&p, "UPDATE items SET price = 99 WHERE id % 5 = 0;");
    let new = dump(&p);
    (e, old, new)
}

fn sweep_all(b: &dyn Backend, segments: &[String]) {
    for s in segments {
        b.delete(s).unwrap();
    }
}

#[test]
fn half_grace_rule_a_slow_commit_whose_segments_were_swept_publishes_nothing() {
    let (e, old, _) = dirty_shop();
    let mut racer = Interleave::new(&e);
    racer.slow = true;
    racer.on_segment = Some(Box::new(sweep_all));
    let s = e.reopen_with(Arc::new(racer));
    let err = s
        .checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
        .unwrap_err();
    assert!(
        matches!(err, CoreError::Engine(EngineError::CommitExpired { .. })),
        "{err}"
    );
    assert!(err.is_retryable());
    let s = e.reopen();
    assert_eq!(e.dump_target(&s, "shop"), old, "the head did not move");
    let (r, _) = s.engine().read_ref(&br("shop")).unwrap();
    assert_eq!(
        s.checkout_state(&br("shop"), &r.root).unwrap(),
        CheckoutState::Dirty,
        "the changes are still there to checkpoint"
    );
    assert!(s.verify().unwrap().ok());
}

#[test]
fn half_grace_rule_a_slow_commit_whose_segments_are_intact_publishes() {
    let (e, _, new) = dirty_shop();
    let mut racer = Interleave::new(&e);
    racer.slow = true;
    let s = e.reopen_with(Arc::new(racer));
    s.checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
        .unwrap();
    assert_eq!(e.dump_target(&e.reopen(), "shop"), new);
}

#[test]
fn half_grace_rule_segments_swept_after_publishing_put_the_old_head_back() {
    let (e, old, _) = dirty_shop();
    let mut racer = Interleave::new(&e);
    let fired = Arc::new(AtomicBool::new(false));
    let once = fired.clone();
    racer.on_ref = Some(Box::new(move |b, segs| {
        // Only the commit's own publish: the lease write before it has no segments yet.
        if !segs.is_empty() && !once.swap(true, Ordering::SeqCst) {
            sweep_all(b, segs);
        }
    }));
    let s = e.reopen_with(Arc::new(racer));
    let err = s
        .checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
        .unwrap_err();
    assert!(
        matches!(err, CoreError::Engine(EngineError::CommitLost { .. })),
        "{err}"
    );
    assert!(fired.load(Ordering::SeqCst));
    let s = e.reopen();
    assert_eq!(e.dump_target(&s, "shop"), old, "the previous head is back");
    assert!(s.verify().unwrap().ok(), "no head names a missing segment");
}

#[test]
fn half_grace_rule_gc_below_the_minimum_grace_needs_force() {
    let e = env();
    create_shop(&e, 10);
    assert_eq!(e.scion.engine().min_grace(), scion_core::DEFAULT_MIN_GRACE);
    let err = e.scion.gc(Duration::from_secs(1), false).unwrap_err();
    assert!(
        matches!(
            err,
            CoreError::Engine(EngineError::GraceBelowMinimum { .. })
        ),
        "{err}"
    );
    e.scion.gc(Duration::from_secs(1), true).unwrap();
    e.scion.gc(scion_core::DEFAULT_MIN_GRACE, false).unwrap();
}

#[test]
fn touch_and_protect_during_a_lease_holders_checkpoint_do_not_fail_it() {
    let (e, _, new) = dirty_shop();
    let mut racer = Interleave::new(&e);
    let other = Arc::new(Mutex::new(None::<Scion>));
    let other_hook = other.clone();
    racer.on_segment = Some(Box::new(move |_, _| {
        if let Some(s) = other_hook.lock().unwrap().as_ref() {
            s.engine()
                .touch(&br("shop"), Some(Some(Duration::from_secs(600))))
                .unwrap();
            s.engine().set_protected(&br("shop"), false).unwrap();
        }
    }));
    let s = e.reopen_with(Arc::new(racer));
    s.engine()
        .lease(
            &br("shop"),
            s.engine().holder(),
            LeaseChange::Acquire {
                ttl: Duration::from_secs(60),
            },
        )
        .unwrap();
    *other.lock().unwrap() = Some(e.reopen());
    s.checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
        .unwrap();
    let s = e.reopen();
    assert_eq!(e.dump_target(&s, "shop"), new);
    let (r, _) = s.engine().read_ref(&br("shop")).unwrap();
    assert_eq!(r.ttl_secs, Some(600), "the touch stands too");
    assert!(!r.protected);
}

#[test]
fn store_clock_stamps_a_fresh_fork_with_a_ttl_survives_gc_on_a_host_behind_the_store() {
    let e = env();
    create_shop(&e, 10);
    // The store's clock is two hours ahead of this host's.
    let skewed = Arc::new(
        FaultyBackend::new(
            Arc::new(LocalBackend::open(e.store_dir()).unwrap()),
            FaultPlan::None,
        )
        .with_clock_offset_ms(2 * 3600 * 1000),
    );
    let s = e.reopen_with(skewed.clone());
    s.engine()
        .fork(
            &br("shop"),
            &"agent".parse().unwrap(),
            scion_core::ForkOptions {
                ttl: Some(Duration::from_secs(3600)),
                ..Default::default()
            },
        )
        .unwrap();
    let (r, _) = s.engine().read_ref(&br("shop@agent")).unwrap();
    let stamped = r.touched_at.as_system_time();
    let store_now = skewed.now().unwrap();
    assert!(
        store_now.duration_since(stamped).unwrap_or_default() < Duration::from_secs(60),
        "stamped by the store's clock"
    );
    let report = s.gc(scion_core::DEFAULT_MIN_GRACE, false).unwrap();
    assert!(report.reaped.is_empty(), "reaped {:?}", report.reaped);
    s.engine().read_ref(&br("shop@agent")).unwrap();
}

#[test]
fn durations_are_capped_and_never_overflow() {
    let err = scion_core::clock::parse_duration("18446744073709551615s").unwrap_err();
    assert!(matches!(err, EngineError::InvalidDuration { .. }), "{err}");
    let e = env();
    create_shop(&e, 10);
    e.scion
        .engine()
        .fork(&br("shop"), &"long".parse().unwrap(), Default::default())
        .unwrap();
    e.scion
        .engine()
        .touch(
            &br("shop@long"),
            Some(Some(scion_core::clock::MAX_DURATION)),
        )
        .unwrap();
    e.scion.status().unwrap();
    e.scion.gc(scion_core::DEFAULT_MIN_GRACE, false).unwrap();
}

#[test]
fn destroy_refuses_a_dirty_checkout_without_force() {
    let e = env();
    create_shop(&e, 50);
    e.scion
        .engine()
        .fork(&br("shop"), &"w".parse().unwrap(), Default::default())
        .unwrap();
    let p = e.scion.checkout(&br("shop@w"), false).unwrap().path;
    exec(&p, "DELETE FROM items WHERE id < 10;");
    let err = e.scion.destroy(&br("shop@w"), false).unwrap_err();
    assert!(matches!(err, CoreError::DirtyCheckout { .. }), "{err}");
    assert!(p.exists(), "the file with its changes is still there");
    e.scion.destroy(&br("shop@w"), true).unwrap();
    assert!(!p.exists());
}

#[test]
fn compact_refuses_uncheckpointed_changes() {
    let (e, _, new) = dirty_shop();
    let err = e.scion.compact(&br("shop"), false).unwrap_err();
    assert!(matches!(err, CoreError::DirtyCheckout { .. }), "{err}");
    let p = e.scion.checkout_path(&br("shop"));
    assert_eq!(dump(&p), new, "the changes are untouched");
    e.scion
        .checkpoint(&br("shop"), &"v1".parse().unwrap(), Default::default())
        .unwrap();
    e.scion.compact(&br("shop"), false).unwrap();
    let (r, _) = e.scion.engine().read_ref(&br("shop")).unwrap();
    assert_eq!(
        e.scion.checkout_state(&br("shop"), &r.root).unwrap(),
        CheckoutState::Clean
    );
}

#[test]
fn gc_ttl_reap_skips_and_touches_branches_whose_checkout_is_dirty() {
    let e = env();
    create_shop(&e, 50);
    e.scion
        .engine()
        .fork(
            &br("shop"),
            &"agent".parse().unwrap(),
            scion_core::ForkOptions {
                ttl: Some(Duration::from_secs(1)),
                ..Default::default()
            },
        )
        .unwrap();
    let b = br("shop@agent");
    let p = e.scion.checkout(&b, false).unwrap().path;
    exec(&p, "INSERT INTO items(name, price) VALUES ('unsaved', 1);");
    let before = e.scion.engine().read_ref(&b).unwrap().0.touched_at;
    std::thread::sleep(Duration::from_millis(2100));
    let report = e.scion.gc(Duration::ZERO, true).unwrap();
    assert!(report.reaped.is_empty());
    assert_eq!(report.kept_in_use, vec!["shop@agent".to_string()]);
    assert!(dump(&p).contains("unsaved"));
    // Writes to a checkout count as TTL activity: gc saw the work and touched the branch.
    let after = e.scion.engine().read_ref(&b).unwrap().0.touched_at;
    assert!(after > before);
    // Asking for the working copy is activity too.
    std::thread::sleep(Duration::from_millis(1100));
    assert!(e.scion.checkout(&b, false).unwrap().dirty);
    assert!(e.scion.engine().read_ref(&b).unwrap().0.touched_at > after);
}

#[test]
fn safety_fork_of_a_branch_at_the_name_limit() {
    let e = env();
    create_shop(&e, 20);
    let name = "b".repeat(scion_core::names::MAX_NAME_LEN);
    e.scion
        .engine()
        .fork(&br("shop"), &name.parse().unwrap(), Default::default())
        .unwrap();
    let b = br(&format!("shop@{name}"));
    let p = e.scion.checkout(&b, false).unwrap().path;
    exec(&p, "DELETE FROM items;");
    e.scion
        .checkpoint(&b, &"empty".parse().unwrap(), Default::default())
        .unwrap();
    let r = e
        .scion
        .rollback(&b, &"fork".parse().unwrap(), &Default::default())
        .unwrap();
    assert_eq!(
        r.safety_fork.as_deref(),
        Some(format!("shop@{name}-pre-rollback-v2").as_str())
    );
    let too_long = "c".repeat(scion_core::names::MAX_NAME_LEN + 1);
    let err = e
        .scion
        .engine()
        .fork(&br("shop"), &too_long.parse().unwrap(), Default::default())
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Name(NameError::InvalidName { .. })),
        "{err}"
    );
}

#[test]
fn schema_1_safety_forks_read_as_typed_marks() {
    let v1 = br#"{"schema":1,"root":"0000000000001111:32:68","version":3,"page_size":4096,"page_count":2,"fork_root":"0000000000001111:32:68","fork_version":3,"init_root":"0000000000001111:32:68","protected":false,"created_at":"2026-01-01T00:00:00.000Z","touched_at":"2026-01-01T00:00:00.000Z","ttl_secs":86400,"meta":{"scion.safety":"pre-rollback of main"}}"#;
    let r = scion_core::refs::Ref::decode(v1, "refs/shop/main-pre-rollback").unwrap();
    let mark = r.safety.expect("typed mark");
    assert_eq!(mark.kind, scion_core::refs::SafetyKind::PreRollback);
    assert_eq!(mark.of, "main");
    assert!(r.meta.is_empty());
}

#[test]
fn status_reports_a_damaged_checkout_per_branch() {
    let e = env();
    create_shop(&e, 20);
    e.scion
        .engine()
        .fork(&br("shop"), &"ok".parse().unwrap(), Default::default())
        .unwrap();
    let bad = e.scion.checkout_path(&br("shop"));
    std::fs::create_dir_all(&bad).unwrap();
    let statuses = e.scion.branch_statuses(&"shop".parse().unwrap()).unwrap();
    let main = statuses.iter().find(|s| s.branch == "main").unwrap();
    assert_eq!(main.checkout, CheckoutState::Unknown);
    let ok = statuses.iter().find(|s| s.branch == "ok").unwrap();
    assert!(ok.problem.is_none());
}

#[test]
fn gc_sweeps_temp_leftovers_older_than_the_grace() {
    // Temp files are swept once older than both the grace and the store's minimum grace.
    let e = env();
    let s = Scion::init(
        Arc::new(LocalBackend::open(e.path("store0")).unwrap()),
        "store0",
        scion_core::ScionOptions::new(e.path("store0/checkouts"), scion_core::ClonePolicy::Auto),
        scion_core::StoreSettings {
            min_grace: Duration::ZERO,
            ..Default::default()
        },
    )
    .unwrap();
    let e = Env {
        dir: e.dir,
        scion: s,
    };
    create_shop(&e, 20);
    let dir = e.scion.checkouts_dir().join("shop");
    std::fs::create_dir_all(&dir).unwrap();
    let leftover = dir.join(".main.db.abc123.tmp");
    std::fs::write(&leftover, vec![0u8; 4096]).unwrap();
    let report = e.scion.verify().unwrap();
    assert_eq!(report.temp_files.len(), 1);
    let kept = e.scion.gc(Duration::from_secs(3600), false).unwrap();
    assert_eq!(kept.temp_files_removed, 0, "younger than the grace");
    assert!(leftover.exists());
    assert_eq!(report.temp_bytes, 4096);
    let gc = e.scion.gc(Duration::ZERO, true).unwrap();
    assert_eq!(gc.temp_files_removed, 1);
    assert!(!leftover.exists());
}

/// A crash between a local store's temp write and its rename leaves `.scion-tmp/*.tmp`
/// (up to a whole segment): `verify` lists it and `gc` sweeps it as it does checkout temps.
#[test]
fn the_local_stores_own_temp_files_are_listed_and_swept() {
    let e = env();
    create_shop(&e, 20);
    let tmp = e
        .store_dir()
        .join(scion_store::local::TMP_DIR)
        .join("0123456789abcdef.tmp");
    std::fs::write(&tmp, vec![7u8; 16 * 1024]).unwrap();
    let report = e.scion.verify().unwrap();
    assert!(report.ok(), "a leftover is garbage, not damage");
    assert_eq!(report.temp_files, [tmp.display().to_string()]);
    assert_eq!(report.temp_bytes, 16 * 1024);
    let kept = e.scion.gc(Duration::from_secs(3600), false).unwrap();
    assert_eq!(kept.temp_files_removed, 0, "younger than the grace");
    let swept = e.scion.gc(Duration::ZERO, true).unwrap();
    assert_eq!(swept.temp_files_removed, 1);
    assert_eq!(swept.temp_bytes_removed, 16 * 1024);
    assert!(!tmp.exists());
    // The store still works: its temp directory is where the next write goes.
    e.scion
        .engine()
        .fork(&br("shop"), &"after".parse().unwrap(), Default::default())
        .unwrap();
}

#[test]
fn verify_reports_each_damaged_segment_once() {
    let e = env();
    create_shop(&e, 2000);
    assert!(e.scion.verify().unwrap().ok());
    let segments: Vec<_> = std::fs::read_dir(e.store_dir().join("segments"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .collect();
    assert_eq!(segments.len(), 1);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&segments[0])
        .unwrap();
    f.set_len(f.metadata().unwrap().len() / 2).unwrap();
    let report = e.scion.verify().unwrap();
    assert!(!report.ok());
    let damaged: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.object.starts_with("segments/"))
        .collect();
    assert!(
        !damaged.is_empty() && damaged.len() <= 2,
        "one problem for the segment (and at most one for the uncountable garbage): {:?}",
        report.problems
    );
}
