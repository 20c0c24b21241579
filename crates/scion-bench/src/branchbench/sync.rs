//! Small coordination primitives for the workers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Lets numbered tickets through one at a time, in order (lockstep rounds). Disabled, it
/// lets everyone through at once. Waiting ends early once `stop` is set, so a stopped
/// worker never strands the others.
pub struct Turnstile {
    enabled: bool,
    next: Mutex<usize>,
    cv: Condvar,
}

impl Turnstile {
    pub fn new(enabled: bool) -> Self {
        Turnstile {
            enabled,
            next: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    pub fn wait(&self, ticket: usize, stop: &AtomicBool) {
        if !self.enabled {
            return;
        }
        let mut next = self.next.lock().unwrap();
        while *next != ticket && !stop.load(Ordering::SeqCst) {
            next = self
                .cv
                .wait_timeout(next, Duration::from_millis(100))
                .unwrap()
                .0;
        }
    }

    /// Wait until at least `n` tickets have gone through.
    pub fn wait_passed(&self, n: usize, stop: &AtomicBool) {
        if !self.enabled {
            return;
        }
        let mut next = self.next.lock().unwrap();
        while *next < n && !stop.load(Ordering::SeqCst) {
            next = self
                .cv
                .wait_timeout(next, Duration::from_millis(100))
                .unwrap()
                .0;
        }
    }

    pub fn done(&self) {
        if !self.enabled {
            return;
        }
        *self.next.lock().unwrap() += 1;
        self.cv.notify_all();
    }
}

/// At most `n` holders at once.
pub struct Semaphore {
    free: Mutex<usize>,
    cv: Condvar,
}

pub struct Permit<'a> {
    sem: &'a Semaphore,
}

impl Semaphore {
    pub fn new(n: usize) -> Self {
        Semaphore {
            free: Mutex::new(n),
            cv: Condvar::new(),
        }
    }

    pub fn acquire(&self) -> Permit<'_> {
        let mut free: MutexGuard<'_, usize> = self.free.lock().unwrap();
        while *free == 0 {
            free = self.cv.wait(free).unwrap();
        }
        *free -= 1;
        Permit { sem: self }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.sem.free.lock().unwrap() += 1;
        self.sem.cv.notify_one();
    }
}
