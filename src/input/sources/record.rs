//! The container side's record (`<state>/sources/container`, [`SourcesRecord`]): the digest
//! of what a reading of the shared sources held ([`Sources::digest`]) and its notes, with
//! every host read it was made from ([`HostReads`]).
//!
//! A group whose own record holds needs nothing of the shared sources but their digest (its
//! record's key, [`crate::plan::delivery::verdicts::Verdicts::look_key`]). So a run first asks this
//! record: when every host read finds what it found, the digest and the notes are the
//! recorded ones, and the sources are read (and their imports expanded) only for a group its
//! own record does not answer. The record is keyed by the binary and the whole layout (every
//! host path it reads comes from there), sealed like the groups' records (through the one
//! store, [`state::Records`]), and written only when the deployment-wide lock is free at once.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::host_reads::{HostReads, PartReads, Stale, Views};
use super::vouch::Vouchers;
use super::{SourceNote, Sources};
use crate::disk::state;
use crate::input::layout::{GLOBAL_GROUP, Layout};
use crate::key_hash::KeyHasher;

/// The record's name in its folder.
const NAME: &str = "container";

/// The shared sources' record, `<state>/sources/container`.
pub struct SourcesRecord;

impl state::Record for SourcesRecord {
    const FOLDER: &'static str = "sources";
    const MAX_BYTES: u64 = 16 * 1024 * 1024;
    type Body = SourcesBody;

    fn encode(body: &SourcesBody) -> Option<Vec<u8>> {
        Some(body.bytes.clone())
    }

    fn decode(bytes: Vec<u8>) -> Option<SourcesBody> {
        SourcesBody::from_bytes(bytes)
    }
}

/// What a record says the shared sources hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedSources {
    /// [`Sources::digest`].
    pub digest: [u8; 32],
    /// The notes of the reading ([`super::read_container`]'s).
    pub notes: Vec<SourceNote>,
}

/// The start of the record's body ([`SourcesBody`]).
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    recorded: RecordedSources,
    /// Each part's item and length, in order.
    parts: Vec<(Option<String>, usize)>,
}

/// The record's body: a [`Header`], then each part of the reads ([`PartReads`]), one after
/// another, as long as the header says, each encoded on its own ([`state::encode`]). A run
/// decodes the header and only the parts it replays ([`SourcesBody::part`]): one group's spawn needs
/// a few of them. As JSON: `recorded`, and every part of the reads (`parts`).
#[derive(Debug)]
pub struct SourcesBody {
    recorded: RecordedSources,
    /// The body as it is written, and where each part's reads are in it, by item.
    bytes: Vec<u8>,
    parts: Vec<(Option<String>, Range<usize>)>,
}

/// A [`SourcesBody`] as JSON.
#[derive(Serialize, Deserialize)]
struct BodyJson {
    recorded: RecordedSources,
    parts: Vec<PartReads>,
}

impl SourcesBody {
    /// The body saying `recorded`, read through the reads `parts`.
    fn of(recorded: RecordedSources, parts: &[PartReads]) -> Option<SourcesBody> {
        let encoded: Vec<Vec<u8>> = parts.iter().map(state::encode).collect::<Option<_>>()?;
        let header = Header {
            recorded,
            parts: (parts.iter().zip(&encoded))
                .map(|(part, bytes)| (part.item.clone(), bytes.len()))
                .collect(),
        };
        let mut bytes = state::encode(&header)?;
        bytes.extend(encoded.into_iter().flatten());
        SourcesBody::from_bytes(bytes)
    }

    /// The body written as `bytes`, its parts not yet parsed (`None`: its header is not
    /// whole, or its parts do not fill the rest).
    fn from_bytes(bytes: Vec<u8>) -> Option<SourcesBody> {
        let (header, parts_bytes) = state::decode_prefix::<Header>(&bytes)?;
        let mut start = bytes.len() - parts_bytes.len();
        let mut parts = Vec::with_capacity(header.parts.len());
        for (item, len) in header.parts {
            let end = start.checked_add(len)?;
            parts.push((item, start..end));
            start = end;
        }
        let mut bytes = bytes;
        // What follows the parts is padding ([`state::Record::PAD`]), or the body is not whole.
        if !state::is_padding(bytes.get(start..)?) {
            return None;
        }
        bytes.truncate(start);
        Some(SourcesBody {
            recorded: header.recorded,
            bytes,
            parts,
        })
    }

