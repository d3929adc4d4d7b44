//! What a spawn's compose leaves until after its answer.
//!
//! A runner waits for the answer to a spawn, not for clawmd's own bookkeeping: once the group's
//! documents are in place and its verdict is known, what is left (the config the runner handed
//! kept for `check`, the group's verdict record written, its temp journal settled) changes
//! nothing the agent or the answer depends on. A
//! caller that answers spawns (`clawmd serve`, [`crate::service::Service::answer_line_then`])
//! has a run leave that work here ([`Later::deferring`]) and finishes it once the answer is
//! out, before it reads the next request. Each item holds the group's lock until it is
//! finished, so no other run sees the group between its documents and its record; a crash
//! before then leaves what a crash between those writes always left (no record: the next run
//! looks again; a journal with entries: the next run under the lock removes what they name).
//! Any other caller ([`Later::default`]) has the run do the work at once.

use std::sync::{Arc, Mutex, PoisonError};

use crate::disk::deployment::keep_handed_config;
use crate::disk::fsops::{GroupLock, TempJournal};
use crate::input::layout::Layout;
use crate::plan::delivery::verdicts::{Unrecorded, VerdictRecords};

use super::Found;

/// The bookkeeping runs leave until after their answer, or none ([`Later::default`]).
#[derive(Default)]
pub struct Later {
    deferring: bool,
    pending: Mutex<Vec<Bookkeeping>>,
}

impl std::fmt::Debug for Later {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Later")
            .field("deferring", &self.deferring)
            .field("pending", &pending.len())
            .finish()
    }
}

impl Later {
    /// Work left for [`Later::finish`], for a caller that answers first.
    pub fn deferring() -> Later {
        Later {
            deferring: true,
            pending: Mutex::default(),
        }
    }

    /// Whether a run leaves its groups' bookkeeping here ([`Later::deferring`]) rather than
    /// doing it at once.
    pub fn is_deferring(&self) -> bool {
        self.deferring
    }

    /// Leaves `work` until [`Later::finish`].
    pub(super) fn leave(&self, work: Bookkeeping) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.push(work);
    }

    /// Does the work left so far, in the order it was left; each group's lock is released as
    /// its work is done.
    pub fn finish(&self) {
        let pending =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        for work in pending {
            work.finish();
        }
    }
}

/// One group's bookkeeping after its compose: the config its runner handed kept, its verdict
/// record, its journal settled, then its lock released.
pub(super) struct Bookkeeping {
    pub layout: Layout,
    pub group: String,
    pub records: VerdictRecords<Found>,
    pub unrecorded: Option<Unrecorded<Found>>,
    pub journal: Arc<TempJournal>,
    pub lock: GroupLock,
}

impl Bookkeeping {
    fn finish(self) {
        let Bookkeeping {
            layout,
            group,
            records,
            unrecorded,
            journal,
            lock,
        } = self;
        // The handed config first: a record answers a spawn only while the kept config holds
        // the config it was made from. One that cannot be kept leaves `check` reporting the
        // group, and the next spawn composing it again.
        match (keep_handed_config(&layout, &group, &journal), unrecorded) {
            (Ok(()), Some(unrecorded)) => records.record(&layout, unrecorded),
            (Ok(()), None) => {}
            (Err(err), _) => tracing::warn!(group, "{}", crate::error::chain_text(&err)),
        }
        // A journal left unsettled keeps its entries: the next run under the lock removes the
        // temps they name, if any is still there, and reports it.
        if let Err(err) = journal.settle() {
            tracing::warn!("{}", crate::error::chain_text(&err));
        }
        drop(lock);
    }
}
