//! `scion log <db> --graph`: a database's branches drawn as a tree by lineage (each
//! branch under the branch it was forked from), with what a reader of a tree of agent or
//! search states needs on each line: head version, fork point, checkpoints, protection,
//! TTL, a live lease or checkout, safety forks. Deep, idle subtrees are folded into one
//! line so that a thousand-branch tree stays readable; `--all` unfolds everything.

use anstyle::{AnsiColor, Style};
use scion_core::ops::graph::MergeOnLine;
use scion_core::ops::status::BranchStatus;
pub use scion_core::ops::tree::{build, TreeNode};

/// How much of the tree to draw.
#[derive(Debug, Clone)]
pub struct GraphOptions {
    /// The database the branches are of (named in hints).
    pub db: String,
    /// Draw every branch: nothing folded, no limit.
    pub all: bool,
    /// Fold idle subtrees that start deeper than this many forks below their root.
    pub depth: usize,
    /// Draw at most this many branches.
    pub limit: Option<usize>,
    /// The store's clock now, in Unix milliseconds (a branch's idleness is judged by it).
    pub now_unix_ms: u64,
    /// A branch untouched for this long is idle (foldable), unless it has a live lease
    /// or a writable checkout.
    pub idle_ms: u64,
}

/// Whether anything in `t`'s subtree is in use: a live lease, a writable checkout, a
/// commit or touch less than `o.idle_ms` ago.
fn active(t: &TreeNode<'_>, o: &GraphOptions) -> bool {
    let b = t.status;
    let touched = scion_core::clock::unix_ms(b.touched_at.as_system_time());
    b.lease.as_ref().is_some_and(|l| l.live)
        || !b.checked_out.is_empty()
        || o.now_unix_ms.saturating_sub(touched) < o.idle_ms
        || t.children.iter().any(|c| active(c, o))
}

/// The lines of the drawing, styled (the caller's stream drops the styles where colour
/// is off).
pub fn render(trees: &[TreeNode<'_>], o: &GraphOptions) -> Vec<String> {
    let mut r = Renderer {
        o,
        lines: Vec::new(),
        shown: 0,
        left: trees.iter().map(TreeNode::size).sum(),
    };
    for t in trees {
        r.node(t, "", "", 0);
    }
    if r.left > 0 {
        r.lines.push(dim(&format!(
            "… {} more branch{} not shown (-n N for more, --all for every one)",
            r.left,
            plural(r.left)
        )));
    }
    r.lines
}

struct Renderer<'o> {
    o: &'o GraphOptions,
    lines: Vec<String>,
    shown: usize,
    /// Branches not drawn yet nor folded into a line.
    left: usize,
}

impl Renderer<'_> {
    fn node(&mut self, t: &TreeNode<'_>, lead: &str, rest: &str, depth: usize) {
        if self.o.limit.is_some_and(|n| self.shown >= n) {
            return;
        }
        self.shown += 1;
        self.left -= 1;
        self.lines
            .push(format!("{lead}{}", label(t.status, depth > 0)));
        let below = if t.children.is_empty() {
            "   "
        } else {
            "│  "
        };
        for m in t.merges.iter().take(MERGES_SHOWN) {
            self.lines.push(format!("{rest}{below}{}", merge_line(m)));
        }
        if t.merges.len() > MERGES_SHOWN {
            let more = t.merges.len() - MERGES_SHOWN;
            self.lines.push(format!(
                "{rest}{below}{}",
                dim(&format!(
                    "⇠ … {more} earlier merge{}",
                    if more == 1 { "" } else { "s" }
                ))
            ));
        }
        let fold = !self.o.all && depth >= self.o.depth;
        let (open, folded): (Vec<_>, Vec<_>) =
            t.children.iter().partition(|c| !fold || active(c, self.o));
        let count = open.len() + usize::from(!folded.is_empty());
        for (k, c) in open.iter().enumerate() {
            let last = k + 1 == count;
            let (l, r) = if last {
                ("└─ ", "   ")
            } else {
                ("├─ ", "│  ")
            };
            self.node(c, &format!("{rest}{l}"), &format!("{rest}{r}"), depth + 1);
        }
        if !folded.is_empty() && self.o.limit.is_none_or(|n| self.shown < n) {
            let n: usize = folded.iter().map(|c| c.size()).sum();
            let deep = folded.iter().map(|c| c.height() + 1).max().unwrap_or(1);
            self.left -= n;
            self.lines.push(format!(
                "{rest}└─ {}",
                dim(&format!(
                    "… {n} idle branch{} folded, up to {deep} fork{} deeper (--all, or `scion log {}@{} --graph`)",
                    plural(n),
                    if deep == 1 { "" } else { "s" },
                    self.o.db,
                    t.status.branch
                ))
            ));
        }
    }
}