    /// The part of the reads at `range` of the body (`None`: not whole).
    fn part(&self, range: &Range<usize>) -> Option<PartReads> {
        state::decode(self.bytes.get(range.clone())?)
    }

    /// Every part of the reads, in order (`None`: one is not whole).
    fn all_parts(&self) -> Option<Vec<PartReads>> {
        (self.parts.iter())
            .map(|(_, range)| self.part(range))
            .collect()
    }
}

impl Serialize for SourcesBody {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let parts = (self.all_parts())
            .ok_or_else(|| serde::ser::Error::custom("a part of the reads is not whole"))?;
        let recorded = self.recorded.clone();
        BodyJson { recorded, parts }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SourcesBody {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let BodyJson { recorded, parts } = BodyJson::deserialize(deserializer)?;
        SourcesBody::of(recorded, &parts)
            .ok_or_else(|| serde::de::Error::custom("the body cannot be encoded"))
    }
}

/// The record of the shared sources as read back, not yet replayed: what it says they hold,
/// and the reads it was made from, each part parsed and replayed the first time a group
/// depends on it ([`Proof::holds_for`]), once per run.
#[derive(Debug)]
pub struct Proof {
    body: SourcesBody,
    now: SystemTime,
    /// What a long-lived holder knows has not changed since it last replayed a part.
    vouchers: Option<Arc<Vouchers>>,
    /// Each part's replay by its item (`None` when a read finds something else, or the part
    /// is not whole), and the views they went through.
    replayed: Mutex<(Replayed, Views)>,
}

/// Each part's replay by its item: `None` when a read finds something else.
type Replayed = HashMap<Option<String>, Option<Stale>>;

/// The record made by this binary for this layout, when it is whole (and no run holding the
/// deployment-wide lock left temps or a journal not yet settled, as `leftovers` tells for a
/// lock, [`state::may_have_leftovers`]: the record is then made again, which cleans them).
pub fn load(layout: &Layout, leftovers: impl FnOnce(&str) -> bool) -> Option<Proof> {
    let key = key(layout)?;
    if leftovers(GLOBAL_GROUP) {
        return None;
    }
    let records = state::Records::<SourcesRecord>::new();
    Some(Proof::of(records.read_keyed(layout, NAME, &key)?))
}

impl Proof {
    /// The record's `body`, not yet replayed.
    fn of(body: SourcesBody) -> Proof {
        Proof {
            body,
            now: SystemTime::now(),
            vouchers: None,
            replayed: Mutex::new((HashMap::new(), Views::default())),
        }
    }

    /// The same record, its parts vouched for by `vouchers` where they can be: a part they
    /// vouch for is not replayed, and a part replayed is vouched for from then on, while
    /// nothing it read changes ([`Vouchers`]). The kernel's reports are read now, once: the
    /// parts are then vouched for as of this moment (a record is given its vouchers as a
    /// request comes in, [`crate::commands::compose::compose_keeping`]).
    pub fn vouched_by(self, vouchers: Arc<Vouchers>) -> Proof {
        vouchers.look();
        Proof {
            vouchers: Some(vouchers),
            ..self
        }
    }

    /// What the record says the sources hold.
    pub fn recorded(&self) -> &RecordedSources {
        &self.body.recorded
    }

    /// Whether the reads every group depends on, and those made for the items `uses` (by
    /// section name, [`crate::input::sources::items_used`]; `None`: every item), find the same.
    pub fn holds_for(&self, uses: Option<&[String]>) -> bool {
        let needed = |item: &Option<String>| match (item, uses) {
            (None, _) | (Some(_), None) => true,
            (Some(item), Some(uses)) => uses.contains(item),
        };
        let parts: Vec<&(Option<String>, Range<usize>)> = (self.body.parts.iter())
            .filter(|(item, _)| needed(item))
            .collect();
        // Every item used has its reads (an item never read is not the one recorded).
        let all_there = uses.is_none_or(|uses| {
            (uses.iter()).all(|item| parts.iter().any(|(i, _)| i.as_ref() == Some(item)))
        });
        all_there && parts.into_iter().all(|part| self.replay(part).is_some())
    }

