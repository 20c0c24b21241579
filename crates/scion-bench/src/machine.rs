//! The header line: what machine a result came from.

use std::path::Path;

use scion_core::checkout::{probe_clone, CloneCapability};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: u64,
    pub filesystem: String,
    pub can_clone: bool,
    pub sqlite: String,
    pub scion: String,
    pub os: String,
}

fn fs_name(dir: &Path) -> String {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: statfs fills the zeroed struct for a valid NUL-terminated path.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return "unknown".into();
    }
    match s.f_type as u64 {
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlayfs".into(),
        other => format!("0x{other:x}"),
    }
}

pub fn describe(dir: &Path) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().map(|l| l.to_string()))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<u64>().ok())
        })
        .map(|kib| kib / 1024 / 1024)
        .unwrap_or(0);
    Machine {
        cpu,
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        memory_gib,
        filesystem: fs_name(dir),
        can_clone: matches!(probe_clone(dir), Ok(CloneCapability::Supported)),
        sqlite: rusqlite::version().to_string(),
        scion: env!("CARGO_PKG_VERSION").to_string(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
    }
}

impl Machine {
    pub fn line(&self) -> String {
        format!(
            "machine: {} ({} cores, {} GiB), {} on {} (clone: {}), SQLite {}, scion {}",
            self.cpu,
            self.cores,
            self.memory_gib,
            self.os,
            self.filesystem,
            if self.can_clone { "yes" } else { "no" },
            self.sqlite,
            self.scion
        )
    }
}
