//! A small deterministic generator for seeded tests (xorshift64*): the same seed gives the same cases on every
//! run and machine, so a failing case is reproduced by its seed.

/// xorshift64* (Vigna); the seed must not be 0.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
