//! `scion token`: scoped tokens for the daemon's API, kept as hashes in the token file.

use anyhow::{Context, Result};
use scion_core::clock::parse_duration;
use scion_daemon::tokens::{Grant, TokenRecord, TokenStore};
use serde_json::json;

use crate::cli::Cli;
use crate::cli_daemon::{TokenCommand, TokenFileArg};

fn store(file: &TokenFileArg) -> TokenStore {
    TokenStore::new(file.tokens.clone().unwrap_or_else(TokenStore::default_path))
}

fn when(secs: u64) -> String {
    scion_core::clock::StoreTime::from_store_clock(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs),
    )
    .to_string()
}

fn describe(t: &TokenRecord) -> serde_json::Value {
    json!({
        "name": t.name,
        "grants": t.grants.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "created_at": t.created_at,
        "expires_at": t.expires_at,
    })
}

pub fn token(cli: &Cli, cmd: &TokenCommand) -> Result<()> {
    match cmd {
        TokenCommand::Create {
            name,
            grants,
            ttl,
            file,
        } => {
            let grants: Vec<Grant> = grants
                .iter()
                .map(|g| g.parse())
                .collect::<Result<_, String>>()
                .map_err(anyhow::Error::msg)?;
            let ttl = ttl.as_deref().map(parse_duration).transpose()?;
            let store = store(file);
            let (secret, record) = store
                .create(name, grants, ttl)
                .with_context(|| format!("creating token {name}"))?;
            if cli.json {
                let mut v = describe(&record);
                v["token"] = json!(secret);
                v["file"] = json!(store.path());
                outln!("{v}");
            } else {
                outln!("{secret}");
                eprintln!(
                    "token {name}: {} ({}); shown once, only its hash is kept in {}",
                    record
                        .grants
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    match record.expires_at {
                        Some(e) => format!("expires {}", when(e)),
                        None => "never expires".to_string(),
                    },
                    store.path().display()
                );
            }
        }
        TokenCommand::List { file } => {
            let list = store(file).list()?;
            if cli.json {
                let v: Vec<_> = list.iter().map(describe).collect();
                outln!("{}", json!({ "tokens": v }));
            } else if list.is_empty() {
                outln!("no tokens (scion token create NAME --grant 'db@branch:verbs')");
            } else {
                for t in &list {
                    outln!(
                        "{}  {}  created {}{}",
                        t.name,
                        t.grants
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        when(t.created_at),
                        t.expires_at
                            .map(|e| format!(", expires {}", when(e)))
                            .unwrap_or_default()
                    );
                }
            }
        }
        TokenCommand::Revoke { name, file } => {
            let gone = store(file).revoke(name)?;
            if cli.json {
                outln!("{}", json!({"revoked": gone.name}));
            } else {
                outln!(
                    "revoked token {}: a daemon refuses it from its next request",
                    gone.name
                );
            }
        }
    }
    Ok(())
}
