//! Anchor folders and recordings (the public-code rule of the tests that compare with code this
//! repository does not keep): an [`Anchor`] is a folder outside the repository, named by an
//! environment variable with a default, holding that code and the recipe that runs it; the
//! committed [`Recordings`] are what it produced, which the `#[ignore]`d tests compare with what
//! it produces now, or rewrite when the recording variable is set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A folder outside the repository: `env` names it, `default` where `env` is unset.
pub struct Anchor {
    pub env: &'static str,
    pub default: &'static str,
}

impl Anchor {
    /// The folder `env` names, or the default.
    pub fn dir(&self) -> PathBuf {
        std::env::var_os(self.env).map_or_else(|| PathBuf::from(self.default), PathBuf::from)
    }

    /// [`Anchor::dir`], which must hold the file `needs`: else a panic naming the file, the
    /// variable to set, the folder it must name (`holding`) and the page that says how to make
    /// it (`readme`).
    pub fn holding(&self, needs: &str, holding: &str, readme: &str) -> PathBuf {
        let dir = self.dir();
        let file = dir.join(needs);
        assert!(
            file.is_file(),
            "{} is missing: set {} to the folder holding {holding} ({readme})",
            file.display(),
            self.env
        );
        dir
    }
}

/// The longest file a stale note shows the new content of.
const SHOWN: usize = 32 * 1024;

/// Recordings under `dir`, checked against what `who` produces now (or rewritten, where the
/// variable `record_env` is set): each file compared byte for byte, each difference noted, then
/// [`Recordings::finish`] fails with every note.
pub struct Recordings {
    dir: PathBuf,
    who: &'static str,
    record_env: &'static str,
    readme: String,
    record: bool,
    stale: Vec<String>,
}

impl Recordings {
    /// The recordings of `who` (`nanoclaw's composer`, ...) under `dir` (relative to the
    /// repository), whose `README.md` says how they are made and refreshed.
    pub fn new(dir: &str, who: &'static str, record_env: &'static str) -> Self {
        Recordings {
            dir: repo().join(dir),
            who,
            record_env,
            readme: format!("{dir}/README.md"),
            record: std::env::var_os(record_env).is_some(),
            stale: Vec::new(),
        }
    }

    /// Whether they are rewritten (the recording variable is set) rather than compared.
    pub fn recording(&self) -> bool {
        self.record
    }

    /// Where they are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The recorded file `rel`, which must be there.
    pub fn read(&self, rel: &str) -> Vec<u8> {
        let path = self.dir.join(rel);
        std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}: the recordings are {}'s",
                path.display(),
                self.readme
            )
        })
    }

    /// The recorded file `rel` as JSON.
    pub fn json(&self, rel: &str) -> serde_json::Value {
        let bytes = self.read(rel);
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", self.dir.join(rel).display()))
    }

    /// `now` is the recorded file `rel`: written there when recording; else, where it is not
    /// (or missing), a note naming it and showing what `who` produces now.
    pub fn file(&mut self, rel: &str, now: &[u8]) {
        let path = self.dir.join(rel);
        if self.record {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, now).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(now) {
            let shown = match std::str::from_utf8(now) {
                Ok(text) if text.len() <= SHOWN => format!("\n{text}"),
                _ => format!(" {} bytes", now.len()),
            };
            let note = format!("{rel} ({} now produces{shown})", self.who);
            self.stale.push(note);
        }
    }

    /// The folder `rel` holds exactly `files` (paths relative to it -> bytes): replaced by
    /// them when recording; else each compared as [`Recordings::file`] does, and a note where
    /// the folder holds any other file (or lacks one).
    pub fn folder(&mut self, rel: &str, files: &BTreeMap<String, Vec<u8>>) {
        let dir = self.dir.join(rel);
        if self.record && dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        for (path, bytes) in files {
            self.file(&format!("{rel}/{path}"), bytes);
        }
        if !self.record {
            let held: Vec<String> = super::tree::everything(&dir)
                .into_iter()
                .filter(|(_, entry)| *entry != super::tree::Entry::Dir)
                .map(|(path, _)| path)
                .collect();
            let expected: Vec<String> = files.keys().cloned().collect();
            if held != expected {
                self.stale.push(format!(
                    "{rel}: the recordings hold {held:?}, {} produces {expected:?}",
                    self.who
                ));
            }
        }
    }

    /// A difference found otherwise (the recordings laid out are not what `who` left, ...).
    pub fn note(&mut self, note: String) {
        self.stale.push(note);
    }

    /// Fails with every note, naming the variable that refreshes the recordings; then (unless
    /// recording) fails where the folders under `dir` are not exactly `folders`.
    pub fn finish(self, folders: &[&str]) {
        if self.record {
            eprintln!("recorded {} into {}", self.who, self.dir.display());
            return;
        }
        assert!(
            self.stale.is_empty(),
            "{} no longer produces the recordings in {} (refresh them with {}=1, {}):\n{}",
            self.who,
            self.dir.display(),
            self.record_env,
            self.readme,
            self.stale.join("\n\n")
        );
        let mut held: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|entry| entry.unwrap())
            .filter(|entry| entry.file_type().unwrap().is_dir())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        held.sort();
        let mut wanted: Vec<&str> = folders.to_vec();
        wanted.sort_unstable();
        assert_eq!(
            held,
            wanted,
            "the folders of {}: each is one of {}'s runs, none left over",
            self.dir.display(),
            self.who
        );
    }
}

/// The repository's root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
