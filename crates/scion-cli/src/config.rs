//! What `scion config` prints.

use scion_core::ops::config::PageCompressionChange;
use scion_core::Scion;

use crate::output::Printer;

impl Printer {
    pub fn config(&self, s: &Scion, change: Option<PageCompressionChange>) {
        if self.json {
            return self.emit(&serde_json::json!({
                "store": s.location(),
                "store_id": s.store_id(),
                "page_compression": s.page_compression(),
                "min_grace_secs": s.min_grace().as_secs(),
                // null when the store already kept pages that way.
                "changed": change.filter(|c| c.before != c.after).map(|c| serde_json::json!({
                    "page_compression": {"before": c.before, "after": c.after},
                })),
            }));
        }
        match change {
            Some(c) if c.before != c.after => println!(
                "page compression {} -> {}: new pages are stored {}; stored pages stay as they are (`scion compact <db>` rewrites a head)",
                c.before,
                c.after,
                match c.after {
                    scion_core::PageCompression::Lz4 => "lz4-compressed",
                    scion_core::PageCompression::Uncompressed => "raw",
                }
            ),
            Some(c) => println!("page compression is already {}", c.after),
            None => {}
        }
        println!("store:             {} (id {})", s.location(), s.store_id());
        println!("page compression:  {}", s.page_compression());
        println!(
            "minimum gc grace:  {} (fixed at init)",
            humantime::format_duration(s.min_grace())
        );
    }
}
