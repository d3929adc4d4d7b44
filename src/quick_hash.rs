//! A fast hash for what this process keeps in memory and looks up again (memo keys, a log's
//! set of reads): foldhash, many times quicker than the standard library's SipHash on long
//! texts. Never for anything written to disk or compared across processes, and never to vouch
//! for content: every memo compares what it finds whole.

use std::hash::{BuildHasher, Hash};

/// The one fixed seed, so that a value hashes the same everywhere in this process.
const SEED: u64 = 0x636c_6177_6d64_2d71;

/// The hash of `value`.
pub fn quick_hash<T: Hash + ?Sized>(value: &T) -> u64 {
    foldhash::quality::FixedState::with_seed(SEED).hash_one(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_hash_alike_and_different_texts_apart() {
        assert_eq!(
            quick_hash(b"persona A\n".as_slice()),
            quick_hash(b"persona A\n".as_slice())
        );
        assert_ne!(
            quick_hash(b"persona A\n".as_slice()),
            quick_hash(b"persona B\n".as_slice())
        );
    }
}
