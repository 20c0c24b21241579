//! Medians and spreads of repeated measurements.

use std::time::{Duration, Instant};

use serde::Serialize;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    pub runs: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Summary {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = if ms.is_empty() {
            0.0
        } else if ms.len() % 2 == 1 {
            ms[ms.len() / 2]
        } else {
            (ms[ms.len() / 2 - 1] + ms[ms.len() / 2]) / 2.0
        };
        Summary {
            runs: ms.len(),
            median_ms: median,
            min_ms: ms.first().copied().unwrap_or(0.0),
            max_ms: ms.last().copied().unwrap_or(0.0),
        }
    }
}

/// Run `f` once to warm up, then `runs` times, timing each call only.
pub(crate) fn measure<T, E>(
    runs: usize,
    mut f: impl FnMut(usize) -> Result<T, E>,
) -> Result<Summary, E> {
    f(usize::MAX)?;
    let mut samples = Vec::with_capacity(runs);
    for i in 0..runs {
        let start = Instant::now();
        f(i)?;
        samples.push(start.elapsed());
    }
    Ok(Summary::of(&samples))
}

/// Time `a` and `b` in alternation (after one warm-up call of each), so that the state of
/// the machine (journal, page cache, other load) falls on both alike: the basis for a ratio
/// between two sub-millisecond operations that fsync.
pub(crate) fn measure_interleaved<E>(
    runs: usize,
    mut a: impl FnMut(usize) -> Result<(), E>,
    mut b: impl FnMut(usize) -> Result<(), E>,
) -> Result<(Summary, Summary), E> {
    a(usize::MAX)?;
    b(usize::MAX)?;
    let (mut sa, mut sb) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for i in 0..runs {
        // Alternate which goes first, so neither always follows the other's writeback.
        let first_a = i % 2 == 0;
        for turn in [first_a, !first_a] {
            let start = Instant::now();
            if turn {
                a(i)?;
                sa.push(start.elapsed());
            } else {
                b(i)?;
                sb.push(start.elapsed());
            }
        }
    }
    Ok((Summary::of(&sa), Summary::of(&sb)))
}

/// Flush the writeback a setup step left behind (generated databases, imports), so that it
/// does not land inside a timed region: every ref write fsyncs, and an fsync waits behind
/// whatever the journal has queued.
pub(crate) fn settle_disk() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}
