//! The operations on a store, one module each.

pub mod checkpoint;
pub mod compact;
pub mod config;
pub mod create;
pub mod export;
pub mod fork;
pub mod gc;
pub mod graph;
pub mod history;
pub mod lease;
pub mod lifecycle;
pub(crate) mod moves;
pub mod pages;
pub mod receive;
pub mod spill;
pub mod status;
pub mod transfer;
pub mod tree;
pub mod verify;
pub mod view;
