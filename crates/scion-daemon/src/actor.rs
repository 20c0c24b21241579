//! The actor of the request being answered (a scoped token's `token:NAME`, or what a
//! full-access client named itself), carried with the request's task so that the
//! operations it runs record it in head histories and the events it emits name it.

tokio::task_local! {
    pub static ACTOR: Option<String>;
}

/// The actor of the request this task answers, if any.
pub fn current_actor() -> Option<String> {
    ACTOR.try_with(Clone::clone).ok().flatten()
}