    /// Whether the record holds what a reading of `sources` with `notes` through `reads` would
    /// record: making it again would change nothing but when it was made.
    pub fn says(&self, sources: &Sources, notes: &[SourceNote], reads: &HostReads) -> bool {
        let body = &self.body;
        body.recorded.notes == notes
            && body.recorded.digest == sources.digest()
            && body.parts.len() == reads.parts.len()
            && (body.parts.iter().zip(&reads.parts))
                .all(|((_, range), read)| body.part(range).as_ref() == Some(read))
    }

    /// Whether a part replayed so far was found the same by a file's bytes where its identity
    /// would do now: the record is worth making again.
    pub fn stale(&self) -> bool {
        let replayed = self.replayed.lock().unwrap_or_else(|p| p.into_inner());
        replayed.0.values().any(|found| *found == Some(Stale(true)))
    }

    fn replay(&self, (item, range): &(Option<String>, Range<usize>)) -> Option<Stale> {
        let mut replayed = self.replayed.lock().unwrap_or_else(|p| p.into_inner());
        let (found, views) = &mut *replayed;
        *found.entry(item.clone()).or_insert_with(|| {
            let bytes = self.body.bytes.get(range.clone())?;
            let vouchers = self.vouchers.as_deref();
            if vouchers.is_some_and(|vouchers| vouchers.vouched(item, bytes)) {
                return Some(Stale(false));
            }
            let part = self.body.part(range).filter(|part| part.item == *item)?;
            // Watched before it is replayed: a change while it is replayed is seen after.
            let armed = vouchers.and_then(|vouchers| vouchers.arm(&part));
            let found = part.replay(self.now, views);
            if let (Some(vouchers), Some(armed), Some(Stale(false))) = (vouchers, armed, found) {
                vouchers.vouch(item, bytes, armed);
            }
            found
        })
    }
}

/// Records `sources` and their `notes`, read through `reads`, when the deployment-wide lock is
/// free at once (else another run is changing the deployment: nothing is recorded).
pub fn record(layout: &Layout, sources: &Sources, notes: &[SourceNote], reads: HostReads) {
    let Some(key) = key(layout) else {
        return;
    };
    let Some(body) = body(sources, notes, &reads) else {
        return;
    };
    state::with_free_lock(layout, GLOBAL_GROUP, || {
        let records = state::Records::<SourcesRecord>::new();
        let written = remove_leftovers(layout)
            .map_err(state::RecordError::from)
            .and_then(|()| records.write(layout, NAME, &key, &body));
        if let Err(err) = written {
            tracing::debug!(
                "the shared sources are not recorded: {}",
                crate::error::chain_text(&err)
            );
        }
    });
}

/// The record's body for `sources` and `notes`, read through `reads`.
fn body(sources: &Sources, notes: &[SourceNote], reads: &HostReads) -> Option<SourcesBody> {
    let recorded = RecordedSources {
        digest: sources.digest(),
        notes: notes.to_vec(),
    };
    SourcesBody::of(recorded, &reads.parts)
}

/// Removes the temps a run holding the deployment-wide lock left (a record's, torn by a crash;
/// or `migrate`'s), as every run holding a lock does before it writes.
fn remove_leftovers(layout: &Layout) -> Result<(), crate::disk::fsops::FsError> {
    if state::may_have_leftovers(layout, GLOBAL_GROUP) {
        for leftover in state::leftovers(layout, GLOBAL_GROUP)? {
            leftover.remove()?;
        }
    }
    Ok(())
}

