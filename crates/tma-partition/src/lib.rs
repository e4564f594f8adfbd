//! tma-partition
