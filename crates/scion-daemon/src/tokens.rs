//! Scoped tokens: named bearer tokens, each with grants (`shop@exp-*:write`,
//! `shop:read,fork`) and an optional expiry. Only a token's SHA-256 is kept, in a JSON file
//! readable by its owner alone; the daemon reads the file again whenever it changes, so a
//! revoked token is refused from the next request on.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use scion_core::BranchPattern;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a grant allows, each verb including the ones before it: `read` (every reading
/// route), `fork` (new branches from what it reads, owned by the token), `write` (change
/// branches: checkout, checkpoint, sessions, rollback, undo, restore, touch, destroy),
/// `merge` (merge into and promote onto), `admin` (protect, create, gc, metrics, events,
/// and anything else).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    Read,
    Fork,
    Write,
    Merge,
    Admin,
}

impl FromStr for Verb {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read" => Ok(Verb::Read),
            "fork" => Ok(Verb::Fork),
            "write" => Ok(Verb::Write),
            "merge" => Ok(Verb::Merge),
            "admin" => Ok(Verb::Admin),
            _ => Err(format!(
                "{s:?} is not a verb: read, fork, write, merge or admin"
            )),
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verb::Read => "read",
            Verb::Fork => "fork",
            Verb::Write => "write",
            Verb::Merge => "merge",
            Verb::Admin => "admin",
        })
    }
}

/// One grant: branches and what may be done to them (`shop@exp-*:write`; a bare `*`
/// pattern means every branch of every database).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Grant {
    pub pattern: BranchPattern,
    /// The strongest verb listed: every weaker one comes with it.
    pub verb: Verb,
}

impl Grant {
    /// Whether this grant allows `verb` on `db@branch`.
    pub(crate) fn allows(&self, verb: Verb, db: &str, branch: &str) -> bool {
        self.verb >= verb && self.pattern.matches(db, branch)
    }
}

impl FromStr for Grant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (pattern, verbs) = s.rsplit_once(':').ok_or_else(|| {
            format!(
                "grant {s:?}: expected PATTERN:VERBS, e.g. 'shop@exp-*:write' or 'shop:read,fork'"
            )
        })?;
        let pattern = if pattern == "*" { "*@*" } else { pattern };
        let verbs: BTreeSet<Verb> = verbs
            .split(',')
            .map(|v| v.trim().parse())
            .collect::<Result<_, String>>()
            .map_err(|e| format!("grant {s:?}: {e}"))?;
        Ok(Grant {
            pattern: pattern.parse().map_err(|e| format!("grant {e}"))?,
            verb: *verbs
                .iter()
                .max()
                .ok_or("a grant names at least one verb")?,
        })
    }
}

impl TryFrom<String> for Grant {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Grant> for String {
    fn from(g: Grant) -> String {
        g.to_string()
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.pattern, self.verb)
    }
}

/// A token as kept: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub name: String,
    /// SHA-256 of the token, hex.
    pub sha256: String,
    pub grants: Vec<Grant>,
    /// Unix seconds.
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl TokenRecord {
    pub fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|e| now >= e)
    }

    /// Who moves made with this token are for, in head histories and as branch owner.
    pub fn actor(&self) -> String {
        format!("token:{}", self.name)
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct TokenFile {
    tokens: Vec<TokenRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a token file: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("a token named {0:?} exists: revoke it first, or pick another name")]
    Exists(String),
    #[error("no token is named {0:?}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
}

/// What a presented token turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presented {
    Valid(TokenRecord),
    Expired(String),
    Unknown,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token file: where `scion token` writes and the daemon reads.
pub struct TokenStore {
    path: PathBuf,
    /// The file as last read, and its modification time then.
    cached: Mutex<Option<(Option<SystemTime>, TokenFile)>>,
}

impl TokenStore {
    pub fn new(path: PathBuf) -> Self {
        TokenStore {
            path,
            cached: Mutex::new(None),
        }
    }

    /// `$SCION_TOKENS`, else `tokens.json` in the user's scion configuration directory.
    pub fn default_path() -> PathBuf {
        if let Some(p) = std::env::var_os("SCION_TOKENS") {
            return PathBuf::from(p);
        }
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .unwrap_or_else(|| PathBuf::from("."));
        config.join("scion").join("tokens.json")
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> TokenError {
        TokenError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn read(&self) -> Result<TokenFile, TokenError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| TokenError::Unreadable {
                path: self.path.clone(),
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TokenFile::default()),
            Err(e) => Err(self.io(e)),
        }
    }

