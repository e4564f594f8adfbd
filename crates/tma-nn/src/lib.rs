//! tma-nn
