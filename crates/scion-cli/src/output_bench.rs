//! The human rendering of `scion bench fork` (its JSON is the report itself).

use scion_bench::fork::ForkBenchReport;

use crate::output::{bytes, Printer};

impl Printer {
    pub fn bench_fork(&self, r: &ForkBenchReport) {
        if self.json {
            return self.emit(r);
        }
        outln!("{}", r.machine.line());
        outln!(
            "\nfork (in-process, median of {} runs after a warm-up)",
            r.forks[0].fork_at_head.runs
        );
        outln!(
            "  {:>9}  {:>10}  {:>12}  {:>14}  {:>12}  {:>18}",
            "size",
            "db bytes",
            "at head ms",
            "at checkpt ms",
            "per fork",
            "100 forks"
        );
        for f in &r.forks {
            outln!(
                "  {:>9}  {:>10}  {:>12.3}  {:>14.3}  {:>12}  {:>18}",
                format!("{} MiB", f.size_mib),
                bytes(f.db_bytes),
                f.fork_at_head.median_ms,
                f.fork_at_checkpoint.median_ms,
                format!("{} obj {} B", f.objects_per_fork, f.bytes_per_fork),
                format!(
                    "{} obj {}",
                    f.objects_for_100_forks,
                    bytes(f.bytes_for_100_forks)
                ),
            );
        }
        outln!(
            "  fork time, largest over smallest (timed in alternation): {:.2}x (budget <= 1.5x)",
            r.fork_time_ratio
        );
        for f in &r.forks {
            outln!(
                "  {:>9}  fork with the source checked out (and the CLI's look at it): {:.3} ms, {:.2}x the fork without (goal <= 1.2x)",
                format!("{} MiB", f.size_mib),
                f.fork_with_checkout.median_ms,
                f.fork_with_checkout.median_ms / f.fork_at_head.median_ms
            );
        }
        outln!("\nrollback and promote (each keeps a safety fork; budget <= 2 objects, <= 1 KiB besides the ref's head history of at most 16 entries, flat in size)");
        for f in &r.forks {
            outln!(
                "  {:>9}  rollback {:.3} ms, {} obj {} B ({} B history)   promote {:.3} ms, {} obj {} B ({} B history)",
                format!("{} MiB", f.size_mib),
                f.rollback.time.median_ms,
                f.rollback.objects,
                f.rollback.bytes,
                f.rollback.history_bytes,
                f.promote.time.median_ms,
                f.promote.objects,
                f.promote.bytes,
                f.promote.history_bytes
            );
        }
        let c = &r.commit_cost;
        outln!(
            "\nsingle-row commits at {} MiB ({} commits): {:.0} B added to the store per commit (max {} B; segment {:.0} B, checkpoint object {} B), {:.1} pages changed (budget <= 1536 B); {:.3} ms per checkpoint (median; min/max {:.3}/{:.3})",
            c.size_mib, c.commits, c.store_bytes_added_per_commit, c.store_bytes_added_max, c.segment_bytes_per_commit, c.checkpoint_object_bytes, c.pages_changed_per_commit, c.time.median_ms, c.time.min_ms, c.time.max_ms
        );
        let k = &r.clean_checkpoint;
        outln!(
            "checkpoint of a clean checkout: {:.3} ms median, {} data objects written, {} object (the checkpoint name) per checkpoint",
            k.time.median_ms, k.data_objects_written, k.objects_written_per_checkpoint
        );
        let d = &r.dirty_checkpoint;
        outln!(
            "checkpoint of a dirty checkout at {} MiB (one row changed): {:.1} ms median = read + hash at {:.2} GB/s (budget >= 1 GB/s)",
            d.size_mib, d.time.median_ms, d.read_and_hash_gb_per_s
        );
        let c = &r.against_cp;
        for (what, m, baseline) in [
            ("materialize", &c.materialize, "cp"),
            (
                "materialize (store without page compression)",
                &c.materialize_uncompressed,
                "cp",
            ),
            ("export", &c.export, "cp + fsync"),
        ] {
            outln!(
                "{what} {} MiB: scion {:.0} ms vs {baseline} {:.0} ms (medians; min/max scion {:.0}/{:.0}, {baseline} {:.0}/{:.0}): {:.0} % of {baseline} throughput (goal >= 100 %)",
                m.size_mib, m.scion.median_ms, m.cp.median_ms, m.scion.min_ms, m.scion.max_ms, m.cp.min_ms, m.cp.max_ms, m.throughput_vs_cp * 100.0
            );
        }
        outln!(
            "re-checkout of a clean checkout: {:.3} ms median (budget <= 1 ms)",
            r.recheckout_clean.median_ms
        );
        let f = &r.refresh;
        outln!(
            "rollback of a checked-out {} MiB branch, clean, one row away from the target: {:.1} ms vs cp of the file {:.0} ms (medians): {:.3}x (goal <= 1)",
            f.size_mib, f.rollback.median_ms, f.cp.median_ms, f.vs_cp
        );
        outln!(
            "rollback of a checked-out {} MiB branch discarding a one-row change (force): {:.0} ms vs cp of the file {:.0} ms (medians): {:.2}x (goal <= 1)",
            f.size_mib, f.rollback_discarding.median_ms, f.cp.median_ms, f.discarding_vs_cp
        );
        for d in &r.diffs {
            outln!(
                "diff at {} MiB of two versions {} pages apart ({} rows changed): {} of {} pages read, {:.1} ms median with clean checkouts ({:.1} ms from the store alone); ATTACH + JOIN of the two files {:.1} ms: {:.3}x (goal <= 1)",
                d.size_mib, d.pages_differing, d.rows_changed, d.pages_read, d.page_count, d.time.median_ms,
                d.time_store_only.median_ms, d.attach_join.median_ms, d.vs_attach_join
            );
        }
    }
}
