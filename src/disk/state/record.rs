//! The one store of clawmd's sealed records: a [`Record`] says where its records are, how
//! large one may be and what its body holds; [`Records`] reads and writes them, and
//! [`record_json`] and [`record_file`] show one as JSON and make one from JSON (for tests,
//! and for a person looking into a record).
//!
//! A record file is the 32 bytes of its key, its body, and a SHA-256 of both (its seal: a
//! torn record is never used, so a record needs no temp and no rename). Its body is encoded
//! with postcard ([`encode`]): compact, and quick to decode at every spawn; a record is read
//! only by the binary that wrote it (every key holds its identity,
//! [`super::binary_identity`]), so the encoding need not describe itself.
//!
//! The records: a group's verdict and last look (`verdicts/<group>`,
//! [`crate::plan::delivery::verdicts::VerdictRecord`]), a group's findings of `check`
//! (`checks/<group>`, [`crate::commands::check::CheckRecord`]), and the shared sources
//! (`sources/container`, [`crate::input::sources::record::SourcesRecord`]).

use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::Digest as _;

use super::check_placement;
use crate::disk::fsops::{FsError, SafeDir};
use crate::input::layout::Layout;

/// A kind of sealed record in the state folder.
pub trait Record {
    /// The folder of these records in the state folder (`<state>/<FOLDER>/<name>`).
    const FOLDER: &'static str;
    /// The largest record read back.
    const MAX_BYTES: u64;
    /// What a record keeps besides its key and seal (its serde form is its JSON).
    type Body: Serialize + DeserializeOwned;

    /// The body's bytes ([`encode`], unless the record lays its body out itself).
    fn encode(body: &Self::Body) -> Option<Vec<u8>> {
        encode(body)
    }

    /// The body of `bytes`, when it is whole ([`decode`], unless the record lays its body out
    /// itself).
    fn decode(bytes: Vec<u8>) -> Option<Self::Body> {
        decode(&bytes)
    }

    /// The byte a body is padded with, which [`Record::decode`] ignores after it (zeros after
    /// an encoded value, [`decode`]; a JSON body takes spaces): a record rewritten shorter is
    /// padded to its file's length, so a crash between writing it in place and cutting it
    /// short cannot leave it torn; it is never cut short.
    const PAD: u8 = 0;
}

/// The records of one kind (`<state>/<R::FOLDER>/<name>`): one per group (or one for the
/// deployment), read and written through a handle opened once per run, each written in place
/// under the lock of its name. A record is never synced: one a crash loses or leaves torn is
/// only worked out again.
pub struct Records<R> {
    /// The folder, once opened (a missing one is looked for again at the next read).
    dir: Mutex<Option<SafeDir>>,
    record: PhantomData<fn() -> R>,
}

/// Why a record was not written (a record is only a saving: the caller notes it and goes on).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Its body could not be encoded.
    #[error("its body cannot be encoded")]
    Encode,
    /// Its folder or file could not be written.
    #[error(transparent)]
    Fs(#[from] FsError),
}

impl<R: Record> Default for Records<R> {
    fn default() -> Self {
        Records::new()
    }
}

impl<R: Record> Records<R> {
    /// The records of `<state>/<R::FOLDER>`, the folder not opened yet.
    pub const fn new() -> Records<R> {
        Records {
            dir: Mutex::new(None),
            record: PhantomData,
        }
    }

    /// The record `name`, when it is whole: its key and body.
    pub fn read(&self, layout: &Layout, name: &str) -> Option<([u8; 32], R::Body)> {
        let (key, body) = self.read_sealed(layout, name)?;
        Some((key, R::decode(body)?))
    }

    /// The body of the record `name` when it is whole and its key is `key` (a body under
    /// another key is not decoded).
    pub fn read_keyed(&self, layout: &Layout, name: &str, key: &[u8; 32]) -> Option<R::Body> {
        let (found, body) = self.read_sealed(layout, name)?;
        (found == *key).then(|| R::decode(body))?
    }

