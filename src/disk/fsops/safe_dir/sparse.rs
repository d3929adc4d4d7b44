//! A new file's bytes, with every whole block of zeros left a hole, so that a sparse file
//! copied (a rescued hand edit) stays sparse.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::disk::fsops::{FsError, Result, checkpoint, crash_injection_enabled};

/// Blocks of zeros are left as holes rather than written.
const HOLE_BLOCK: usize = 4096;

/// Writes `bytes` into the new `file`; `durable`: fsyncs it too (else the caller makes it
/// durable, for many files at once, with
/// [`SafeDir::sync_filesystem`](super::SafeDir::sync_filesystem)).
pub(super) fn write_contents(
    file: &mut std::fs::File,
    bytes: &[u8],
    path: &Path,
    durable: bool,
) -> Result<()> {
    // Crash tests stop between the two halves (a file written half); a run can stop there
    // only by a crash, so otherwise it is one write.
    let half = match crash_injection_enabled() {
        true => bytes.len() / 2,
        false => 0,
    };
    write_sparse(file, bytes, 0, half).map_err(|err| FsError::io("write", path, err))?;
    checkpoint("write second half", path);
    let written = write_sparse(file, bytes, half, bytes.len())
        .map_err(|err| FsError::io("write", path, err))?;
    // A new file is as long as what was written into it: only a hole at its end is set.
    if written < bytes.len() {
        file.set_len(bytes.len() as u64)
            .map_err(|err| FsError::io("write", path, err))?;
    }
    if !durable {
        return Ok(());
    }
    file.sync_all()
        .map_err(|err| FsError::io("sync", path, err))
}

/// Writes `bytes[start..end]` at its offset, skipping every whole block of zeros (aligned to
/// [`HOLE_BLOCK`]) so that it stays a hole, each run of other blocks in one write; returns
/// where the last write ended (`start` when nothing was written), so the caller sets the final
/// length when the file ends in a hole.
fn write_sparse(file: &std::fs::File, bytes: &[u8], start: usize, end: usize) -> io::Result<usize> {
    let mut at = start;
    let mut run = start;
    let mut written = start;
    while at < end {
        let block_end = ((at / HOLE_BLOCK + 1) * HOLE_BLOCK).min(end);
        let block = &bytes[at..block_end];
        let whole_block = at.is_multiple_of(HOLE_BLOCK) && block.len() == HOLE_BLOCK;
        if whole_block && block.iter().all(|&b| b == 0) {
            if run < at {
                file.write_all_at(&bytes[run..at], run as u64)?;
                written = at;
            }
            run = block_end;
        }
        at = block_end;
    }
    if run < end {
        file.write_all_at(&bytes[run..end], run as u64)?;
        written = end;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::fsops::testing::dir;

    #[test]
    fn blocks_of_zeros_stay_holes_and_every_byte_is_written() {
        use std::os::unix::fs::MetadataExt;
        let (temp, dir) = dir();
        let zeros = vec![0u8; 4 * HOLE_BLOCK];
        let cases: [(&str, Vec<u8>); 5] = [
            ("text", b"text".repeat(5000)),
            ("empty", Vec::new()),
            ("zeros", zeros.clone()),
            (
                "zeros inside",
                [b"a".repeat(100), zeros.clone(), b"b".repeat(5000)].concat(),
            ),
            (
                "zeros at the end",
                [b"a".repeat(HOLE_BLOCK), zeros.clone()].concat(),
            ),
        ];
        for (name, bytes) in cases {
            dir.write_file(name, &bytes).unwrap();
            let limit = bytes.len() as u64 + 1;
            assert_eq!(
                dir.read_file(name, limit).unwrap(),
                Some(bytes.clone()),
                "{name}"
            );
            let meta = std::fs::metadata(temp.path().join(name)).unwrap();
            assert_eq!(meta.len(), bytes.len() as u64, "{name}");
            // (The block where the two halves meet is written whole.)
            if name.starts_with("zeros") {
                assert!(meta.blocks() * 512 < bytes.len() as u64, "{name}: {meta:?}");
            }
        }
    }

    #[test]
    fn zero_blocks_are_written_as_holes_and_read_back_whole() {
        use std::os::unix::fs::MetadataExt;
        let (temp, dir) = dir();
        let mut bytes = vec![0u8; 8 * 1024 * 1024];
        bytes[..5].copy_from_slice(b"start");
        bytes[4097] = b'x';
        let last = bytes.len() - 1;
        bytes[last] = b'\n';
        dir.write_file("sparse", &bytes).unwrap();
        assert_eq!(std::fs::read(temp.path().join("sparse")).unwrap(), bytes);
        let allocated = std::fs::metadata(temp.path().join("sparse"))
            .unwrap()
            .blocks()
            * 512;
        assert!(allocated < 1024 * 1024, "{allocated} bytes allocated");
    }
}