/// What the record depends on besides its reads: the binary and the layout. Not the configs
/// handed to the run for a group (`--config`, a `clawmd serve` request): they are no part of
/// the shared sources, and a runner that hands each spawn its group's config would otherwise
/// read the sources again and rewrite this record at every spawn.
fn key(layout: &Layout) -> Option<[u8; 32]> {
    // The last key made, kept while the layout holds (every spawn of `clawmd serve`).
    static LAST: std::sync::Mutex<Option<(Layout, [u8; 32])>> = std::sync::Mutex::new(None);
    let binary = state::binary_identity()?;
    let mut last = LAST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((kept, key)) = &*last
        && kept.same_but_handed(layout)
    {
        return Some(*key);
    }
    let shared = layout.without_handed();
    let mut key = KeyHasher::new();
    key.field(b"clawmd sources 2")
        .field(env!("CARGO_PKG_VERSION").as_bytes())
        .field(&binary)
        .hash(&shared);
    let key = key.finish();
    *last = Some((shared, key));
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::sources::host_reads::HostLog;

    /// The record's body written as `bytes`, not yet replayed.
    fn proof_of(bytes: Vec<u8>) -> Option<Proof> {
        SourcesBody::from_bytes(bytes).map(Proof::of)
    }

    /// A reading of two files, one for the item `skill:a`, one that every group depends on.
    fn reading(root: &std::path::Path) -> HostReads {
        fs_err::write(root.join("a.md"), "A").unwrap();
        fs_err::write(root.join("base.md"), "BASE").unwrap();
        let log = HostLog::new();
        log.begin_item("skill:a");
        log.read_file(&root.join("a.md"), 64).unwrap();
        log.end_item();
        log.read_file(&root.join("base.md"), 64).unwrap();
        log.kept().unwrap()
    }

    #[test]
    fn a_body_read_back_says_what_was_recorded_and_replays_each_part_alone() {
        let root = tempfile::tempdir().unwrap();
        let reads = reading(root.path());
        let sources = Sources::default();
        let body = body(&sources, &[], &reads).unwrap().bytes;
        let proof = proof_of(body.clone()).unwrap();
        assert!(proof.says(&sources, &[], &reads));
        assert!(proof.holds_for(Some(&["skill:a".to_owned()])));
        assert!(
            !proof.holds_for(Some(&["skill:b".to_owned()])),
            "never read"
        );
        // An edit of the item's file is seen only by the groups that get the item.
        fs_err::write(root.path().join("a.md"), "a").unwrap();
        let proof = proof_of(body.clone()).unwrap();
        assert!(proof.holds_for(Some(&[])));
        assert!(!proof.holds_for(Some(&["skill:a".to_owned()])));
        assert!(!proof.holds_for(None));
    }

    #[test]
    fn a_body_whose_parts_are_not_whole_answers_nothing() {
        let root = tempfile::tempdir().unwrap();
        let reads = reading(root.path());
        let body = body(&Sources::default(), &[], &reads).unwrap().bytes;
        let mut cut = body.clone();
        cut.pop();
        assert!(proof_of(cut).is_none(), "a part cut short");
        let mut longer = body.clone();
        longer.push(b' ');
        assert!(proof_of(longer).is_none(), "bytes after the parts");
        // Zeros after the parts are the padding of a record rewritten shorter in place.
        let mut padded = body.clone();
        padded.extend_from_slice(&[0; 40]);
        let proof = proof_of(padded).unwrap();
        assert!(proof.says(&Sources::default(), &[], &reads));
        assert!(proof.holds_for(Some(&["skill:a".to_owned()])));
        assert!(proof_of(body[..body.len() / 3].to_vec()).is_none());
        // A part spoiled in place (its length kept): the groups that depend on it are not
        // answered; the others are.
        let last = body.len() - 1;
        let mut spoiled = body.clone();
        spoiled[last] = b'!';
        let proof = proof_of(spoiled).unwrap();
        assert!(
            !proof.holds_for(Some(&[])),
            "the last part is what all depend on"
        );
        let mut first_part = body.clone();
        let (_, parts) = state::decode_prefix::<Header>(&body).unwrap();
        let header_end = body.len() - parts.len();
        first_part[header_end] = 0xff;
        let proof = proof_of(first_part).unwrap();
        assert!(proof.holds_for(Some(&[])), "the first part is the item's");
        assert!(!proof.holds_for(Some(&["skill:a".to_owned()])));
    }
}