    /// Writes the record `name` with `key` and `body`, in place ([`SafeDir::overwrite_sealed`]),
    /// under the lock of `name` that the caller holds; the folder is made when missing.
    pub fn write(
        &self,
        layout: &Layout,
        name: &str,
        key: &[u8; 32],
        body: &R::Body,
    ) -> Result<(), RecordError> {
        let body = R::encode(body).ok_or(RecordError::Encode)?;
        let mut dir = self.lock_dir();
        if dir.is_none() {
            *dir = Some(records_dir(layout, R::FOLDER, true)?);
        }
        let dir = dir.as_ref().expect("opened above");
        kept::forget(&dir.path().join(name));
        // Rewritten shorter: as long as the file ([`Record::PAD`]), unless the file is longer
        // than a record is read back (it was never usable: padded to its length, none after it
        // would be).
        let mut body = body;
        if let Some(size) = dir.size_now(name)
            && size > body.len() + 64
            && size as u64 <= R::MAX_BYTES
        {
            body.resize(size - 64, R::PAD);
        }
        Ok(dir.overwrite_sealed(name, &sealed(key, &body))?)
    }

    /// Removes the record `name` (missing is fine), under the lock of `name` that the caller
    /// holds.
    pub fn remove(&self, layout: &Layout, name: &str) -> Result<(), RecordError> {
        let mut dir = self.lock_dir();
        if dir.is_none() {
            match records_dir(layout, R::FOLDER, false) {
                Ok(opened) => *dir = Some(opened),
                Err(FsError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    return Ok(());
                }
                Err(err) => return Err(err.into()),
            }
        }
        let dir = dir.as_ref().expect("opened above");
        kept::forget(&dir.path().join(name));
        Ok(dir.remove(name)?)
    }

    /// The key and the body's bytes of the record `name`, when it is whole: as [`kept`] keeps
    /// it while the file has the identity it had when read, else read (and kept).
    fn read_sealed(&self, layout: &Layout, name: &str) -> Option<([u8; 32], Vec<u8>)> {
        // A record this process keeps answers from its path's status alone: only the very
        // file it was read from, through folders opened without following a link, has that
        // identity (a link on the way leads to another file, or to none). Else it is read
        // through those folders, which refuse a link.
        let path = layout.state_dir.join(R::FOLDER).join(name);
        if let Ok(stat) = rustix::fs::lstat(&path)
            && crate::file_kind::FileKind::from_mode(stat.st_mode)
                == crate::file_kind::FileKind::File
            && let Some(found) = kept::get(&path, crate::disk::reads::identity(&stat))
        {
            return Some(found);
        }
        let mut dir = self.lock_dir();
        if dir.is_none() {
            *dir = Some(records_dir(layout, R::FOLDER, false).ok()?);
        }
        let dir = dir.as_ref()?;
        let (bytes, identity) = dir.read_own_file_settled(name, R::MAX_BYTES).ok()??;
        let (key, body) = unsealed(bytes)?;
        if let Some(identity) = identity {
            kept::put(&path, identity, key, &body);
        }
        Some((key, body))
    }

