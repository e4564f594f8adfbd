//! The native module `tma._tma` of the Python package (`python/tma/`): datasets from NumPy
//! arrays or dataset directories, a run ([`tma_train::Run`]) started from keyword options
//! ([`tma_train::options::config_from`], the CLI's config-file keys), trained on a worker
//! thread while the calling thread waits without the GIL, delivers rounds to a Python callback
//! and answers Ctrl-C through the run's stop flag.
//!
//! Without the `python` feature (as in `cargo test --workspace`) the crate holds only
//! [`arrays`], the array checks, which need no Python.
#![warn(missing_docs)]

pub mod arrays;

#[cfg(feature = "python")]
mod py;
