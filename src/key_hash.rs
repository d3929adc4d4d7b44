//! [`KeyHasher`]: the one way clawmd hashes a key or a digest made of several fields (a
//! record's key, a verdict's key, what a plan is made from, a listing, the spawn digest).
//!
//! Every field is fed to a SHA-256 after its length (8 bytes, little-endian), so two
//! different sequences of fields never feed the same bytes: the fields `ab`, `c` and `a`,
//! `bc` make different digests. A field that is a sequence of its own (a list whose length
//! varies) is preceded by its count ([`KeyHasher::count`]) where more fields follow it.

use sha2::{Digest, Sha256};

/// A SHA-256 fed with length-prefixed fields. Cloned to hash many keys that start alike
/// (what is the same for every group of a run, then each group's own fields).
#[derive(Clone, Default)]
pub struct KeyHasher(Sha256);

impl KeyHasher {
    /// A hasher fed nothing yet.
    pub fn new() -> KeyHasher {
        KeyHasher::default()
    }

    /// Feeds `bytes` as one field: its length, then the bytes.
    pub fn field(&mut self, bytes: &[u8]) -> &mut KeyHasher {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    /// Feeds the number `count` as one field (how many fields of a list follow, or a size).
    pub fn count(&mut self, count: usize) -> &mut KeyHasher {
        self.field(&(count as u64).to_le_bytes())
    }

    /// Feeds `value` as one field, through its [`std::hash::Hash`]: for a value whose
    /// encoding only has to stay the same within one binary (every record's key holds the
    /// binary's identity, [`crate::disk::state::binary_identity`]). Quicker than its `Debug` text.
    pub fn hash<T: std::hash::Hash + ?Sized>(&mut self, value: &T) -> &mut KeyHasher {
        let mut bytes = Collect(Vec::new());
        value.hash(&mut bytes);
        self.field(&bytes.0)
    }

    /// The SHA-256 of every field fed.
    pub fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

/// The bytes a value's `Hash` writes, kept to be fed as one field.
struct Collect(Vec<u8>);

impl std::hash::Hasher for Collect {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(fields: &[&[u8]]) -> [u8; 32] {
        let mut key = KeyHasher::new();
        for field in fields {
            key.field(field);
        }
        key.finish()
    }

    #[test]
    fn fields_split_differently_make_different_digests() {
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
        assert_ne!(digest(&[b"abc"]), digest(&[b"abc", b""]));
        assert_ne!(digest(&[]), digest(&[b""]));
        assert_eq!(digest(&[b"a", b"bc"]), digest(&[b"a", b"bc"]));
    }

    #[test]
    fn a_field_is_its_length_then_its_bytes() {
        let mut plain = Sha256::new();
        plain.update(2u64.to_le_bytes());
        plain.update(b"ab");
        let plain: [u8; 32] = plain.finalize().into();
        assert_eq!(digest(&[b"ab"]), plain);
        let mut counted = KeyHasher::new();
        counted.count(2);
        assert_eq!(counted.finish(), digest(&[&2u64.to_le_bytes()]));
    }

    #[test]
    fn a_hashed_value_is_one_field() {
        let mut first = KeyHasher::new();
        first.hash(&("a", 1u8)).hash(&2u8);
        let mut second = KeyHasher::new();
        second.hash(&("a", 1u8, 2u8));
        assert_ne!(first.finish(), second.finish());
    }
}
