//! tma-train
