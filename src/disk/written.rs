//! What clawmd wrote in a group's `.claude-fragments` (`<state>/written/<group>`): the name of
//! each file and link it put there and the hash of its content (of a link, its target).
//!
//! `.claude-fragments` sits in the group folder. A person can put files there, and so can the
//! agent whenever the folder is not bound read-only over it (in managed and inline delivery,
//! or before a change to copy or link delivery). So compose removes or replaces only what this
//! record says it wrote: a file it did not write is left as it is when no plan wants its name
//! (and reported), and is kept aside, as a hand edit of `CLAUDE.md` is, before a fragment of
//! the plan takes its name ([`crate::disk::reconcile`]).
//!
//! The record is written under the group's lock, only when it changes: before compose applies
//! a plan, with the hashes of what it is about to write added to those of what is there
//! ([`record_intent`]), so that whatever a crash leaves in the folder is still known as
//! clawmd's; and once the plan is applied, with exactly what it wrote ([`record`]). Unlike
//! the other records it outlives a new clawmd binary (a fixed key, a JSON body): a fragment
//! written by the clawmd before an upgrade is still known as clawmd's. A record lost or torn
//! errs the safe way: what it would have vouched for is kept, never removed.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;

use crate::disk::state::{Record, Records};
use crate::input::layout::Layout;
use crate::plan::delivery::GroupPlan;
use crate::plan::{Content, Place};
use crate::safe_name::short_hash;

/// The files and links clawmd wrote in a group's `.claude-fragments`: name → the hashes of the
/// contents it may have left there ([`content_hash`]; one, except while a compose is under
/// way or after one was interrupted).
pub type WrittenFragments = BTreeMap<String, BTreeSet<String>>;

/// The record kind: `<state>/written/<group>`.
pub struct WrittenRecord;

impl Record for WrittenRecord {
    const FOLDER: &'static str = "written";
    /// A name and 16 hex digits per fragment: a few KiB for hundreds of fragments.
    const MAX_BYTES: u64 = 1 << 20;
    type Body = WrittenFragments;

    fn encode(body: &WrittenFragments) -> Option<Vec<u8>> {
        serde_json::to_vec(body).ok()
    }

    fn decode(bytes: Vec<u8>) -> Option<WrittenFragments> {
        serde_json::from_slice(&bytes).ok()
    }
}

/// The key of every record of this kind: the same for every clawmd binary.
const KEY: [u8; 32] = *b"clawmd written fragments, v1\0\0\0\0";

static RECORDS: Records<WrittenRecord> = Records::new();

/// The hash a record keeps of a file's `bytes` (or a link's target bytes).
pub fn content_hash(bytes: &[u8]) -> String {
    short_hash(bytes)
}

/// What clawmd wrote in `group`'s `.claude-fragments`, as recorded (`None`: no whole record).
pub fn read(layout: &Layout, group: &str) -> Option<WrittenFragments> {
    RECORDS.read_keyed(layout, group, &KEY)
}

/// The fragments `plan` puts in `.claude-fragments`, by name, as the record keeps them.
fn planned(plan: &GroupPlan) -> WrittenFragments {
    plan.entries
        .iter()
        .filter(|desired| desired.path.place == Place::Fragments)
        .filter_map(|desired| {
            let hash = match &desired.content {
                Content::File(bytes) | Content::Placeholder(bytes) => content_hash(bytes),
                Content::Symlink(target) => content_hash(target.as_os_str().as_bytes()),
                Content::Seed => return None,
            };
            Some((desired.path.name.clone(), BTreeSet::from([hash])))
        })
        .collect()
}

/// Before compose applies `plan` to `group`'s `.claude-fragments` (under the group's lock):
/// records what it is about to write beside what `recorded` says is there, unless the record
/// holds it already, and returns what the record now says.
pub fn record_intent(
    layout: &Layout,
    group: &str,
    plan: &GroupPlan,
    recorded: Option<WrittenFragments>,
) -> Option<WrittenFragments> {
    let mut union = recorded.clone().unwrap_or_default();
    for (name, hashes) in planned(plan) {
        union.entry(name).or_default().extend(hashes);
    }
    if Some(&union) == recorded.as_ref() || union.is_empty() {
        return recorded;
    }
    match RECORDS.write(layout, group, &KEY, &union) {
        Ok(()) => Some(union),
        Err(err) => {
            tracing::warn!(group, %err, "cannot record the fragments clawmd is about to write");
            recorded
        }
    }
}

/// Whether the record of a group whose `.claude-fragments` clawmd brought to `plan` is to be
/// written (or removed): it says something else.
pub fn is_stale(recorded: Option<&WrittenFragments>, plan: &GroupPlan) -> bool {
    differs(recorded, &planned(plan))
}

/// Whether `recorded` says something else than `now` (no record says nothing was written).
fn differs(recorded: Option<&WrittenFragments>, now: &WrittenFragments) -> bool {
    match recorded {
        Some(recorded) => recorded != now,
        None => !now.is_empty(),
    }
}

/// Records that `group`'s `.claude-fragments` holds what `plan` puts there, once it was
/// applied, under the group's lock, unless `recorded` says so already; a plan with no
/// fragment removes the record (every file it named was removed, or is left as it is because
/// it changed since). A record that cannot be written is only logged: the next compose keeps
/// aside what it cannot vouch for.
pub fn record(layout: &Layout, group: &str, plan: &GroupPlan, recorded: Option<&WrittenFragments>) {
    let now = planned(plan);
    if !differs(recorded, &now) {
        return;
    }
    let done = match now.is_empty() {
        true => RECORDS.remove(layout, group),
        false => RECORDS.write(layout, group, &KEY, &now),
    };
    if let Err(err) = done {
        tracing::warn!(group, %err, "cannot record the fragments clawmd wrote");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_32_bytes_and_the_body_json() {
        assert_eq!(KEY.len(), 32);
        let body: WrittenFragments = [(
            "web.md".to_owned(),
            BTreeSet::from([content_hash(b"WEB\n")]),
        )]
        .into();
        let bytes = WrittenRecord::encode(&body).unwrap();
        assert!(bytes.starts_with(b"{\"web.md\":[\""));
        assert_eq!(WrittenRecord::decode(bytes), Some(body));
        assert_eq!(WrittenRecord::decode(b"{".to_vec()), None);
    }
}
