//! A writer of a local store stopped in the middle of a write, used by the change board's
//! tests: `scion-store-stalled-writer <store-dir> <key>` announces a write of `<key>` that
//! never ends, prints `announced`, and waits to be killed.

use std::io::Write;
use std::process::ExitCode;

use scion_store::LocalBackend;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, key] = args.as_slice() else {
        eprintln!("usage: scion-store-stalled-writer <store-dir> <key>");
        return ExitCode::from(2);
    };
    let store = LocalBackend::open(dir).expect("open store");
    store.announce_without_end(key);
    println!("announced");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
