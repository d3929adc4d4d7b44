//! `compose --dry-run --diff`: the content change of every file a compose would write, as a
//! unified diff (against what is on disk now; a new file against nothing).
//!
//! It observes the groups exactly as compose does (the same plan, the same steps) and writes
//! nothing; compose itself is not involved, so a runner's compose pays nothing for it.

use crate::disk::deployment::{checked_group_dir, observe, read_sources};
use crate::disk::reconcile::Step;
use crate::error::{Error, GroupError};
use crate::input::layout::Layout;
use crate::plan::Content;
use crate::plan::target::DeliverySettings;

/// The largest current file a diff reads (a composed file is far smaller).
const MAX_DIFF_BYTES: u64 = 64 * 1024 * 1024;

/// One file's content change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    /// The group.
    pub group: String,
    /// The path relative to the group folder.
    pub path: String,
    /// The unified diff (`--- a/…`, `+++ b/…`, hunks), lines ending in `\n`.
    pub unified: String,
}

/// The diff of every regular file compose would write in `groups`, in order. A group that
/// cannot be observed is skipped here (compose's report says why).
pub fn planned_diffs(
    layout: &Layout,
    settings: &DeliverySettings,
    groups: &[String],
) -> Result<Vec<FileDiff>, Error> {
    let (sources, _) = read_sources(layout)?;
    let mut diffs = Vec::new();
    for group in groups {
        // A failure is compose's to report.
        let _ = group_diffs(layout, &sources, settings, group, &mut diffs);
    }
    Ok(diffs)
}

fn group_diffs(
    layout: &Layout,
    sources: &crate::input::sources::Sources,
    settings: &DeliverySettings,
    group: &str,
    diffs: &mut Vec<FileDiff>,
) -> Result<(), GroupError> {
    let path = checked_group_dir(layout, group)?;
    let seen = observe(layout, sources, &path, settings, None)?;
    for step in &seen.steps {
        let Step::Write {
            path,
            content: Content::File(new) | Content::Placeholder(new),
            ..
        } = step
        else {
            continue;
        };
        let dir = seen.dirs().get(path.place);
        let old = match dir {
            Some(dir) => dir.read_file(&path.name, MAX_DIFF_BYTES).unwrap_or(None),
            None => None,
        };
        let old = String::from_utf8_lossy(old.as_deref().unwrap_or_default());
        let new = String::from_utf8_lossy(new);
        let rel = path.to_string();
        let unified = similar::TextDiff::from_lines(old.as_ref(), new.as_ref())
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{group}/{rel}"), &format!("b/{group}/{rel}"))
            .to_string();
        if !unified.is_empty() {
            diffs.push(FileDiff {
                group: group.to_owned(),
                path: rel,
                unified,
            });
        }
    }
    Ok(())
}
