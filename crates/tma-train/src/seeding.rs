//! TEMPORARY shim until tma_graph::seed lands.
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// What a random stream is for.
#[derive(Clone, Copy, Debug)]
pub enum Purpose {
    /// Model initialization.
    ModelInit,
    /// Trainer `index`'s sampling and batching in seed segment `segment`.
    Trainer {
        /// Trainer index.
        index: usize,
        /// 0, or the round a resumed run continued from.
        segment: u64,
    },
}

/// The seed of `purpose`'s stream.
pub fn derive(seed: u64, p: Purpose) -> u64 {
    match p {
        Purpose::ModelInit => seed,
        Purpose::Trainer { index, segment } => {
            let s = if segment == 0 {
                seed
            } else {
                seed ^ 0xD1B5_4A32_D192_ED03u64.wrapping_mul(segment)
            };
            s ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(index as u64 + 1))
        }
    }
}

/// `purpose`'s stream.
pub fn rng(seed: u64, p: Purpose) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(derive(seed, p))
}
