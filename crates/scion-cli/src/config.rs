//! What `scion config` prints.

use std::time::Duration;

use scion_core::ops::config::PageCompressionChange;
use scion_core::Scion;

use crate::output::Printer;

impl Printer {
    /// The settings, and what this run changed: page compression, and the history
    /// retention as (before, after).
    pub fn config(
        &self,
        s: &Scion,
        change: Option<PageCompressionChange>,
        retention_change: Option<(Duration, Duration)>,
    ) -> anyhow::Result<()> {
        let retention = s.engine().history_retention()?;
        let compression_changed = change.filter(|c| c.before != c.after);
        let retention_changed = retention_change.filter(|(before, after)| before != after);
        if self.json {
            let mut changed = serde_json::Map::new();
            if let Some(c) = compression_changed {
                changed.insert(
                    "page_compression".into(),
                    serde_json::json!({"before": c.before, "after": c.after}),
                );
            }
            if let Some((before, after)) = retention_changed {
                changed.insert(
                    "history_retention_secs".into(),
                    serde_json::json!({"before": before.as_secs(), "after": after.as_secs()}),
                );
            }
            self.emit(&serde_json::json!({
                "store": s.engine().location(),
                "store_id": s.engine().store_id(),
                "page_compression": s.engine().page_compression(),
                "min_grace_secs": s.engine().min_grace().as_secs(),
                "history_retention_secs": retention.as_secs(),
                // null when the store already had every setting asked for.
                "changed": (!changed.is_empty()).then_some(changed),
            }));
            return Ok(());
        }
        if let Some((before, after)) = retention_change {
            if before != after {
                outln!(
                    "history retention {} -> {}: from the next `scion gc` on, heads a branch's history names are kept this long",
                    scion_core::clock::format_duration(before.as_secs()),
                    scion_core::clock::format_duration(after.as_secs())
                );
            } else {
                outln!(
                    "history retention is already {}",
                    scion_core::clock::format_duration(after.as_secs())
                );
            }
        }
        match change {
            Some(c) if c.before != c.after => outln!(
                "page compression {} -> {}: new pages are stored {}; stored pages stay as they are (`scion compact <db>` rewrites a head)",
                c.before,
                c.after,
                match c.after {
                    scion_core::PageCompression::Lz4 => "lz4-compressed",
                    scion_core::PageCompression::Uncompressed => "raw",
                }
            ),
            Some(c) => outln!("page compression is already {}", c.after),
            None => {}
        }
        outln!(
            "store:             {} (id {})",
            s.engine().location(),
            s.engine().store_id()
        );
        outln!("page compression:  {}", s.engine().page_compression());
        outln!(
            "minimum gc grace:  {} (fixed at init)",
            scion_core::clock::format_duration(s.engine().min_grace().as_secs())
        );
        outln!(
            "history retention: {} (heads the head history names are kept from gc this long)",
            scion_core::clock::format_duration(retention.as_secs())
        );
        Ok(())
    }
}
