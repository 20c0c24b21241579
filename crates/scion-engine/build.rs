//! The engine reads a live database's pages through SQLite's `sqlite_dbpage` table (one read
//! transaction: never blocks a writer, includes WAL frames not yet checkpointed), which the
//! bundled SQLite compiles only with `SQLITE_ENABLE_DBPAGE_VTAB`. The repository's
//! `.cargo/config.toml` sets it through `LIBSQLITE3_FLAGS`, but cargo reads that file from
//! the directory it runs in: a build started elsewhere would link a SQLite without it and
//! fail on every import at run time. Refuse such a build instead, saying how to fix it.

fn main() {
    println!("cargo:rerun-if-env-changed=LIBSQLITE3_FLAGS");
    let flags = std::env::var("LIBSQLITE3_FLAGS").unwrap_or_default();
    if !flags.contains("SQLITE_ENABLE_DBPAGE_VTAB") {
        panic!(
            "scion's bundled SQLite needs -DSQLITE_ENABLE_DBPAGE_VTAB, which the repository's \
             .cargo/config.toml sets: run cargo from the repository's directory, or set \
             LIBSQLITE3_FLAGS=\"-DSQLITE_ENABLE_DBPAGE_VTAB -DSQLITE_MAX_ATTACHED=125\""
        );
    }
}
