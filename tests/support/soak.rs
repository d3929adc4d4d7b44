//! Scaling the heavy tests: soak mode, counts from the environment, a seeded RNG, and the
//! `[reliability]` figure lines that docs/reliability.md quotes.

use std::fmt;
use std::path::Path;

/// Whether the longer, opt-in variants run (`CLAWMD_SOAK=1`).
pub fn soak() -> bool {
    std::env::var("CLAWMD_SOAK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `default`, or `soak` under `CLAWMD_SOAK=1`, or the number in `var` when set.
pub fn scale(var: &str, default: u64, soak_value: u64) -> u64 {
    if let Some(n) = std::env::var(var).ok().and_then(|v| v.parse().ok()) {
        return n;
    }
    if soak() { soak_value } else { default }
}

/// The filesystem type of `path` (from /proc/self/mounts), for the figures.
pub fn fs_type(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 3 {
            continue;
        }
        let point = fields[1].replace("\\040", " ");
        if path.starts_with(&point) && best.as_ref().is_none_or(|(len, _)| point.len() >= *len) {
            best = Some((point.len(), fields[2].to_owned()));
        }
    }
    best.map_or_else(|| "unknown".to_owned(), |(_, fs)| fs)
}

/// Writes `bytes` at `path` the way an editor that cares would: temp file, then rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) {
    let temp = path.with_extension("test-tmp");
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// A small deterministic PRNG (xorshift64*), so that random test schedules are reproducible.
pub struct Rng(u64, u64);

impl Rng {
    /// A generator from a seed (`CLAWMD_SEED` overrides it, to replay a soak run).
    pub fn new(seed: u64) -> Self {
        let seed = std::env::var("CLAWMD_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(seed);
        Rng(seed.max(1), seed)
    }

    /// The seed, to replay a run with `CLAWMD_SEED`.
    pub fn seed(&self) -> u64 {
        self.1
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Prints one figure line; `cargo test --test reliability -- --nocapture 2>&1 | grep
/// '^\[reliability\]'` collects them for docs/reliability.md.
pub fn figure(test: &str, text: impl fmt::Display) {
    eprintln!("[reliability] {test}: {text}");
}
