//! The simulator's only randomness: SplitMix64, seeded. One seed decides
//! everything a run does.

use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// True with probability `permille / 1000`.
    pub fn chance(&mut self, permille: u32) -> bool {
        self.below(1000) < u64::from(permille)
    }

    /// Uniform in `lo..=hi` milliseconds, with nanosecond resolution.
    pub fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        let lo_ns = lo.saturating_mul(1_000_000);
        let hi_ns = hi.saturating_mul(1_000_000).max(lo_ns);
        Duration::from_nanos(lo_ns + self.below(hi_ns - lo_ns + 1))
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        let n = u64::try_from(items.len()).unwrap_or(u64::MAX);
        let i = usize::try_from(self.below(n)).unwrap_or(0);
        items[i]
    }

    /// A fresh generator for a separate concern, so adding draws to one
    /// concern does not shift every other.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }
}
