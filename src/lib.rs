pub mod canonical;
pub mod config;
pub mod headers;
pub mod key;
pub mod problem;
pub mod receipt;
