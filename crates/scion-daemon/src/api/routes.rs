//! Every route of the API and what a scoped token needs to call it. The authorization
//! layer looks each matched route up here and refuses a scoped token on any route missing
//! from the table, and a test holds this table and `docs/openapi.json` to the same routes,
//! so a new route cannot go unchecked.

use crate::tokens::Verb;

/// What a route needs from a scoped token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Any valid token: health, readiness, the API's description, the list of databases.
    AnyToken,
    /// The verb on every branch of every database (a `*:VERB` grant).
    Everything(Verb),
    /// The verb on some branch of the `{db}` in the path.
    Database(Verb),
    /// The verb on the `{branch}` in the path (a token writes the branches it owns).
    Branch(Verb),
    /// A writable checkout needs `write`, a read-only one `read`.
    Checkout,
    /// `fork` on the body's `source` and on the new branch, which the token then owns.
    Fork,
    /// `merge` on the `{branch}` merged into, `read` on the body's `from`.
    Merge,
    /// `merge` on the body's `onto`, `read` on the `{branch}` promoted.
    Promote,
    /// `write` on the branch; a TTL that shortens one the token does not own needs `admin`.
    Touch,
    /// `write` on the branch; a safety fork needs `admin`.
    Destroy,
    /// `write` on the session's branch, or with `fork_from` as [`Need::Fork`].
    SessionOpen,
    /// The verb on the `{id}` session's branch.
    Session(Verb),
    /// `read` on the query's `from` and `to`.
    Diff,
    /// `read` on the body's `target`.
    Export,
    /// `read` on the query's `target`.
    Query,
}

#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub need: Need,
}

const fn route(method: &'static str, path: &'static str, need: Need) -> Route {
    Route { method, path, need }
}

use Need::{
    AnyToken, Branch, Checkout, Database, Destroy, Diff, Everything, Export, Promote, Session,
    SessionOpen, Touch,
};
use Verb::{Admin, Read, Write};

pub(crate) const ROUTES: &[Route] = &[
    route("GET", "/healthz", AnyToken),
    route("GET", "/readyz", AnyToken),
    route("GET", "/metrics", Everything(Read)),
    route("GET", "/v1/openapi.json", AnyToken),
    route("GET", "/v1/status", Everything(Read)),
    route("GET", "/v1/whoami", AnyToken),
    route("GET", "/v1/databases", AnyToken),
    route("POST", "/v1/databases", Everything(Admin)),
    route("GET", "/v1/databases/{db}/branches", Database(Read)),
    route("GET", "/v1/databases/{db}/graph", Database(Read)),
    route("GET", "/ui", AnyToken),
    route("GET", "/v1/query", Need::Query),
    route("POST", "/v1/branches", Need::Fork),
    route("GET", "/v1/branches/{branch}", Branch(Read)),
    route("DELETE", "/v1/branches/{branch}", Destroy),
    route("POST", "/v1/branches/{branch}/checkout", Checkout),
    route("DELETE", "/v1/branches/{branch}/checkout", Branch(Write)),
    route("GET", "/v1/branches/{branch}/checkpoints", Branch(Read)),
    route("POST", "/v1/branches/{branch}/checkpoints", Branch(Write)),
    route("POST", "/v1/branches/{branch}/rollback", Branch(Write)),
    route("POST", "/v1/branches/{branch}/promote", Promote),
    route("POST", "/v1/branches/{branch}/merge", Need::Merge),
    route("POST", "/v1/branches/{branch}/push", Branch(Admin)),
    route("POST", "/v1/branches/{branch}/pull", Branch(Write)),
    route("GET", "/v1/remotes", Everything(Read)),
    route("POST", "/v1/remotes", Everything(Admin)),
    route("DELETE", "/v1/remotes/{name}", Everything(Admin)),
    route("GET", "/v1/branches/{branch}/history", Branch(Read)),
    route("POST", "/v1/branches/{branch}/undo", Branch(Write)),
    route("POST", "/v1/branches/{branch}/restore", Branch(Write)),
    route("POST", "/v1/branches/{branch}/touch", Touch),
    route("POST", "/v1/branches/{branch}/protect", Branch(Admin)),
    route("GET", "/v1/diff", Diff),
    route("POST", "/v1/export", Export),
    route("POST", "/v1/gc", Everything(Admin)),
    route("GET", "/v1/sessions", Everything(Read)),
    route("POST", "/v1/sessions", SessionOpen),
    route("GET", "/v1/sessions/{id}", Session(Read)),
    route("DELETE", "/v1/sessions/{id}", Session(Write)),
    route("POST", "/v1/sessions/{id}/flush", Session(Write)),
    route("POST", "/v1/sessions/{id}/close", Session(Write)),
    route("GET", "/v1/events", Everything(Read)),
];

/// The table's entry for a matched route.
pub fn find(method: &str, path: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.method == method && r.path == path)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::api::routes::ROUTES;

    #[test]
    fn the_route_table_and_the_openapi_document_name_the_same_routes() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../../docs/openapi.json")).unwrap();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if ["get", "post", "delete", "put", "patch"].contains(&method.as_str()) {
                    documented.insert((method.to_uppercase(), path.clone()));
                }
            }
        }
        let table: BTreeSet<(String, String)> = ROUTES
            .iter()
            .map(|r| (r.method.to_string(), r.path.to_string()))
            .collect();
        assert_eq!(documented, table);
    }
}
