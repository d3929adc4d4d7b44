//! The loader against the real Claude Code releases, every case of the corpus: those recorded
//! on the host filesystem and those recorded inside a container's mount table, loaded through
//! clawmd's container view ([`MountedFs`]). The harness is the loader crate's
//! (`crates/clawmd-loader/tests/support/conformance.rs`).

use std::path::Path;

use clawmd::loader::fs::MemoryFs;
use clawmd::runtime::mounted::{Mount, MountedFs};

use crate::conformance_harness::every_case_matches_the_real_binary;

#[test]
fn every_case_matches_the_real_binary_in_its_container() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/clawmd-loader/tests/fixtures/conformance");
    let view = |table: Vec<(std::path::PathBuf, std::path::PathBuf)>| -> Box<dyn MemoryFs> {
        Box::new(MountedFs::new(
            table
                .into_iter()
                .map(|(container, host)| Mount::new(container, host)),
        ))
    };
    every_case_matches_the_real_binary(&fixtures, Some(&view));
}
