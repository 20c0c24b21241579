//! The operations on a store, one module each: the engine's, and those of the working tree
//! (which judge or bring along this host's checkout files).

pub use scion_engine::ops::*;

pub mod checkpoint;
pub mod compact;
pub mod destroy;
pub mod export;
pub mod gc;
pub mod status;
pub mod tree;
pub mod verify;
