//! Small sampling utilities: relabelling, uniform negatives, epoch batches.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A fast hasher for `u32` keys (Fibonacci multiplicative hashing); not DoS resistant, which is
/// fine for node ids.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.0 = (i as u64 ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdMap = HashMap<u32, u32, BuildHasherDefault<IdHasher>>;

/// Distinct values of `nodes` in first-occurrence order, and the inverse map.
///
/// Returns `(unique, inverse)` with `nodes[i] == unique[inverse[i] as usize]` for every `i`;
/// `unique.len() <= nodes.len()`, `inverse.len() == nodes.len()`. Used e.g. to turn the endpoints
/// of a link-prediction batch into the seeds of a [`crate::NeighborSampler`] and back.
/// Hash map based: `O(nodes.len())` expected time, no dependence on the graph size.
pub fn unique_with_inverse(nodes: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let mut map: IdMap = HashMap::with_capacity_and_hasher(nodes.len(), Default::default());
    let mut unique = Vec::with_capacity(nodes.len());
    let inverse = nodes
        .iter()
        .map(|&g| {
            *map.entry(g).or_insert_with(|| {
                unique.push(g);
                (unique.len() - 1) as u32
            })
        })
        .collect();
    (unique, inverse)
}

/// `count` node ids drawn independently and uniformly from `0..num_nodes` (with replacement; may
/// include the positive endpoint or a true edge, as in the reference release's uniform negative
/// sampler). For link prediction: one negative destination per positive edge, drawn from the
/// trainer's local nodes.
///
/// # Panics
/// If `num_nodes == 0` while `count > 0`, or `num_nodes > 2^32`.
pub fn uniform_negatives(num_nodes: usize, count: usize, rng: &mut ChaCha8Rng) -> Vec<u32> {
    if count == 0 {
        return Vec::new();
    }
    assert!(num_nodes > 0, "cannot draw negatives from an empty graph");
    assert!(num_nodes <= 1 << 32, "node ids must fit in u32");
    let hi = (num_nodes - 1) as u32;
    (0..count).map(|_| rng.random_range(0..=hi)).collect()
}

/// One epoch of mini-batches: a uniformly random permutation of `0..n` (Fisher–Yates from `rng`)
/// cut into consecutive batches of `batch_size`; the last batch holds the `n % batch_size`
/// remainder if non-zero (nothing is dropped). Indices are into whatever the caller is batching
/// (training nodes, training edges).
///
/// # Panics
/// If `batch_size == 0` or `n > 2^32`.
pub fn shuffled_batches(n: usize, batch_size: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<u32>> {
    assert!(batch_size > 0, "batch_size must be positive");
    assert!(n <= 1 << 32, "indices must fit in u32");
    let mut perm: Vec<u32> = (0..n as u64).map(|i| i as u32).collect();
    perm.shuffle(rng);
    perm.chunks(batch_size).map(|c| c.to_vec()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn unique_with_inverse_exact() {
        let (u, inv) = unique_with_inverse(&[7, 3, 7, 9, 3, 3, 0]);
        assert_eq!(u, vec![7, 3, 9, 0]);
        assert_eq!(inv, vec![0, 1, 0, 2, 1, 1, 3]);
        let (u, inv) = unique_with_inverse(&[]);
        assert!(u.is_empty() && inv.is_empty());
    }

    #[test]
    fn negatives_in_range_and_cover() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let neg = uniform_negatives(10, 5000, &mut rng);
        assert_eq!(neg.len(), 5000);
        assert!(neg.iter().all(|&x| x < 10));
        let mut c = [0usize; 10];
        neg.iter().for_each(|&x| c[x as usize] += 1);
        assert!(c.iter().all(|&k| (400..600).contains(&k)), "{c:?}");
        assert_eq!(uniform_negatives(0, 0, &mut rng), Vec::<u32>::new());
        let a = uniform_negatives(100, 10, &mut ChaCha8Rng::seed_from_u64(1));
        let b = uniform_negatives(100, 10, &mut ChaCha8Rng::seed_from_u64(1));
        assert_eq!(a, b);
    }

    #[test]
    fn batches_are_a_permutation() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let b = shuffled_batches(10, 4, &mut rng);
        assert_eq!(b.iter().map(|x| x.len()).collect::<Vec<_>>(), vec![4, 4, 2]);
        let mut all: Vec<u32> = b.concat();
        assert_ne!(all, (0..10).collect::<Vec<u32>>(), "shuffled");
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<u32>>());
        assert!(shuffled_batches(0, 3, &mut rng).is_empty());
    }
}
