//! Check's records: a group's findings kept with every read that made them, so that a
//! `check` that finds every one of those reads as it was reports the recorded findings
//! without planning, diffing or loading the group again.
//!
//! The mechanism is compose's ([`crate::disk::reads`]): the look at the composition logs its reads
//! of the group folder and the bind folder, and the container view the loader reads through
//! logs its reads of every mount's source ([`crate::runtime::mounted::MountedFs::log_reads_in`]). The
//! findings are a function of those reads and of what the record's key covers (the binary,
//! the layout and where it is, the settings, the shared sources, the Claude Code release
//! checked against). A record is `<state>/checks/<group>` ([`CheckRecord`]), sealed and
//! encoded like compose's (through the one store, [`crate::disk::state::Records`]) and written only
//! when the group's lock is free at once.
//!
//! What a look does not log keeps a group out of the records: a config handed to clawmd
//! (`groupConfig: handed`), a journal with records (temps of an interrupted run), rescued
//! text waiting for a person, a read that cannot be kept ([`ReadLog::spoil`]), and a group
//! that could not be read.

use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use super::CheckOptions;
use crate::commands::compose::GroupVerdicts;
use crate::disk::deployment::{open_group, reads_hold};
use crate::disk::fsops::{self, SafeDir};
use crate::disk::reads::{Read, ReadLog};
use crate::disk::state;
use crate::file_kind::FileKind;
use crate::input::layout::{GroupConfigSource, Layout};
use crate::input::sources::Sources;
use crate::report::{Code, GroupCheck};
use crate::runtime::mounted::Mount;
use crate::runtime::view::view_of_table;

/// The folder of check's records in the state folder.
pub const CHECKS: &str = "checks";

/// A group's check record, `<state>/checks/<group>`.
pub struct CheckRecord;

impl state::Record for CheckRecord {
    const FOLDER: &'static str = CHECKS;
    const MAX_BYTES: u64 = 4 << 20;
    type Body = CheckBody;
}

/// What a check record keeps besides its key and seal.
#[derive(Debug, Serialize, Deserialize)]
pub struct CheckBody {
    /// The look at the composition: its reads of the group folder and the bind folder.
    reads: Vec<Read>,
    /// The container view's mount table, when the view was read: a function of the config
    /// and settings the reads and the key cover.
    view: Option<Vec<Mount>>,
    /// Every read of the container view.
    view_reads: Vec<Read>,
    /// What was found.
    found: GroupCheck,
}

/// What one check of a group read, to keep with its findings.
#[derive(Debug, Default)]
pub struct CheckLook {
    /// The look at the composition (the observation's log), when it got that far.
    pub reads: Option<Arc<ReadLog>>,
    /// The container view's mount table ([`crate::runtime::mounted::MountedFs::mounts`]), when the
    /// view was opened.
    pub view: Option<Vec<Mount>>,
    /// The container view's reads.
    pub view_reads: Arc<ReadLog>,
}

/// The records of one `check` run: the same key for every group.
pub struct CheckRecords<'a> {
    verdicts: &'a GroupVerdicts,
    key: [u8; 32],
    /// The records, `<state>/checks/<group>`.
    folder: state::Records<CheckRecord>,
    /// `<state>/rescues`, opened once (`None`: it does not exist).
    rescues: OnceLock<Mutex<Option<SafeDir>>>,
}

impl<'a> CheckRecords<'a> {
    /// The records of a run with `verdicts`' binary, layout and settings, `sources` and
    /// `options`.
    pub fn new(verdicts: &'a GroupVerdicts, sources: &Sources, options: &CheckOptions) -> Self {
        let checked = format!(
            "check 1 {:?} {}",
            options.claude_version, options.delivery_given
        );
        CheckRecords {
            verdicts,
            key: verdicts.here_key(sources, checked.as_bytes()),
            folder: state::Records::new(),
            rescues: OnceLock::new(),
        }
    }

    /// The verdicts of the run.
    pub fn verdicts(&self) -> &GroupVerdicts {
        self.verdicts
    }

    /// Whether `group` may be answered by its record, or recorded: not when its look would
    /// read what no log keeps (see the module docs).
    pub fn apply_to(&self, layout: &Layout, group: &str) -> bool {
        // A name that is not a group's (`..`, a path, `global`) names no record: it is never
        // joined to a path here.
        crate::disk::deployment::checked_group_dir(layout, group).is_ok()
            && self.verdicts.keeps_records()
            && layout.group_config != GroupConfigSource::Handed
            && !self.verdicts.journal_pending(layout, group)
            && !self.has_rescues(layout, group)
    }

    /// The findings of `group` as its record keeps them, when every read of the record finds
    /// again what it found.
    pub fn found(&self, layout: &Layout, group: &str) -> Option<GroupCheck> {
        let body = self.folder.read_keyed(layout, group, &self.key)?;
        let dir = open_group(&layout.group_dir(group)).ok()?;
        if !reads_hold(dir, || self.verdicts.bind_dir(layout, group), &body.reads) {
            return None;
        }
        // The reads hold, so the config is the one the table was made from.
        if let Some(mounts) = body.view {
            let fs = view_of_table(layout, group, mounts, &body.view_reads).ok()?;
            if !fs.holds(&body.view_reads) {
                return None;
            }
        }
        Some(body.found)
    }

    /// Keeps `found` with what `look` read as `group`'s record, when the look could keep
    /// every read and found nothing that depends on what it does not log.
    pub fn record(&self, layout: &Layout, group: &str, look: CheckLook, found: &GroupCheck) {
        let unlogged = [Code::StaleTemp, Code::RescuedText, Code::InternalError];
        if (found.findings.iter())
            .any(|f| unlogged.contains(&f.code) || super::is_group_error(f.code))
        {
            return;
        }
        let (Some(reads), Some(view_reads)) = (
            look.reads.and_then(|log| log.kept_reads()),
            look.view_reads.kept_reads(),
        ) else {
            return;
        };
        let body = CheckBody {
            reads,
            view: look.view,
            view_reads,
            found: found.clone(),
        };
        // Check makes no state folder: a deployment never composed gets no records.
        if fsops::kind_no_follow(&layout.state_dir) != Some(FileKind::Dir) {
            return;
        }
        state::with_free_lock(layout, group, || {
            let written = (self.folder).write(layout, group, &self.key, &body);
            if let Err(err) = written {
                tracing::debug!(
                    group,
                    "check record not written: {}",
                    crate::error::chain_text(&err)
                );
            }
        });
    }

    /// Whether rescued text of `group` waits in the state folder.
    fn has_rescues(&self, layout: &Layout, group: &str) -> bool {
        let rescues = self
            .rescues
            .get_or_init(|| Mutex::new(state::rescues_dir(layout).ok().flatten()));
        let rescues = rescues.lock().unwrap_or_else(|p| p.into_inner());
        rescues
            .as_ref()
            .is_some_and(|dir| !matches!(dir.kind(group), Ok(None)))
    }
}
