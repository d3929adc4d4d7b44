//! What clawmd wrote in a group's `.claude-fragments` (`<state>/written/<group>`): the name of
//! each file and link it puts there and the hashes of the last contents it wrote under that
//! name (of a link, its target): a file moved aside and brought back, or left by another
//! delivery, is still known as clawmd's.
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

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;

use crate::disk::state::{Record, Records};
use crate::input::layout::Layout;
use crate::plan::delivery::GroupPlan;
use crate::plan::{Content, Place};
use crate::safe_name::short_hash;

/// The files and links clawmd wrote in a group's `.claude-fragments`: name → the hashes of
/// the contents it wrote there last ([`content_hash`]), oldest first, at most
/// [`KEPT_PER_NAME`]: the newest is what the plan it last applied puts there; the ones before,
/// what it wrote there before (in another delivery, say), which a file moved aside and back
/// may still hold.
pub type WrittenFragments = BTreeMap<String, Vec<String>>;

/// How many of the contents clawmd wrote under one name the record keeps.
pub const KEPT_PER_NAME: usize = 8;

/// The record kind: `<state>/written/<group>`.
pub struct WrittenRecord;

impl Record for WrittenRecord {
    const FOLDER: &'static str = "written";
    /// A name and up to eight hashes of 16 hex digits per fragment: a few KiB for hundreds
    /// of fragments.
    const MAX_BYTES: u64 = 1 << 20;
    type Body = WrittenFragments;

    fn encode(body: &WrittenFragments) -> Option<Vec<u8>> {
        serde_json::to_vec(body).ok()
    }

    fn decode(bytes: Vec<u8>) -> Option<WrittenFragments> {
        serde_json::from_slice(&bytes).ok()
    }

    /// JSON takes trailing spaces: the record, which says what compose may remove, is never
    /// cut short in place (a compose records its intent, then the shorter list of what it
    /// wrote; a kill between the two steps of a shorter rewrite left it torn).
    const PAD: u8 = b' ';
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

/// The fragments `plan` puts in `.claude-fragments`: name → the hash of the content.
fn planned(plan: &GroupPlan) -> BTreeMap<&str, String> {
    plan.entries
        .iter()
        .filter(|desired| desired.path.place == Place::Fragments)
        .filter_map(|desired| {
            let hash = match &desired.content {
                Content::File(bytes) | Content::Placeholder(bytes) => content_hash(bytes),
                Content::Symlink(target) => content_hash(target.as_os_str().as_bytes()),
                Content::Seed => return None,
            };
            Some((desired.path.name.as_str(), hash))
        })
        .collect()
}

/// What the record says once `plan` is written over what `recorded` says: each planned hash
/// the newest of its name, after the ones written there before (the oldest dropped beyond
/// [`KEPT_PER_NAME`]); the names the plan does not write kept when `keep_unplanned`, else
/// dropped.
fn with_plan(
    recorded: Option<&WrittenFragments>,
    plan: &GroupPlan,
    keep_unplanned: bool,
) -> WrittenFragments {
    with_written(recorded, planned(plan), keep_unplanned)
}

/// [`with_plan`] of the plan that writes `planned` (name → hash).
fn with_written(
    recorded: Option<&WrittenFragments>,
    planned: BTreeMap<&str, String>,
    keep_unplanned: bool,
) -> WrittenFragments {
    let mut now = match keep_unplanned {
        true => recorded.cloned().unwrap_or_default(),
        false => WrittenFragments::new(),
    };
    for (name, hash) in planned {
        let mut hashes = (recorded.and_then(|recorded| recorded.get(name)))
            .cloned()
            .unwrap_or_default();
        hashes.retain(|old| *old != hash);
        hashes.push(hash);
        let dropped = hashes.len().saturating_sub(KEPT_PER_NAME);
        hashes.drain(..dropped);
        now.insert(name.to_owned(), hashes);
    }
    now
}

/// Before compose applies `plan` to `group`'s `.claude-fragments` (under the group's lock):
/// records what it is about to write beside what `recorded` says is there, unless the record
/// says so already, and returns what the record now says.
pub fn record_intent(
    layout: &Layout,
    group: &str,
    plan: &GroupPlan,
    recorded: Option<WrittenFragments>,
) -> Option<WrittenFragments> {
    let intent = with_plan(recorded.as_ref(), plan, true);
    if Some(&intent) == recorded.as_ref() || intent.is_empty() {
        return recorded;
    }
    match RECORDS.write(layout, group, &KEY, &intent) {
        Ok(()) => Some(intent),
        Err(err) => {
            tracing::warn!(group, %err, "cannot record the fragments clawmd is about to write");
            recorded
        }
    }
}

/// Whether the record of a group whose `.claude-fragments` clawmd brought to `plan` is to be
/// written (or removed): it says something else.
pub fn is_stale(recorded: Option<&WrittenFragments>, plan: &GroupPlan) -> bool {
    differs(recorded, &with_plan(recorded, plan, false))
}

/// Whether `recorded` says something else than `now` (no record says nothing was written).
fn differs(recorded: Option<&WrittenFragments>, now: &WrittenFragments) -> bool {
    match recorded {
        Some(recorded) => recorded != now,
        None => !now.is_empty(),
    }
}

/// Records that `group`'s `.claude-fragments` holds what `plan` puts there, once it was
/// applied, under the group's lock, unless `recorded` says so already: the names the plan
/// writes, each with what clawmd wrote there before; a plan with no fragment removes the
/// record (every file it named was removed, or is left as it is because it changed since).
/// A record that cannot be written is only logged: the next compose keeps aside what it
/// cannot vouch for.
pub fn record(layout: &Layout, group: &str, plan: &GroupPlan, recorded: Option<&WrittenFragments>) {
    let now = with_plan(recorded, plan, false);
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
        let body: WrittenFragments = [("web.md".to_owned(), vec![content_hash(b"WEB\n")])].into();
        let bytes = WrittenRecord::encode(&body).unwrap();
        assert!(bytes.starts_with(b"{\"web.md\":[\""));
        assert_eq!(WrittenRecord::decode(bytes), Some(body));
        assert_eq!(WrittenRecord::decode(b"{".to_vec()), None);
    }

