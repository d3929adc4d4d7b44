//! What a filesystem entry is: one vocabulary for the loader's filesystems, clawmd's write
//! module and the reports.
//!
//! A kind is always taken without following a final symlink unless a caller says otherwise.
//! "Nothing there" is not a kind: where an entry may be missing, the type is
//! `Option<FileKind>`, `None` meaning missing.

/// The kind of a filesystem entry. Reports serialise it in lowercase (`"file"`, `"symlink"`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else: a FIFO, a socket or a device.
    Other,
}

impl FileKind {
    /// The kind an `st_mode` describes.
    pub fn from_mode(mode: u32) -> Self {
        match rustix::fs::FileType::from_raw_mode(mode) {
            rustix::fs::FileType::RegularFile => FileKind::File,
            rustix::fs::FileType::Directory => FileKind::Dir,
            rustix::fs::FileType::Symlink => FileKind::Symlink,
            _ => FileKind::Other,
        }
    }

    /// The kind a directory entry's type names (`d_type`), when it names one.
    pub fn from_dirent(file_type: rustix::fs::FileType) -> Option<Self> {
        match file_type {
            rustix::fs::FileType::Unknown => None,
            rustix::fs::FileType::RegularFile => Some(FileKind::File),
            rustix::fs::FileType::Directory => Some(FileKind::Dir),
            rustix::fs::FileType::Symlink => Some(FileKind::Symlink),
            _ => Some(FileKind::Other),
        }
    }

    /// The kind std's metadata describes.
    pub fn from_std(file_type: std::fs::FileType) -> Self {
        if file_type.is_symlink() {
            FileKind::Symlink
        } else if file_type.is_dir() {
            FileKind::Dir
        } else if file_type.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        }
    }

    /// "a regular file", "a symlink", ... for messages.
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::File => "a regular file",
            FileKind::Symlink => "a symlink",
            FileKind::Dir => "a directory",
            FileKind::Other => "a special file",
        }
    }
}

/// [`FileKind::describe`] for an entry that may be missing.
pub fn describe(kind: Option<FileKind>) -> &'static str {
    kind.map_or("missing", FileKind::describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_dirents_name_the_same_kinds() {
        assert_eq!(FileKind::from_mode(0o100644), FileKind::File);
        assert_eq!(FileKind::from_mode(0o040755), FileKind::Dir);
        assert_eq!(FileKind::from_mode(0o120777), FileKind::Symlink);
        assert_eq!(FileKind::from_mode(0o010644), FileKind::Other); // FIFO
        assert_eq!(FileKind::from_mode(0o020644), FileKind::Other); // character device
        assert_eq!(
            FileKind::from_dirent(rustix::fs::FileType::Unknown),
            None,
            "an unknown d_type must be asked about, not guessed"
        );
        assert_eq!(
            FileKind::from_dirent(rustix::fs::FileType::Socket),
            Some(FileKind::Other)
        );
        assert_eq!(describe(None), "missing");
        assert_eq!(describe(Some(FileKind::Symlink)), "a symlink");
    }
}
