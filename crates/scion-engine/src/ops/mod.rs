//! The operations on a store, one module each.

pub mod claims;
pub mod compact;
pub mod config;
pub mod create;
pub mod file_commit;
pub mod fork;
pub mod gc;
pub mod graph;
pub mod history;
pub mod kept_graph;
pub mod lease;
pub mod lifecycle;
pub mod moves;
pub mod pages;
pub mod receive;
pub mod spill;
pub mod transfer;
pub mod verify;
pub mod view;
