//! Scoped tokens: named bearer tokens, each with grants (`shop@exp-*:write`,
//! `shop:read,fork`) and an optional expiry. Only a token's SHA-256 is kept, in a JSON file
//! readable by its owner alone (one others may read or write is refused); the daemon reads
//! the file again whenever it changes (its inode, size, mtime or ctime: a file put back
//! with its old mtime still has a new ctime), so a revoked token is refused from the next
//! request on. `create` and `revoke` change the file under an exclusive lock on a file
//! beside it, so concurrent ones never undo each other.

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

/// What tells one state of the token file from another without reading it: the kernel
/// sets the ctime on every change, and nobody can set it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileState {
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileState {
    fn of(path: &Path) -> Option<FileState> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileState {
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// The token file: where `scion token` writes and the daemon reads.
pub struct TokenStore {
    path: PathBuf,
    /// The file as last read, and its state then.
    cached: Mutex<Option<(FileState, TokenFile)>>,
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
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TokenFile::default()),
            Err(e) => return Err(self.io(e)),
        };
        self.check_owner_only(&f)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| self.io(e))?;
        serde_json::from_slice(&bytes).map_err(|e| TokenError::Unreadable {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }

    /// A token file that another user owns, or that others may read or write, is not
    /// trusted: anyone who could write it could grant themselves anything.
    fn check_owner_only(&self, f: &std::fs::File) -> Result<(), TokenError> {
        use std::os::unix::fs::MetadataExt;
        let m = f.metadata().map_err(|e| self.io(e))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let reason = if m.uid() != me {
            Some(format!(
                "it belongs to uid {}, not this user ({me})",
                m.uid()
            ))
        } else if m.mode() & 0o077 != 0 {
            Some(format!(
                "others may read or write it (mode {:o}): `chmod 600 {}`",
                m.mode() & 0o777,
                self.path.display()
            ))
        } else {
            None
        };
        match reason {
            Some(reason) => Err(TokenError::Unreadable {
                path: self.path.clone(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// Hold the exclusive lock that orders every change of the token file.
    fn lock(&self) -> Result<std::fs::File, TokenError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join(name))
            .map_err(|e| self.io(e))?;
        f.lock().map_err(|e| self.io(e))?;
        Ok(f)
    }

    /// Write the whole file (owner-only), by a rename so a reader never sees half of it.
    /// Called with the lock held.
    fn write(&self, file: &TokenFile) -> Result<(), TokenError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).expect("the OS random source is available");
        let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let tmp = dir.join(format!(".tokens-{nonce}.tmp"));
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
        std::fs::rename(&tmp, &self.path).map_err(|e| self.io(e))?;
        // The rename is durable only once the directory is.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io(e))
    }

    /// Make a token: the secret (shown once) and its record (kept).
    pub fn create(
        &self,
        name: &str,
        grants: Vec<Grant>,
        ttl: Option<std::time::Duration>,
    ) -> Result<(String, TokenRecord), TokenError> {
        if name.is_empty() {
            return Err(TokenError::Invalid(
                "a token needs a name (e.g. ci, agent-7)".into(),
            ));
        }
        scion_core::Owner::new(&format!("token:{name}"))
            .map_err(|e| TokenError::Invalid(format!("token name: {e}")))?;
        if grants.is_empty() {
            return Err(TokenError::Invalid(
                "a token needs at least one --grant".into(),
            ));
        }
        if ttl.is_some_and(|t| t.as_secs() == 0) {
            return Err(TokenError::Invalid(
                "a TTL under a second makes a token that is expired when made: give e.g. 1h, or no --ttl".into(),
            ));
        }
        let _lock = self.lock()?;
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
        let _lock = self.lock()?;
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
        let mut cached = self.cached.lock().expect("token cache lock");
        let file = match FileState::of(&self.path) {
            // No file: no tokens (and nothing cached that a new file could be confused with).
            None => {
                *cached = None;
                TokenFile::default()
            }
            Some(state) => {
                if cached.as_ref().is_none_or(|(s, _)| *s != state) {
                    // The state is taken before the read: a change during the read makes
                    // the next state differ, and the file is read again then.
                    let file = self.read()?;
                    *cached = Some((state, file));
                }
                cached.as_ref().expect("just read").1.clone()
            }
        };
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
        assert!(matches!(
            store.create(
                "old",
                vec!["shop:read".parse().unwrap()],
                Some(std::time::Duration::ZERO)
            ),
            Err(TokenError::Invalid(_))
        ));
        let (old, _) = store
            .create(
                "old",
                vec!["shop:read".parse().unwrap()],
                Some(std::time::Duration::from_secs(1)),
            )
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(store.check(&old).unwrap(), Presented::Expired("old".into()));
    }
}
