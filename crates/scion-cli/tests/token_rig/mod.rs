//! A real `scion serve` with a tokens file, its own full token and socket tokens on, for
//! the tests of scoped tokens.
#![allow(dead_code)]

use std::path::PathBuf;

use scion_daemon::client::Reply;
use serde_json::Value;

use crate::served::Served;

pub struct Rig {
    pub s: Served,
    pub tokens: PathBuf,
    /// The daemon's own (full) token, for setting up what the tests attack.
    pub admin: String,
}

impl Rig {
    pub fn new(dir: &std::path::Path, extra: &[&str]) -> Rig {
        let mut s = Served::prepare(dir, 20);
        s.scion(&["fork", "shop", "exp-1"]);
        let tokens = dir.join("cfg").join("tokens.json");
        let admin_file = dir.join("admin.token");
        std::fs::write(&admin_file, "admin-secret-0123456789").unwrap();
        let mut args = vec![
            "--tokens",
            tokens.to_str().unwrap(),
            "--token-file",
            admin_file.to_str().unwrap(),
            "--socket-tokens",
        ];
        args.extend_from_slice(extra);
        s.start(&args);
        Rig {
            s,
            tokens,
            admin: "admin-secret-0123456789".into(),
        }
    }

    /// `scion token create NAME --grant ...`: the token.
    pub fn token(&self, name: &str, grants: &[&str], ttl: Option<&str>) -> String {
        let mut args = vec![
            "token",
            "create",
            name,
            "--tokens",
            self.tokens.to_str().unwrap(),
        ];
        for g in grants {
            args.extend(["--grant", g]);
        }
        if let Some(t) = ttl {
            args.extend(["--ttl", t]);
        }
        self.s.scion(&args).trim().to_string()
    }

    /// A request over the socket with `token`: status and body.
    pub fn call(&self, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let r = self.call_with(token, method, path, body, &[]);
        (r.status, r.body)
    }

    /// A request with `token` and more headers: the whole reply.
    pub fn call_with(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let auth = format!("Bearer {token}");
        let mut all = vec![("authorization", auth.as_str())];
        all.extend_from_slice(headers);
        self.s
            .client()
            .raw(method, path, body.as_ref(), &all)
            .unwrap()
    }

    /// What the store holds: every branch of shop, its version and rows.
    pub fn state(&self) -> Vec<(String, String)> {
        let listed: Value =
            serde_json::from_str(&self.s.scion(&["branches", "shop", "--json"])).unwrap();
        let mut out: Vec<(String, String)> = listed["branches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let name = b["branch"].as_str().unwrap().to_string();
                let rows =
                    self.s
                        .scion(&["sql", &format!("shop@{name}"), "SELECT count(*) FROM items"]);
                (name, format!("v{} rows {}", b["version"], rows.trim()))
            })
            .collect();
        out.sort();
        out
    }
}
