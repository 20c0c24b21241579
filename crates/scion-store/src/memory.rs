//! An in-process backend for tests: a sorted map under one mutex.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::backend::{check_range, content_etag};
use crate::key::validate_prefix;
use crate::{validate_key, Backend, ETag, ObjectMeta, PutMode, StoreError, StoreResult};

#[derive(Debug, Clone)]
struct Object {
    data: Vec<u8>,
    etag: ETag,
    written: SystemTime,
}

#[derive(Debug, Default)]
pub struct MemoryBackend {
    objects: Mutex<BTreeMap<String, Object>>,
}

impl MemoryBackend {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Object>> {
        // A panic while holding the lock cannot leave a half-written object (every update
        // is one insert), so a poisoned lock is still consistent.
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn meta(key: &str, o: &Object) -> ObjectMeta {
    ObjectMeta {
        key: key.to_string(),
        size: o.data.len() as u64,
        etag: o.etag.clone(),
        last_modified: o.written,
    }
}

impl Backend for MemoryBackend {
    fn get(&self, key: &str) -> StoreResult<(Vec<u8>, ETag)> {
        validate_key(key)?;
        let map = self.lock();
        let o = map.get(key).ok_or_else(|| StoreError::NotFound {
            key: key.to_string(),
        })?;
        Ok((o.data.clone(), o.etag.clone()))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> StoreResult<Vec<u8>> {
        validate_key(key)?;
        let map = self.lock();
        let o = map.get(key).ok_or_else(|| StoreError::NotFound {
            key: key.to_string(),
        })?;
        check_range(key, &range, o.data.len() as u64)?;
        Ok(o.data[range.start as usize..range.end as usize].to_vec())
    }

    fn head(&self, key: &str) -> StoreResult<ObjectMeta> {
        validate_key(key)?;
        let map = self.lock();
        map.get(key)
            .map(|o| meta(key, o))
            .ok_or_else(|| StoreError::NotFound {
                key: key.to_string(),
            })
    }

    fn put(&self, key: &str, data: &[u8], mode: PutMode) -> StoreResult<ETag> {
        validate_key(key)?;
        let mut map = self.lock();
        match (&mode, map.get(key)) {
            (PutMode::Create, Some(_)) => {
                return Err(StoreError::AlreadyExists {
                    key: key.to_string(),
                })
            }
            (PutMode::Update(want), Some(o)) if &o.etag != want => {
                return Err(StoreError::Conflict {
                    key: key.to_string(),
                })
            }
            (PutMode::Update(_), None) => {
                return Err(StoreError::Conflict {
                    key: key.to_string(),
                })
            }
            _ => {}
        }
        let etag = content_etag(data);
        map.insert(
            key.to_string(),
            Object {
                data: data.to_vec(),
                etag: etag.clone(),
                written: SystemTime::now(),
            },
        );
        Ok(etag)
    }

    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        validate_prefix(prefix)?;
        let map = self.lock();
        Ok(map
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, o)| meta(k, o))
            .collect())
    }

    fn delete(&self, key: &str) -> StoreResult<()> {
        validate_key(key)?;
        self.lock().remove(key);
        Ok(())
    }

    fn delete_if(&self, key: &str, etag: &ETag) -> StoreResult<()> {
        validate_key(key)?;
        let mut map = self.lock();
        match map.get(key) {
            Some(o) if &o.etag == etag => {
                map.remove(key);
                Ok(())
            }
            _ => Err(StoreError::Conflict {
                key: key.to_string(),
            }),
        }
    }

    fn exists(&self, key: &str) -> StoreResult<bool> {
        validate_key(key)?;
        Ok(self.lock().contains_key(key))
    }

    fn delete_many(&self, keys: &[String]) -> StoreResult<()> {
        crate::backend::delete_each(self, keys)
    }

    fn evict(&self, _key: &str) -> StoreResult<()> {
        // Every read goes to the store itself: there is no local copy to drop.
        Ok(())
    }

    fn describe(&self) -> String {
        "memory".to_string()
    }

    fn now(&self) -> StoreResult<SystemTime> {
        Ok(SystemTime::now())
    }
}