/// Merges drawn under a branch's line; the rest are counted.
const MERGES_SHOWN: usize = 3;

/// `⇠ merged aa v3 as v5`: another line joining this one.
fn merge_line(m: &MergeOnLine) -> String {
    let from = match (&m.from_branch, m.from_version) {
        (Some(b), Some(v)) => format!("{b} v{v}"),
        (Some(b), None) => b.clone(),
        _ => format!("version {}", m.from_root),
    };
    let at = m.version.map(|v| format!(" as v{v}")).unwrap_or_default();
    format!(
        "{} {}",
        paint("⇠", Style::new().fg_color(Some(AnsiColor::Blue.into()))),
        dim(&format!("merged {from}{at}"))
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "es"
    }
}

fn dim(s: &str) -> String {
    paint(s, Style::new().dimmed())
}

fn paint(s: &str, st: Style) -> String {
    format!("{st}{s}{st:#}")
}

/// One branch's line: its name, then what is known of it. Drawn `under_parent`, its fork
/// point needs no parent's name.
fn label(b: &BranchStatus, under_parent: bool) -> String {
    let live = b.lease.as_ref().filter(|l| l.live);
    let colour = if live.is_some() || !b.checked_out.is_empty() {
        AnsiColor::Green
    } else if b.safety.is_some() {
        AnsiColor::Yellow
    } else {
        AnsiColor::Cyan
    };
    let name = paint(
        b.branch.as_str(),
        Style::new().bold().fg_color(Some(colour.into())),
    );
    let mut facts = vec![format!("v{}", b.version)];
    if let Some(p) = &b.forked_from {
        let from = if under_parent {
            "forked at"
        } else {
            "forked from"
        };
        let parent = if under_parent { "" } else { p.branch.as_str() };
        facts.push(match &p.checkpoint {
            Some(c) => format!("{from} {parent}@{c}"),
            None if under_parent => format!("{from} v{}", p.version),
            None => format!("{from} {parent} v{}", p.version),
        });
    }
    if b.protected {
        facts.push(paint(
            "protected",
            Style::new().fg_color(Some(AnsiColor::Magenta.into())),
        ));
    }
    if b.checkpoints > 0 {
        facts.push(format!(
            "{} checkpoint{}",
            b.checkpoints,
            if b.checkpoints == 1 { "" } else { "s" }
        ));
    }
    if let Some(left) = b.ttl_left_secs {
        facts.push(if left > 0 {
            format!(
                "ttl {} left",
                scion_core::clock::format_duration(left as u64)
            )
        } else {
            "ttl expired".to_string()
        });
    }
    if let Some(l) = live {
        facts.push(paint(
            &format!("leased by {}", l.holder),
            Style::new().fg_color(Some(AnsiColor::Green.into())),
        ));
    }
    if !b.checked_out.is_empty() {
        facts.push(format!("checked out at {}", b.checked_out.join(", ")));
    }
    if let Some(s) = &b.safety {
        facts.push(format!("safety fork: {s}"));
    }
    if let Some(o) = &b.owner {
        facts.push(format!("owner {o}"));
    }
    if b.ephemeral {
        facts.push("ephemeral".to_string());
    }
    // Plain facts are dimmed one by one, so a coloured one keeps its colour.
    let facts: Vec<String> = facts
        .into_iter()
        .map(|f| if f.contains('\u{1b}') { f } else { dim(&f) })
        .collect();
    format!("● {name}  {}", facts.join(&dim(" · ")))
}