    /// Write the whole file (owner-only), by a rename so a reader never sees half of it.
    fn write(&self, file: &TokenFile) -> Result<(), TokenError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        let tmp = dir.join(format!(".tokens-{}.tmp", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| self.io(e))?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| self.io(e))?;
        let bytes = serde_json::to_vec_pretty(file).expect("token records serialize");
        f.write_all(&bytes).map_err(|e| self.io(e))?;
        f.sync_all().map_err(|e| self.io(e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| self.io(e))
    }

    /// Make a token: the secret (shown once) and its record (kept).
    pub fn create(
        &self,
        name: &str,
        grants: Vec<Grant>,
        ttl: Option<std::time::Duration>,
    ) -> Result<(String, TokenRecord), TokenError> {
        scion_core::Owner::new(&format!("token:{name}"))
            .map_err(|e| TokenError::Invalid(format!("token name: {e}")))?;
        if grants.is_empty() {
            return Err(TokenError::Invalid(
                "a token needs at least one --grant".into(),
            ));
        }
        let mut file = self.read()?;
        if file.tokens.iter().any(|t| t.name == name) {
            return Err(TokenError::Exists(name.to_string()));
        }
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).expect("the OS random source is available");
        let secret = format!(
            "scion_{}",
            random
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let now = now_secs();
        let record = TokenRecord {
            name: name.to_string(),
            sha256: sha256_hex(&secret),
            grants,
            created_at: now,
            expires_at: ttl.map(|t| now + t.as_secs()),
        };
        file.tokens.push(record.clone());
        self.write(&file)?;
        Ok((secret, record))
    }

    pub fn list(&self) -> Result<Vec<TokenRecord>, TokenError> {
        Ok(self.read()?.tokens)
    }

    pub fn revoke(&self, name: &str) -> Result<TokenRecord, TokenError> {
        let mut file = self.read()?;
        let i = file
            .tokens
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| TokenError::NotFound(name.to_string()))?;
        let gone = file.tokens.remove(i);
        self.write(&file)?;
        Ok(gone)
    }

    /// Which token `presented` is, reading the file again when it changed. Every record is
    /// compared (in constant time), so the answer's timing does not depend on the token.
    pub(crate) fn check(&self, presented: &str) -> Result<Presented, TokenError> {
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        let mut cached = self.cached.lock().expect("token cache lock");
        if cached
            .as_ref()
            .is_none_or(|(m, _)| *m != modified || modified.is_none())
        {
            *cached = Some((modified, self.read()?));
        }
        let file = &cached.as_ref().expect("just read").1;
        let hash = sha256_hex(presented);
        let mut found = None;
        for t in &file.tokens {
            if constant_time_eq(t.sha256.as_bytes(), hash.as_bytes()) {
                found = Some(t.clone());
            }
        }
        Ok(match found {
            Some(t) if t.expired(now_secs()) => Presented::Expired(t.name),
            Some(t) => Presented::Valid(t),
            None => Presented::Unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::tokens::*;

    #[test]
    fn grants_parse_and_imply_the_weaker_verbs() {
        let g: Grant = "shop@exp-*:write".parse().unwrap();
        assert!(g.allows(Verb::Read, "shop", "exp-1"));
        assert!(g.allows(Verb::Fork, "shop", "exp-1"));
        assert!(g.allows(Verb::Write, "shop", "exp-1"));
        assert!(!g.allows(Verb::Merge, "shop", "exp-1"));
        assert!(!g.allows(Verb::Read, "shop", "main"));
        let r: Grant = "shop:read,fork".parse().unwrap();
        assert_eq!(r.to_string(), "shop@*:fork");
        assert!(r.allows(Verb::Fork, "shop", "main"));
        let all: Grant = "*:admin".parse().unwrap();
        assert!(all.allows(Verb::Admin, "crm", "x"));
        for bad in ["shop", "shop:", "shop:own", "Shop:read"] {
            assert!(bad.parse::<Grant>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tokens_are_kept_as_hashes_in_an_owner_only_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("cfg").join("tokens.json"));
        let (secret, record) = store
            .create("ci", vec!["shop:read".parse().unwrap()], None)
            .unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains(&secret));
        assert!(text.contains(&record.sha256));
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(store.check(&secret).unwrap(), Presented::Valid(record));
        assert_eq!(store.check("scion_nope").unwrap(), Presented::Unknown);
        assert!(matches!(
            store.create("ci", vec!["shop:read".parse().unwrap()], None),
            Err(TokenError::Exists(_))
        ));
        store.revoke("ci").unwrap();
        assert_eq!(store.check(&secret).unwrap(), Presented::Unknown);
        let (old, _) = store
            .create(
                "old",
                vec!["shop:read".parse().unwrap()],
                Some(std::time::Duration::ZERO),
            )
            .unwrap();
        assert_eq!(store.check(&old).unwrap(), Presented::Expired("old".into()));
    }
}
