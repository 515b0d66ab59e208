//! The audit log's one writer (SPEC §13), as decisions over its
//! [`AuditRows`]: which id an intent gets, what a call appends, which
//! entries a page holds, when the chain's head goes out as a checkpoint
//! and when the object next wakes. The Worker's `AuditLog` object runs it
//! over its SQLite; each call is reads and writes with no await between
//! them, so there they commit together and no two appends see the same
//! head.

use super::checkpoint::{Checkpoint, CheckpointSchedule};
use super::rows::{AuditRows, CHECKPOINT_AT, CHECKPOINT_SEQ, INTENT_COUNTER};
use super::{next_intent_id, AuditCall, Begun, Chain, Entry, Intent, Page, SETTLE_AFTER_MS};

/// What a refused write says (the end-to-end tests' hook).
const REFUSED: &str = "the audit log refused the write (test hook)";

/// The writer over its rows.
pub struct Writer<R> {
    rows: R,
}

/// A checkpoint the alarm found due, to be sent, then reported
/// ([`Writer::checkpoint_sent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueCheckpoint {
    pub checkpoint: Checkpoint,
    schedule: CheckpointSchedule,
}

impl<R: AuditRows> Writer<R> {
    pub fn new(rows: R) -> Writer<R> {
        Writer { rows }
    }

    pub fn into_rows(self) -> R {
        self.rows
    }

    /// One call at `now`, after settling what is due: the reply's line,
    /// or an error the caller sees as a failed write.
    pub fn answer(&mut self, call: AuditCall, now: u64) -> Result<String, String> {
        self.settle(now)?;
        match call {
            AuditCall::Begin { intent, fail } => {
                if fail {
                    return Err(REFUSED.into());
                }
                let intent_id = self.begin(&intent)?;
                Ok(json(&Begun { intent_id }))
            }
            AuditCall::Finish {
                intent_id,
                result,
                fail,
            } => {
                if fail {
                    return Err(REFUSED.into());
                }
                match self.rows.intent(intent_id)? {
                    Some(intent) => Ok(json(&self.append(intent_id, &intent, &result)?)),
                    // Settled already (as `unknown`): it is in the chain.
                    None => Err(format!("intent {intent_id} is no longer open")),
                }
            }
            AuditCall::Head => Ok(json(&self.rows.head()?)),
            AuditCall::Page {
                routes,
                before,
                limit,
            } => {
                let before = before.unwrap_or(i64::MAX as u64);
                let entries = self.rows.newest(before, routes.as_deref(), limit)?;
                self.page(entries, limit)
            }
            AuditCall::Export { after, limit } => {
                let entries = self.rows.oldest(after, limit)?;
                self.page(entries, limit)
            }
        }
    }

    /// Records `intent` under an id never handed out before.
    fn begin(&mut self, intent: &Intent) -> Result<u64, String> {
        let counter = self.rows.counter(INTENT_COUNTER)?;
        let highest_open = self.rows.highest_open()?;
        let id = next_intent_id(counter, self.rows.head()?.seq, highest_open);
        self.rows.set_counter(INTENT_COUNTER, id)?;
        self.rows.open(id, intent)?;
        Ok(id)
    }

    fn page(&mut self, entries: Vec<Entry>, limit: u32) -> Result<String, String> {
        Ok(json(&Page {
            cursor: Page::cursor_of(&entries, limit),
            entries,
            head: self.rows.head()?,
        }))
    }

    /// Appends the intent `id` as the next entry, and closes the intent.
    fn append(&mut self, id: u64, intent: &Intent, result: &str) -> Result<Entry, String> {
        let mut chain = Chain::restore(self.rows.head()?);
        let entry = chain.append(intent, result);
        self.rows.append(id, &entry)?;
        Ok(entry)
    }

    /// Intents older than [`SETTLE_AFTER_MS`] become entries whose result
    /// is `unknown`: the act may have happened, so it is on record.
    pub fn settle(&mut self, now: u64) -> Result<(), String> {
        let stale = self
            .rows
            .opened_before(now.saturating_sub(SETTLE_AFTER_MS))?;
        if stale.is_empty() {
            return Ok(());
        }
        let mut chain = Chain::restore(self.rows.head()?);
        for (id, entry) in chain.settle(&stale, now) {
            self.rows.append(id, &entry)?;
        }
        Ok(())
    }

    /// The object's alarm at `now`: settles what is due, and answers the
    /// head's checkpoint when one is due.
    pub fn alarm(&mut self, now: u64) -> Result<Option<DueCheckpoint>, String> {
        self.settle(now)?;
        let head = self.rows.head()?;
        let schedule = self.schedule()?;
        Ok(schedule.due(head.seq, now).then(|| DueCheckpoint {
            checkpoint: Checkpoint::of(&head, now),
            schedule,
        }))
    }

    /// Keeps what sending `due` came to: a checkpoint not delivered
    /// everywhere is tried again a minute on.
    pub fn checkpoint_sent(
        &mut self,
        due: DueCheckpoint,
        sent: bool,
        now: u64,
    ) -> Result<(), String> {
        let mut schedule = due.schedule;
        let seq = if sent {
            due.checkpoint.seq
        } else {
            schedule.sent_seq
        };
        schedule.sent(seq, now);
        self.rows.set_counter(CHECKPOINT_AT, schedule.sent_at)?;
        self.rows.set_counter(CHECKPOINT_SEQ, schedule.sent_seq)
    }

    /// The next moment there is work (the oldest open intent's settling,
    /// or the next checkpoint), no earlier than `now`; `None` when there
    /// is none, or the rows could not be read (every later call settles
    /// what is due too).
    pub fn next_alarm(&mut self, now: u64) -> Option<u64> {
        let oldest_intent = self
            .rows
            .oldest_open_at()
            .ok()
            .flatten()
            .map(|at| at + SETTLE_AFTER_MS + 1_000);
        let checkpoint = match (self.rows.head(), self.schedule()) {
            (Ok(head), Ok(schedule)) => schedule.next_at(head.seq),
            _ => None,
        };
        [oldest_intent, checkpoint]
            .into_iter()
            .flatten()
            .min()
            .map(|next| next.max(now))
    }

    /// When a checkpoint was last sent, and of which head.
    fn schedule(&mut self) -> Result<CheckpointSchedule, String> {
        Ok(CheckpointSchedule {
            sent_at: self.rows.counter(CHECKPOINT_AT)?.unwrap_or(0),
            sent_seq: self.rows.counter(CHECKPOINT_SEQ)?.unwrap_or(0),
        })
    }
}

/// A reply as its line.
fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("a reply serializes")
}
