//! The container side's record (`<state>/sources/container`): the digest of what a reading of
//! the shared sources held ([`Sources::digest`]) and its notes, with every host read it was
//! made from ([`HostReads`]).
//!
//! A group whose own record holds needs nothing of the shared sources but their digest (its
//! record's key, [`crate::delivery::verdicts::Verdicts::look_key`]). So a run first asks this
//! record: when every host read finds what it found, the digest and the notes are the
//! recorded ones, and the sources are read (and their imports expanded) only for a group its
//! own record does not answer. The record is keyed by the binary and the whole layout (every
//! host path it reads comes from there), sealed like the groups' records
//! ([`state::Records`]), and written only when the deployment-wide lock is free at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::host_reads::{HostReads, PartReads, Stale, Views};
use super::{SourceNote, Sources};
use crate::layout::{GLOBAL_GROUP, Layout};
use crate::state;

/// The records' folder in the state folder, and the record's name in it.
const FOLDER: &str = "sources";
const NAME: &str = "container";

/// The largest record read back.
const MAX_RECORD_BYTES: u64 = 16 * 1024 * 1024;

/// What a record says the shared sources hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// [`Sources::digest`].
    pub digest: [u8; 32],
    /// The notes of the reading ([`super::read_container`]'s).
    pub notes: Vec<SourceNote>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Body {
    recorded: Recorded,
    reads: HostReads,
}

/// The record of the shared sources as read back, not yet replayed: what it says they hold,
/// and the reads it was made from, each part replayed the first time a group depends on it
/// ([`Proof::holds_for`]), once per run.
#[derive(Debug)]
pub struct Proof {
    recorded: Recorded,
    reads: HostReads,
    now: SystemTime,
    /// Each part's replay by its item (`None` when a read finds something else), and the
    /// views they went through.
    replayed: Mutex<(Replayed, Views)>,
}

/// Each part's replay by its item: `None` when a read finds something else.
type Replayed = HashMap<Option<String>, Option<Stale>>;

/// The record made by this binary for this layout, when it is whole (and no run holding the
/// deployment-wide lock left temps or a journal not yet settled: the record is then made
/// again, which cleans them).
pub fn load(layout: &Layout) -> Option<Proof> {
    let key = key(layout)?;
    if state::may_have_leftovers(layout, GLOBAL_GROUP) {
        return None;
    }
    let (found, body) = state::Records::new(FOLDER).read(layout, NAME, MAX_RECORD_BYTES)?;
    if found != key {
        return None;
    }
    let body: Body = serde_json::from_slice(&body).ok()?;
    Some(Proof {
        recorded: body.recorded,
        reads: body.reads,
        now: SystemTime::now(),
        replayed: Mutex::new((HashMap::new(), Views::default())),
    })
}

impl Proof {
    /// What the record says the sources hold.
    pub fn recorded(&self) -> &Recorded {
        &self.recorded
    }

    /// Whether the reads every group depends on, and those made for the items `uses` (by
    /// section name, [`crate::sources::items_used`]; `None`: every item), find the same.
    pub fn holds_for(&self, uses: Option<&[String]>) -> bool {
        let needed = |part: &&PartReads| match (&part.item, uses) {
            (None, _) | (Some(_), None) => true,
            (Some(item), Some(uses)) => uses.contains(item),
        };
        let parts: Vec<&PartReads> = self.reads.parts.iter().filter(needed).collect();
        // Every item used has its reads (an item never read is not the one recorded).
        let all_there = uses.is_none_or(|uses| {
            (uses.iter()).all(|item| parts.iter().any(|p| p.item.as_ref() == Some(item)))
        });
        all_there && parts.into_iter().all(|part| self.replay(part).is_some())
    }

    /// Whether the record holds what a reading of `sources` with `notes` through `reads` would
    /// record: making it again would change nothing but when it was made.
    pub fn says(&self, sources: &Sources, notes: &[SourceNote], reads: &HostReads) -> bool {
        self.reads.parts == reads.parts
            && self.recorded.notes == notes
            && self.recorded.digest == sources.digest()
    }

    /// Whether a part replayed so far was found the same by a file's bytes where its identity
    /// would do now: the record is worth making again.
    pub fn stale(&self) -> bool {
        let replayed = self.replayed.lock().unwrap_or_else(|p| p.into_inner());
        replayed.0.values().any(|found| *found == Some(Stale(true)))
    }

    fn replay(&self, part: &PartReads) -> Option<Stale> {
        let mut replayed = self.replayed.lock().unwrap_or_else(|p| p.into_inner());
        let (found, views) = &mut *replayed;
        *found
            .entry(part.item.clone())
            .or_insert_with(|| part.replay(self.now, views))
    }
}

/// Records `sources` and their `notes`, read through `reads`, when the deployment-wide lock is
/// free at once (else another run is changing the deployment: nothing is recorded).
pub fn record(layout: &Layout, sources: &Sources, notes: &[SourceNote], reads: HostReads) {
    let Some(key) = key(layout) else {
        return;
    };
    let body = Body {
        recorded: Recorded {
            digest: sources.digest(),
            notes: notes.to_vec(),
        },
        reads,
    };
    let Ok(body) = serde_json::to_vec(&body) else {
        return;
    };
    state::with_free_lock(layout, GLOBAL_GROUP, |journal| {
        let written = remove_leftovers(layout)
            .and_then(|()| state::Records::new(FOLDER).write(layout, NAME, &key, &body, journal));
        if let Err(err) = written {
            tracing::debug!("the shared sources are not recorded: {err}");
        }
    });
}

/// Removes the temps a run holding the deployment-wide lock left (a record's, torn by a crash;
/// or `migrate`'s), as every run holding a lock does before it writes.
fn remove_leftovers(layout: &Layout) -> Result<(), crate::fsops::FsError> {
    if state::may_have_leftovers(layout, GLOBAL_GROUP) {
        for leftover in state::leftovers(layout, GLOBAL_GROUP)? {
            leftover.remove()?;
        }
    }
    Ok(())
}

/// What the record depends on besides its reads: the binary and the layout.
fn key(layout: &Layout) -> Option<[u8; 32]> {
    let binary = state::binary_identity()?;
    let mut hash = Sha256::new();
    for part in [
        b"clawmd sources 1".as_slice(),
        env!("CARGO_PKG_VERSION").as_bytes(),
        &binary,
        format!("{layout:?}").as_bytes(),
    ] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    Some(hash.finalize().into())
}