    fn lock_dir(&self) -> MutexGuard<'_, Option<SafeDir>> {
        self.dir.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The records read in this process, each kept (its key and body's bytes) while its file has
/// the identity it had when it was read, that identity settled then ([`crate::disk::reads::settled`]:
/// a record rewritten in place, by this process or another, changes its identity): a
/// `clawmd serve` reads a group's record and the sources' record at every spawn, and then
/// looks at each file's status instead of reading it and checking its seal again. Bounded
/// ([`crate::path_memo::PathMemo`], within [`kept::MAX_BYTES`] of bodies).
mod kept {
    use std::path::Path;

    use crate::path_memo::PathMemo;

    /// The most bytes of bodies kept.
    pub(super) const MAX_BYTES: usize = 64 << 20;

    static KEPT: PathMemo<([i64; 8], [u8; 32], Vec<u8>)> = PathMemo::within(MAX_BYTES);

    /// The key and body of the record at `path` read when its file had `identity`.
    pub(super) fn get(path: &Path, identity: [i64; 8]) -> Option<([u8; 32], Vec<u8>)> {
        KEPT.get(path, |(found, key, body)| {
            (*found == identity).then(|| (*key, body.clone()))
        })
    }

    /// Keeps the record at `path`, read with `identity`.
    pub(super) fn put(path: &Path, identity: [i64; 8], key: [u8; 32], body: &[u8]) {
        KEPT.put_sized(path, (identity, key, body.to_vec()), body.len());
    }

    /// Forgets the record at `path` (about to be written).
    pub(super) fn forget(path: &Path) {
        KEPT.forget(path);
    }
}

/// `<state>/<folder>` (never through a link), a folder of sealed records, made when
/// `create` and missing.
fn records_dir(layout: &Layout, folder: &str, create: bool) -> Result<SafeDir, FsError> {
    check_placement(layout)?;
    let missing = || FsError::Io {
        op: "open",
        path: layout.state_dir.join(folder),
        source: std::io::ErrorKind::NotFound.into(),
    };
    let state = SafeDir::open_state(&layout.state_dir, create)?.ok_or_else(missing)?;
    state.open_child(folder, create)?.ok_or_else(missing)
}

/// A record file's `bytes` as its key and the JSON of its body, when it is whole: for tests,
/// and for a person looking into a record ([`record_file`] makes one).
#[doc(hidden)]
pub fn record_json<R: Record>(bytes: Vec<u8>) -> Option<([u8; 32], serde_json::Value)> {
    let (key, body) = unsealed(bytes)?;
    Some((key, serde_json::to_value(R::decode(body)?).ok()?))
}

/// A record file with `key` and the body whose JSON is `json` ([`record_json`]).
#[doc(hidden)]
pub fn record_file<R: Record>(key: &[u8; 32], json: serde_json::Value) -> Option<Vec<u8>> {
    let body: R::Body = serde_json::from_value(json).ok()?;
    Some(sealed(key, &R::encode(&body)?))
}

/// The key and body of a record file's `bytes` (`None`: not whole): the key, the body, and
/// the SHA-256 of both after them.
fn unsealed(mut bytes: Vec<u8>) -> Option<([u8; 32], Vec<u8>)> {
    let sealed = bytes.len().checked_sub(32)?;
    let (whole, seal) = bytes.split_at(sealed);
    if sha2::Sha256::digest(whole).as_slice() != seal {
        return None;
    }
    let key = whole.get(..32)?.try_into().ok()?;
    bytes.truncate(sealed);
    bytes.drain(..32);
    Some((key, bytes))
}

/// A record file's bytes for `key` and `body` ([`unsealed`]).
fn sealed(key: &[u8; 32], body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(body.len() + 64);
    bytes.extend_from_slice(key);
    bytes.extend_from_slice(body);
    let seal: [u8; 32] = sha2::Sha256::digest(&bytes).into();
    bytes.extend_from_slice(&seal);
    bytes
}

/// A value encoded as (part of) a record's body (postcard).
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Option<Vec<u8>> {
    postcard::to_stdvec(value).ok()
}

/// A value decoded from a record's body ([`encode`]), when it is whole and nothing follows.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    decode_prefix(bytes).and_then(|(value, rest)| is_padding(rest).then_some(value))
}

/// Whether `bytes`, after a record's encoded body, are only the zeros [`Record::PAD`] puts
/// there.
pub fn is_padding(bytes: &[u8]) -> bool {
    bytes.iter().all(|&byte| byte == 0)
}

/// The value [`encode`]d at the start of `bytes`, and the bytes after it.
pub fn decode_prefix<T: DeserializeOwned>(bytes: &[u8]) -> Option<(T, &[u8])> {
    postcard::take_from_bytes(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Note;

    impl Record for Note {
        const FOLDER: &'static str = "notes";
        const MAX_BYTES: u64 = 128;
        type Body = (String, u32);
    }

    #[test]
    fn a_record_file_is_its_key_its_body_and_their_seal() {
        let key = [7u8; 32];
        let file = record_file::<Note>(&key, serde_json::json!(["note", 3])).unwrap();
        assert_eq!(file[..32], key);
        assert_eq!(file.len(), 32 + encode(&("note", 3u32)).unwrap().len() + 32);
        let (read_key, json) = record_json::<Note>(file.clone()).unwrap();
        assert_eq!((read_key, json), (key, serde_json::json!(["note", 3])));
        // Torn, or changed in any byte: not whole.
        assert!(record_json::<Note>(file[..file.len() - 1].to_vec()).is_none());
        for at in [0, 32, file.len() - 1] {
            let mut changed = file.clone();
            changed[at] ^= 1;
            assert!(record_json::<Note>(changed).is_none(), "{at}");
        }
    }

    #[test]
    fn records_are_read_back_by_their_key_and_written_in_place() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::under_root(root.path());
        let records = Records::<Note>::new();
        assert!(records.read(&layout, "g").is_none(), "no state folder yet");
        let key = [1u8; 32];
        let body = ("verdict".to_owned(), 1);
        records.write(&layout, "g", &key, &body).unwrap();
        assert_eq!(records.read(&layout, "g"), Some((key, body.clone())));
        assert_eq!(records.read_keyed(&layout, "g", &key), Some(body.clone()));
        assert_eq!(records.read_keyed(&layout, "g", &[2u8; 32]), None);
        let path = layout.state_dir.join("notes/g");
        assert_eq!(std::fs::read(&path).unwrap()[..32], key);
        // Longer than the record kind reads: not read.
        let long = ("x".repeat(128), 2);
        records.write(&layout, "g", &key, &long).unwrap();
        assert!(Records::<Note>::new().read(&layout, "g").is_none());
        // A shorter one after it is not padded to that length: it reads back.
        records.write(&layout, "g", &key, &body).unwrap();
        assert_eq!(Records::<Note>::new().read(&layout, "g"), Some((key, body)));
    }

    /// A record rewritten shorter is padded to its file's length, never cut short (a crash
    /// between a write in place and the cut would leave it torn); it reads back as written, and
    /// bytes after the body other than the padding make it not whole.
    #[test]
    fn a_record_rewritten_shorter_keeps_its_length() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::under_root(root.path());
        let records = Records::<Note>::new();
        let key = [5u8; 32];
        records
            .write(&layout, "g", &key, &("a longer body".to_owned(), 70_000))
            .unwrap();
        let path = layout.state_dir.join("notes/g");
        let length = std::fs::metadata(&path).unwrap().len();
        let short = ("s".to_owned(), 1);
        records.write(&layout, "g", &key, &short).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), length);
        assert_eq!(records.read(&layout, "g"), Some((key, short)));
        let mut body = encode(&("s", 1u32)).unwrap();
        body.push(0);
        assert_eq!(decode::<(String, u32)>(&body), Some(("s".to_owned(), 1)));
        body.push(7);
        assert_eq!(decode::<(String, u32)>(&body), None);
    }

    /// A record kept from an earlier read is used only while its file is the one read: one
    /// rewritten in place by another process (the same length, the same inode), or replaced,
    /// or removed, is read again.
    #[test]
    fn a_kept_record_never_outlives_its_file() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::under_root(root.path());
        let records = Records::<Note>::new();
        let key = [3u8; 32];
        records
            .write(&layout, "g", &key, &("first".to_owned(), 1))
            .unwrap();
        let path = layout.state_dir.join("notes/g");
        // Settled: the read is kept.
        std::thread::sleep(std::time::Duration::from_millis(2100));
        assert_eq!(records.read(&layout, "g").unwrap().1.0, "first");
        let found = kept::get(&path, reads_identity(&path));
        assert!(found.is_some(), "kept once settled");
        for (other, rewrite) in [("other", true), ("again", false)] {
            let file = record_file::<Note>(&key, serde_json::json!([other, 1])).unwrap();
            if rewrite {
                // In place, as another clawmd rewrites a record.
                use std::io::Write as _;
                let mut open = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                open.write_all(&file).unwrap();
            } else {
                let temp = path.with_extension("new");
                std::fs::write(&temp, &file).unwrap();
                std::fs::rename(&temp, &path).unwrap();
            }
            assert_eq!(records.read(&layout, "g").unwrap().1.0, other, "{other}");
            std::thread::sleep(std::time::Duration::from_millis(2100));
            assert_eq!(records.read(&layout, "g").unwrap().1.0, other, "{other}");
        }
        std::fs::remove_file(&path).unwrap();
        assert!(records.read(&layout, "g").is_none());
    }

    fn reads_identity(path: &std::path::Path) -> [i64; 8] {
        crate::disk::reads::identity(&rustix::fs::stat(path).unwrap())
    }
}
