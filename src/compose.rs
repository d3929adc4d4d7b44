//! `compose`: bring one group, or all, to the state its `container.json` describes.
//!
//! For each group: take the group's lock, [`observe`] it (read its config, compute the
//! [`plan`](crate::plan) and [`diff`](crate::reconcile::diff) it against the disk) and apply the
//! difference. Groups are independent: a failing group is reported and left as it was, the
//! others are composed.

use std::time::Duration;

use crate::delivery::DeliverySettings;
use crate::delivery::verify::verify;
use crate::deployment::{Selection, checked_group_dir, observe, read_sources};
use crate::error::{Error, GroupError};
use crate::fsops;
use crate::layout::Layout;
use crate::plan::{GroupPlan, Sources};
use crate::reconcile::apply;
use crate::report::{ComposeReport, GroupReport};

/// How to compose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposeOptions {
    /// Delivery mode, default provider, budgets (from `clawmd.json`, flags and `CLAWMD_*`).
    pub settings: DeliverySettings,
    /// Compute and report the changes without making them.
    pub dry_run: bool,
    /// How long to wait for another run holding a group's lock.
    pub lock_timeout: Duration,
}

impl Default for ComposeOptions {
    fn default() -> Self {
        ComposeOptions {
            settings: DeliverySettings::default(),
            dry_run: false,
            lock_timeout: Duration::from_secs(60),
        }
    }
}

/// Composes the selected groups. Fails as a whole only when the groups folder or the shared
/// content cannot be read; a group's own failure is in its report.
pub fn compose(
    layout: &Layout,
    selection: &Selection,
    options: &ComposeOptions,
) -> Result<ComposeReport, Error> {
    let groups = selection.groups(layout)?;
    let (sources, warnings) = read_sources(layout).map_err(Error::Sources)?;
    let reports = parallel_map(&groups, |group| {
        match compose_group(layout, &sources, group, options) {
            Ok(report) => report,
            Err(err) => {
                tracing::error!(group, "{err}");
                GroupReport::failed(group, &err)
            }
        }
    });
    Ok(ComposeReport::new(
        options.dry_run,
        options.settings.delivery,
        reports,
        warnings,
    ))
}

/// Applies `work` to every item on a few threads (groups are independent and each takes its own
/// lock), returning the results in the items' order. Sequential for small inputs and under
/// crash injection, where the step numbering must be deterministic.
fn parallel_map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() < 32 || fsops::crash_injection_enabled() {
        return items.iter().map(work).collect();
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(index) else { break };
                        done.push((index, work(item)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a compose worker panicked"))
            .collect()
    });
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}

/// Composes one group: lock, read config, plan, diff, apply.
pub fn compose_group(
    layout: &Layout,
    sources: &Sources,
    group: &str,
    options: &ComposeOptions,
) -> Result<GroupReport, GroupError> {
    let group_path = checked_group_dir(layout, group)?;
    // A first look without the lock: a group that is already right (the common case at every
    // spawn) is reported unchanged without taking the lock or writing anything. Anything else
    // is looked at again under the lock, since another run may be changing it.
    let settings = &options.settings;
    match observe(layout, sources, &group_path, settings, false) {
        // `.claude-fragments` must exist even when nothing is imported from it (inline): the
        // runner bind-mounts it read-only.
        Ok(first) if options.dry_run || (first.is_up_to_date() && first.fragments.is_some()) => {
            let report = GroupReport::from_steps(group, &first.steps, &first.plan);
            return Ok(delivered(layout, sources, &first.plan, options, report));
        }
        Err(err) if options.dry_run || matches!(err, GroupError::Missing { .. }) => {
            return Err(err);
        }
        // Changes to make, or a failure that may come from another run changing the group
        // right now: look again under the lock.
        Ok(_) | Err(_) => {}
    }
    let _lock = fsops::lock(&layout.lock_file(group), options.lock_timeout)?;
    let seen = observe(layout, sources, &group_path, settings, true)?;
    let fragments = seen
        .fragments
        .as_ref()
        .expect("open_child with create returns a folder or an error");
    apply(&seen.dir, fragments, &seen.steps)?;
    let report = GroupReport::from_steps(group, &seen.steps, &seen.plan);
    Ok(delivered(layout, sources, &seen.plan, options, report))
}

/// Adds to `report` what reaches the agent of the group composed as `plan`.
fn delivered(
    layout: &Layout,
    sources: &Sources,
    plan: &GroupPlan,
    options: &ComposeOptions,
    mut report: GroupReport,
) -> GroupReport {
    report.set_delivered(verify(layout, plan, sources, &options.settings));
    report
}
