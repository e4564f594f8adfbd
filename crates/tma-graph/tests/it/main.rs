//! Integration tests of tma-graph (one binary, ripgrep style).

mod edge_cases;
mod formats;
mod generate;
mod load_real;
mod malformed;
mod ogbl;
mod split;
mod util;
