//! One contender in a cross-process compare-and-swap race on a local store, used by the
//! conformance tests: `scion-store-race-worker <store-dir> <key> <etag> <go-file> <id>`.
//! It waits until `<go-file>` exists, tries one `Update(etag)`, and prints `won` or
//! `conflict`.

use std::path::Path;
use std::process::ExitCode;

use scion_store::{Backend, ETag, LocalBackend, PutMode, StoreError};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, key, etag, go, id] = args.as_slice() else {
        eprintln!("usage: scion-store-race-worker <store-dir> <key> <etag> <go-file> <id>");
        return ExitCode::from(2);
    };
    let store = LocalBackend::open(dir).expect("open store");
    while !Path::new(go).exists() {
        std::thread::yield_now();
    }
    let body = format!("worker {id}");
    match store.put(key, body.as_bytes(), PutMode::Update(ETag(etag.clone()))) {
        Ok(_) => println!("won"),
        Err(StoreError::Conflict { .. }) => println!("conflict"),
        Err(e) => {
            eprintln!("unexpected error: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
