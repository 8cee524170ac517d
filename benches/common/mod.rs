//! Pieces the benchmark binaries share (each bench is its own crate: this module is included
//! by `mod common;`).

/// SplitMix64: deterministic synthetic data without a dependency, the same on every machine.
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in [−1, 1).
    pub fn uniform(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 23) as f32) - 1.0
    }
}
