//! Progress bars on stderr for long operations (only on a terminal, only for big files).

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use scion_core::progress::Progress;

/// Phases shorter than this many pages (64 MiB of 4 KiB pages) finish too fast to need a bar.
const MIN_PAGES: u64 = 16_384;

#[derive(Default)]
pub struct Bar {
    bar: Mutex<Option<ProgressBar>>,
}

/// Transfers between stores count segments (up to 64 MiB each), not pages.
const SENDING: &str = "sending";
const MIN_SEGMENTS: u64 = 4;

impl Progress for Bar {
    fn start(&self, what: &'static str, total: u64) {
        let (min, unit) = if what == SENDING {
            (MIN_SEGMENTS, "segments")
        } else {
            (MIN_PAGES, "pages")
        };
        if total < min {
            return;
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(&format!(
            "{{msg:>8}} [{{bar:30}}] {{percent:>3}}% of {{len}} {unit}, {{eta}} left"
        )) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what);
        *self.bar.lock().unwrap() = Some(bar);
    }

    fn advance(&self, n: u64) {
        if let Some(bar) = self.bar.lock().unwrap().as_ref() {
            bar.inc(n);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.lock().unwrap().take() {
            bar.finish_and_clear();
        }
    }
}
