//! Scoped tokens against a real `scion serve`, each test named for a sequence that once got
//! through: a version a request names without the grant to read it, and answers kept for
//! one token's idempotency key served to another.

mod served;
mod token_rig;

use serde_json::json;
use token_rig::Rig;

#[test]
fn an_exp_write_token_dry_run_merge_with_base_shop_hidden_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    for b in ["exp-a", "exp-b", "hidden"] {
        rig.s.scion(&["fork", "shop", b]);
    }
    rig.s.scion(&[
        "sql",
        "shop@hidden",
        "UPDATE items SET name = 'secret-' || id",
    ]);
    rig.s
        .scion(&["sql", "shop@exp-a", "UPDATE items SET qty = 1"]);
    rig.s
        .scion(&["sql", "shop@exp-b", "UPDATE items SET qty = 2"]);
    let t = rig.token("agent", &["shop@exp-*:write"], None);
    let (st, _) = rig.call(&t, "GET", "/v1/branches/shop@hidden", None);
    assert_eq!(st, 403);
    for base in ["shop@hidden", "hidden"] {
        let (st, v) = rig.call(
            &t,
            "POST",
            "/v1/branches/shop@exp-a/merge",
            Some(json!({"from": "exp-b", "dry_run": true, "base": base})),
        );
        assert_eq!(st, 403, "base {base}: {v}");
        assert_eq!(v["error"]["missing_grant"], "shop@hidden:read", "{v}");
        assert!(!v.to_string().contains("secret-"), "{v}");
    }
    // A base it may read is taken.
    let (st, v) = rig.call(
        &t,
        "POST",
        "/v1/branches/shop@exp-a/merge",
        Some(json!({"from": "exp-b", "dry_run": true, "base": "shop@exp-b"})),
    );
    assert_eq!(st, 200, "{v}");
}

#[test]
fn a_crm_read_token_replaying_a_shop_read_tokens_key_gets_nothing_of_shops() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    rig.s.scion(&["create", "crm"]);
    let shop = rig.token("shop-reader", &["shop:read"], None);
    let crm = rig.token("crm-reader", &["crm:read"], None);
    let dry_run = || Some(json!({"from": "main", "dry_run": true}));
    let path = "/v1/branches/shop@exp-1/merge";
    let key = [("idempotency-key", "k-1")];
    let first = rig.call_with(&shop, "POST", path, dry_run(), &key);
    assert_eq!(first.status, 200, "{}", first.body);
    let again = rig.call_with(&shop, "POST", path, dry_run(), &key);
    assert_eq!((again.status, again.replayed), (200, true));
    // Another token with the same key and request: judged as its own request.
    let other = rig.call_with(&crm, "POST", path, dry_run(), &key);
    assert_eq!(other.status, 403, "{}", other.body);
    assert!(!other.replayed);
    assert_eq!(other.body["error"]["missing_grant"], "shop@main:read");
}

#[test]
fn a_refusal_kept_under_a_key_is_not_served_to_a_caller_who_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::new(dir.path(), &[]);
    rig.s.scion(&["create", "crm"]);
    let crm = rig.token("crm-reader", &["crm:read"], None);
    let dry_run = || Some(json!({"from": "main", "dry_run": true}));
    let path = "/v1/branches/shop@exp-1/merge";
    let key = [("idempotency-key", "k-2")];
    let refused = rig.call_with(&crm, "POST", path, dry_run(), &key);
    assert_eq!(refused.status, 403);
    let allowed = rig.call_with(&rig.admin, "POST", path, dry_run(), &key);
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    assert!(!allowed.replayed);
    // The refused caller, again: refused again, not given the admin's answer.
    let again = rig.call_with(&crm, "POST", path, dry_run(), &key);
    assert_eq!((again.status, again.replayed), (403, false));
}
