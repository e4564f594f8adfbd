//! Checks of the workspace's structure, read from its sources and manifests (no compiler
//! involved): the module graph of every crate (`modules`), cycles in a graph (`cycles`), the
//! crate graph from the `Cargo.toml` files (`cargo`) and function lengths (`fns`). The checks
//! themselves are this crate's tests (`tests/structure.rs`); ARCHITECTURE.md names them.

pub mod cargo;
pub mod cycles;
pub mod fns;
pub mod lex;
pub mod modules;
