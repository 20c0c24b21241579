//! The store's clock as this host keeps it: learned once from the service, then carried
//! forward by clocks that a change of the host's wall clock does not move (the monotonic
//! clock in a process, the boot clock between processes). A host whose wall clock is
//! stepped (by NTP, an operator, a VM resumed from a snapshot) after it learned the store's
//! clock keeps judging leases, TTLs and GC marks by the store's time all the same.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The store's time at an instant of this process.
#[derive(Debug)]
pub(crate) struct StoreClock {
    anchor: Mutex<(SystemTime, Instant)>,
}

impl StoreClock {
    /// Until it is learned, the store's clock is taken to be ours.
    pub(crate) fn ours() -> Self {
        StoreClock {
            anchor: Mutex::new((SystemTime::now(), Instant::now())),
        }
    }

    /// The store's time is `store` now.
    pub(crate) fn set(&self, store: SystemTime) {
        *self.anchor.lock().unwrap_or_else(|p| p.into_inner()) = (store, Instant::now());
    }

    pub(crate) fn now(&self) -> SystemTime {
        let (store, at) = *self.anchor.lock().unwrap_or_else(|p| p.into_inner());
        store + at.elapsed()
    }
}

/// The store's time read against this machine's boot clock, to hand the learned clock to
/// a later process on the same boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    /// The store's time, in milliseconds since the Unix epoch.
    pub store_unix_ms: u64,
    /// Milliseconds since this machine booted (`CLOCK_BOOTTIME`) at that moment.
    pub boot_ms: u64,
}

impl ClockReading {
    /// The store's time now, from a reading taken earlier on this boot; `None` when the
    /// boot clock cannot be read or is behind the reading (another boot).
    pub fn store_now(&self) -> Option<SystemTime> {
        let since = boot_ms()?.checked_sub(self.boot_ms)?;
        Some(UNIX_EPOCH + Duration::from_millis(self.store_unix_ms + since))
    }

    /// How long ago, by the boot clock, the reading was taken.
    pub fn age(&self) -> Option<Duration> {
        Some(Duration::from_millis(boot_ms()?.checked_sub(self.boot_ms)?))
    }
}

/// Milliseconds since boot, counting suspended time; a wall-clock step does not move it.
pub(crate) fn boot_ms() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000)
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), read once: a boot-clock reading, a
/// pid or a lock means nothing on another boot. `None` where the system has none.
pub fn boot_id() -> Option<&'static str> {
    static ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
    .as_deref()
}

/// This host's name (its UTS namespace's own), as refs and marks name where something
/// was made; "localhost" where the system gives none.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_carries_the_store_time_forward_by_the_boot_clock() {
        let now = boot_ms().expect("a boot clock");
        let r = ClockReading {
            store_unix_ms: 1_000_000,
            boot_ms: now - 5_000,
        };
        let t = r.store_now().expect("same boot");
        let ms = t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!((1_005_000..1_006_000).contains(&ms), "{ms}");
        let later_boot = ClockReading {
            store_unix_ms: 1_000_000,
            boot_ms: now + 60_000,
        };
        assert_eq!(later_boot.store_now(), None);
    }

    #[test]
    fn the_store_clock_moves_with_the_monotonic_clock_from_where_it_was_set() {
        let c = StoreClock::ours();
        let t = UNIX_EPOCH + Duration::from_secs(1_000);
        c.set(t);
        let now = c.now().duration_since(t).unwrap();
        assert!(now < Duration::from_secs(5), "{now:?}");
    }
}
