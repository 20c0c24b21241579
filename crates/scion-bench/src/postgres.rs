//! The PostgreSQL baseline of `scion bench isolation`: a template database seeded once with
//! the same rows as the SQLite seed, copied per test with `CREATE DATABASE ... TEMPLATE`.

use postgres::{Client, Config, NoTls};

use crate::{BenchError, BenchResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PgStrategy {
    /// Servers before 15 have one way to copy a template.
    ServerDefault,
    /// PostgreSQL 15+'s default: copy block by block through the WAL.
    WalLog,
    /// Copy the files (with a checkpoint first); what BranchBench's file_copy backend uses.
    FileCopy,
}

impl PgStrategy {
    pub fn label(&self) -> String {
        match self {
            PgStrategy::ServerDefault => "PostgreSQL CREATE DATABASE ... TEMPLATE".into(),
            PgStrategy::WalLog => "PostgreSQL TEMPLATE, STRATEGY WAL_LOG (default)".into(),
            PgStrategy::FileCopy => "PostgreSQL TEMPLATE, STRATEGY FILE_COPY".into(),
        }
    }
}

pub(crate) struct PgBaseline {
    config: Config,
    admin: Client,
    pub version: String,
    version_num: u32,
}

fn pg_err(e: postgres::Error) -> BenchError {
    match e.as_db_error() {
        Some(db) => BenchError::Other(format!(
            "PostgreSQL: {}: {}",
            db.code().code(),
            db.message()
        )),
        None => BenchError::Other(format!("PostgreSQL: {e}")),
    }
}

/// Database names here are generated, never user input; quoting keeps them literal anyway.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl PgBaseline {
    /// `conn` is a libpq-style string, e.g. `host=/tmp/pg port=5432 user=scion dbname=postgres`.
    pub fn connect(conn: &str) -> BenchResult<PgBaseline> {
        let config: Config = conn.parse().map_err(pg_err)?;
        let mut admin = config.connect(NoTls).map_err(pg_err)?;
        let version: String = admin
            .query_one("SELECT version()", &[])
            .map_err(pg_err)?
            .get(0);
        let num: String = admin
            .query_one("SHOW server_version_num", &[])
            .map_err(pg_err)?
            .get(0);
        Ok(PgBaseline {
            config,
            admin,
            version: version.split(" on ").next().unwrap_or(&version).to_string(),
            version_num: num.parse().unwrap_or(0),
        })
    }

    pub(crate) fn strategies(&self) -> Vec<PgStrategy> {
        if self.version_num >= 150_000 {
            vec![PgStrategy::WalLog, PgStrategy::FileCopy]
        } else {
            vec![PgStrategy::ServerDefault]
        }
    }

    /// Create `name` holding `rows` rows shaped like the SQLite seed's `orders`, ready to be
    /// a template (no connections left on it). Returns its size on disk.
    pub fn seed(&mut self, name: &str, rows: u64) -> BenchResult<u64> {
        self.drop_database(name)?;
        self.admin
            .batch_execute(&format!("CREATE DATABASE {}", ident(name)))
            .map_err(pg_err)?;
        let mut c = self.config.clone();
        let mut db = c.dbname(name).connect(NoTls).map_err(pg_err)?;
        db.batch_execute(&format!(
            "CREATE TABLE orders(id bigint PRIMARY KEY, customer text, email text,
                 amount double precision, status text, note text);
             INSERT INTO orders
               SELECT g, 'customer-' || (g * 7919 % 50000), 'user' || (g * 7919 % 50000) || '@example.com',
                      (g * 104729 % 1000000) / 100.0, (ARRAY['new','paid','shipped','returned'])[g % 4 + 1],
                      'order note ' || substr(md5(g::text), 1, 16) || ' lorem ipsum dolor sit amet ' || (g % 977)
               FROM generate_series(1::bigint, {rows}) AS g;"
        ))
        .map_err(pg_err)?;
        // VACUUM refuses to run inside the implicit transaction of a multi-statement batch.
        db.batch_execute("VACUUM ANALYZE orders").map_err(pg_err)?;
        drop(db);
        let size: i64 = self
            .admin
            .query_one("SELECT pg_database_size($1)", &[&name])
            .map_err(pg_err)?
            .get(0);
        Ok(size as u64)
    }

    pub(crate) fn create_from_template(
        &mut self,
        name: &str,
        template: &str,
        strategy: PgStrategy,
    ) -> BenchResult<()> {
        let clause = match strategy {
            PgStrategy::ServerDefault => "",
            PgStrategy::WalLog => " STRATEGY wal_log",
            PgStrategy::FileCopy => " STRATEGY file_copy",
        };
        self.admin
            .batch_execute(&format!(
                "CREATE DATABASE {} TEMPLATE {}{clause}",
                ident(name),
                ident(template)
            ))
            .map_err(pg_err)
    }

    /// Open a new session on `name`, run `query` with `id`, close the session.
    pub(crate) fn connect_and_query(
        &mut self,
        name: &str,
        query: &str,
        id: i64,
    ) -> BenchResult<()> {
        let mut c = self.config.clone();
        let mut db = c.dbname(name).connect(NoTls).map_err(pg_err)?;
        let row = db.query_opt(query, &[&id]).map_err(pg_err)?;
        if row.is_none() {
            return Err(BenchError::Other(format!("no row {id} in {name}")));
        }
        db.close().map_err(pg_err)
    }

    /// Drop `name` if it exists, ending any session still closing on it.
    pub(crate) fn drop_database(&mut self, name: &str) -> BenchResult<()> {
        let force = if self.version_num >= 130_000 {
            " WITH (FORCE)"
        } else {
            ""
        };
        self.admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {}{force}", ident(name)))
            .map_err(pg_err)
    }
}
