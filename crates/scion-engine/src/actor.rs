//! Who a head move is made for, when a front end knows it better than the process does: a
//! daemon request made with a scoped token, an MCP server acting for its agent. The front
//! end runs the operation inside [`acting_as`]; every head-history entry the operation
//! writes on this thread records the actor as `by`.

use std::cell::RefCell;

thread_local! {
    static ACTOR: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Run `f` with `actor` recorded as who its head moves are for (on this thread).
pub fn acting_as<T>(actor: Option<&str>, f: impl FnOnce() -> T) -> T {
    let before = ACTOR.with(|a| a.replace(actor.map(str::to_string)));
    // Put the previous actor back however `f` ends.
    struct Restore(Option<String>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            ACTOR.with(|a| *a.borrow_mut() = before);
        }
    }
    let _restore = Restore(before);
    f()
}

/// The actor set by the innermost [`acting_as`] on this thread.
pub(crate) fn current() -> Option<String> {
    ACTOR.with(|a| a.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_actor_is_set_for_the_call_and_restored_after() {
        assert_eq!(current(), None);
        acting_as(Some("token:ci"), || {
            assert_eq!(current().as_deref(), Some("token:ci"));
            acting_as(None, || assert_eq!(current(), None));
            assert_eq!(current().as_deref(), Some("token:ci"));
        });
        assert_eq!(current(), None);
        let caught = std::panic::catch_unwind(|| acting_as(Some("x"), || panic!("boom")));
        assert!(caught.is_err());
        assert_eq!(current(), None);
    }
}
