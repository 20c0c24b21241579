//! How a command gets its store.

use anyhow::Result;
use scion_core::Scion;

/// Opens the command's store when called: a command parses its arguments first, so a bad
/// name is reported as such even where no store is found.
pub type Open<'a> = dyn Fn() -> Result<Scion> + 'a;
