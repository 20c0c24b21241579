//! A wrapper that makes a backend fail on purpose, so tests can stop an operation after
//! each of its writes in turn and check what a crash at that moment leaves behind.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::{Backend, ETag, ObjectMeta, PutMode, StoreError, StoreResult};

/// What the wrapper does to mutating calls (put, delete, delete_if), counted from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPlan {
    /// Pass everything through.
    None,
    /// Write number `n` fails with a transient error and has no effect; later writes pass.
    FailWrite(usize),
    /// Writes `0..n` take effect, then the "process" is gone: every later call, read or
    /// write, fails. With `n = 0` nothing is written at all.
    CrashAfter(usize),
    /// Write number `n` takes effect, but its answer is lost and the caller gets `answer`
    /// instead: what a client sees when a response times out, or when a proxy retries a
    /// write that had landed and relays the store's precondition failure.
    ApplyThenFail(usize, LostAnswer),
    /// The process is killed (`SIGKILL`, as `kill -9`) just before write number `n`: for
    /// crash tests that run the writer as a real process.
    KillBefore(usize),
    /// The process is killed (`SIGKILL`) right after write number `n` took effect, before
    /// its caller saw the answer.
    KillAfter(usize),
}

/// `kill -9` of this very process: nothing after it runs, no destructor, no buffer flush.
fn kill_this_process() -> ! {
    // SAFETY: kill(2) on our own pid; SIGKILL cannot be caught, so it does not return
    // once delivered.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// The error a write that did land reports under [`FaultPlan::ApplyThenFail`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostAnswer {
    /// `Conflict` for a compare-and-swap, `AlreadyExists` for a create-only put.
    Precondition,
    /// A transient failure (timeout, 5xx).
    Transient,
}

#[derive(Debug)]
pub struct FaultyBackend {
    inner: Arc<dyn Backend>,
    plan: FaultPlan,
    writes: AtomicUsize,
    crashed: AtomicBool,
    /// Store clock minus the inner backend's, in milliseconds.
    clock_offset_ms: i64,
    /// Every mutating call attempted, as `put <key>` or `delete <key>`.
    log: std::sync::Mutex<Vec<String>>,
}

impl FaultyBackend {
    pub fn new(inner: Arc<dyn Backend>, plan: FaultPlan) -> Self {
        Self {
            inner,
            plan,
            writes: AtomicUsize::new(0),
            crashed: AtomicBool::new(false),
            clock_offset_ms: 0,
            log: Default::default(),
        }
    }

    /// Every mutating call attempted so far, in order: `put <key>` or `delete <key>`.
    pub fn write_log(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Report a store clock `offset_ms` ahead of (or, negative, behind) the inner
    /// backend's: a host whose clock disagrees with its store's.
    pub fn with_clock_offset_ms(mut self, offset_ms: i64) -> Self {
        self.clock_offset_ms = offset_ms;
        self
    }

    /// Mutating calls attempted so far (including the failed one).
    pub fn writes_attempted(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    pub(crate) fn has_crashed(&self) -> bool {
        self.crashed.load(Ordering::SeqCst)
    }

    fn dead(key: &str) -> StoreError {
        StoreError::Transient {
            key: key.to_string(),
            message: "injected crash: the process is gone".to_string(),
        }
    }

    fn check_read(&self, key: &str) -> StoreResult<()> {
        if self.has_crashed() {
            return Err(Self::dead(key));
        }
        Ok(())
    }

    /// Perform the next write (`write`), or fail it, as the plan says.
    fn write<T>(
        &self,
        key: &str,
        conditional: Option<&PutMode>,
        write: impl FnOnce() -> StoreResult<T>,
    ) -> StoreResult<T> {
        self.check_read(key)?;
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        let verb = if conditional.is_some() {
            "put"
        } else {
            "delete"
        };
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{verb} {key}"));
        match self.plan {
            FaultPlan::FailWrite(k) if k == n => Err(StoreError::Transient {
                key: key.to_string(),
                message: format!("injected failure of write #{n}"),
            }),
            FaultPlan::CrashAfter(k) if n >= k => {
                self.crashed.store(true, Ordering::SeqCst);
                Err(Self::dead(key))
            }
            FaultPlan::ApplyThenFail(k, answer) if k == n => {
                write()?;
                let key = key.to_string();
                Err(match (answer, conditional) {
                    (LostAnswer::Precondition, Some(PutMode::Create)) => {
                        StoreError::AlreadyExists { key }
                    }
                    (LostAnswer::Precondition, Some(PutMode::Update(_))) => {
                        StoreError::Conflict { key }
                    }
                    _ => StoreError::Transient {
                        key,
                        message: format!("injected lost answer of write #{n} (it landed)"),
                    },
                })
            }
            FaultPlan::KillBefore(k) if k == n => kill_this_process(),
            FaultPlan::KillAfter(k) if k == n => {
                let _ = write();
                kill_this_process()
            }
            _ => write(),
        }
    }
}

impl Backend for FaultyBackend {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        self.check_read(key)?;
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        self.check_read(key)?;
        self.inner.get_range(key, range)
    }
    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        self.check_read(key)?;
        self.inner.head(key)
    }
    fn exists(&self, key: &str) -> StoreResult<bool> {
        self.check_read(key)?;
        self.inner.exists(key)
    }
    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        self.write(key, Some(&mode), || self.inner.put(key, data, mode.clone()))
    }
    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        self.check_read(prefix)?;
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> StoreResult<()> {
        self.write(key, None, || self.inner.delete(key))
    }
    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        self.write(key, None, || self.inner.delete_if(key, etag))
    }
    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        self.write("(batch delete)", None, || self.inner.delete_many(keys))
    }
    fn change_stamp(&self, key: &str) -> Option<u64> {
        self.inner.change_stamp(key)
    }
    fn prefetch(&self, ranges: &[(String, Range<u64>)]) {
        self.inner.prefetch(ranges)
    }
    fn evict(&self, key: &str) -> StoreResult<()> {
        self.inner.evict(key)
    }
    fn describe(&self) -> String {
        format!("faulty({:?}) {}", self.plan, self.inner.describe())
    }
    fn now(&self) -> StoreResult<SystemTime> {
        self.check_read("(clock)")?;
        let t = self.inner.now()?;
        let off = Duration::from_millis(self.clock_offset_ms.unsigned_abs());
        Ok(if self.clock_offset_ms >= 0 {
            t + off
        } else {
            t - off
        })
    }
}