    fn hashes(record: &WrittenFragments, name: &str) -> Vec<String> {
        record.get(name).cloned().unwrap_or_default()
    }

    #[test]
    fn what_was_written_before_stays_vouched_for_newest_last_up_to_the_bound() {
        let (link, copy) = (content_hash(b"link form"), content_hash(b"copy form"));
        let first = with_written(None, [("mcp-db.md", link.clone())].into(), false);
        assert_eq!(hashes(&first, "mcp-db.md"), std::slice::from_ref(&link));
        // Another delivery writes other bytes: both are clawmd's, the new one last.
        let second = with_written(Some(&first), [("mcp-db.md", copy.clone())].into(), false);
        assert_eq!(hashes(&second, "mcp-db.md"), [link.clone(), copy.clone()]);
        // Written again, an old content moves to the end rather than twice in the list.
        let third = with_written(Some(&second), [("mcp-db.md", link.clone())].into(), false);
        assert_eq!(hashes(&third, "mcp-db.md"), [copy.clone(), link.clone()]);
        // Found as planned: nothing to record.
        let same = with_written(Some(&third), [("mcp-db.md", link.clone())].into(), false);
        assert!(!differs(Some(&third), &same));
        // At most KEPT_PER_NAME, the oldest dropped first.
        let mut record = third;
        for round in 0..KEPT_PER_NAME + 3 {
            let hash = content_hash(format!("edit {round}").as_bytes());
            record = with_written(Some(&record), [("mcp-db.md", hash)].into(), false);
        }
        let kept = hashes(&record, "mcp-db.md");
        assert_eq!(kept.len(), KEPT_PER_NAME);
        assert!(!kept.contains(&copy) && !kept.contains(&link), "{kept:?}");
        let last = content_hash(format!("edit {}", KEPT_PER_NAME + 2).as_bytes());
        assert_eq!(kept.last(), Some(&last));
    }

    #[test]
    fn an_intent_keeps_every_name_and_a_record_of_what_was_written_only_the_planned_ones() {
        let old: WrittenFragments = [
            ("gone.md".to_owned(), vec![content_hash(b"GONE")]),
            ("web.md".to_owned(), vec![content_hash(b"WEB 1")]),
        ]
        .into();
        let web = content_hash(b"WEB 2");
        let intent = with_written(Some(&old), [("web.md", web.clone())].into(), true);
        assert_eq!(hashes(&intent, "gone.md"), [content_hash(b"GONE")]);
        assert_eq!(
            hashes(&intent, "web.md"),
            [content_hash(b"WEB 1"), web.clone()]
        );
        let done = with_written(Some(&intent), [("web.md", web.clone())].into(), false);
        assert_eq!(done.keys().collect::<Vec<_>>(), ["web.md"]);
        assert_eq!(hashes(&done, "web.md"), [content_hash(b"WEB 1"), web]);
    }

    #[test]
    fn a_record_rewritten_shorter_keeps_its_length_and_reads_back() {
        // Cut short in place, a kill between the write and the cut would leave it torn: it is
        // padded to the file's length instead.
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::under_root(root.path());
        // A store of its own (the process's, `RECORDS`, keeps the folder it opened first).
        let records = Records::<WrittenRecord>::new();
        let read = |layout: &Layout| records.read_keyed(layout, "g", &KEY);
        let long: WrittenFragments = (0..20)
            .map(|n| (format!("skill-{n}.md"), vec![content_hash(&[n])]))
            .collect();
        let short: WrittenFragments = [("web.md".to_owned(), vec![content_hash(b"WEB\n")])].into();
        records.write(&layout, "g", &KEY, &long).unwrap();
        let path = layout.state_dir.join("written/g");
        let length = std::fs::metadata(&path).unwrap().len();
        records.write(&layout, "g", &KEY, &short).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), length);
        assert_eq!(read(&layout), Some(short.clone()));
        assert_eq!(records.read(&layout, "g").map(|(key, _)| key), Some(KEY));
        // Longer again: it grows.
        let longer: WrittenFragments = (0..40)
            .map(|n| (format!("skill-{n}.md"), vec![content_hash(&[n])]))
            .collect();
        records.write(&layout, "g", &KEY, &longer).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > length);
        assert_eq!(read(&layout), Some(longer));
    }

    #[test]
    fn a_record_written_as_sets_by_an_earlier_clawmd_reads_back() {
        let earlier = br#"{"web.md":["0123456789abcdef"]}"#.to_vec();
        let body = WrittenRecord::decode(earlier).unwrap();
        assert_eq!(hashes(&body, "web.md"), ["0123456789abcdef"]);
    }
}
