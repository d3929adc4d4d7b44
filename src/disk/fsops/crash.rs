//! Crash points for the crash tests: with `CLAWMD_CRASH_AT=N` set, the process aborts just
//! before the N-th disk-changing step ([`checkpoint`]); unset, they cost nothing.

use std::io::{self, Write};
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

fn crash_at() -> Option<u64> {
    static CRASH_AT: OnceLock<Option<u64>> = OnceLock::new();
    *CRASH_AT.get_or_init(|| {
        std::env::var("CLAWMD_CRASH_AT")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// Whether `CLAWMD_CRASH_AT` is set (callers then keep the order of steps deterministic).
pub fn crash_injection_enabled() -> bool {
    crash_at().is_some()
}

/// Marks a point just before a disk-changing step. With `CLAWMD_CRASH_AT=N` set, the N-th call
/// in this process aborts it, simulating a crash at that point (used by the crash tests).
#[expect(
    clippy::disallowed_methods,
    reason = "the crash tests' marker line, written just before the abort (the library never prints otherwise)"
)]
pub fn checkpoint(step: &str, path: &Path) {
    static STEPS: AtomicU64 = AtomicU64::new(0);
    let Some(crash_at) = crash_at() else { return };
    let step_number = STEPS.fetch_add(1, Ordering::SeqCst) + 1;
    if step_number == crash_at {
        let _ = writeln!(
            io::stderr(),
            "clawmd: CLAWMD_CRASH_AT={crash_at}: crashing before {step} {}",
            path.display()
        );
        std::process::abort();
    }
}
