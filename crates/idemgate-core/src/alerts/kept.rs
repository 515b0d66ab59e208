//! An alert object's book as its host keeps it ([`crate::host`]): the
//! calls it takes ([`AlertCall`]), and the book with the configuration it
//! runs under ([`KeptAlerts`]). The configuration (`ALERTS` and its
//! companions) is the Worker's, read by the object and given to each step;
//! it is never stored, so a changed `ALERTS` applies at once.

use serde::{Deserialize, Serialize};

use super::book::AlertBook;
use super::{AlertsConfig, Condition};
use crate::host::{AlarmStep, Book};
use crate::index::owed::RowReport;

/// What an alert object is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertCall {
    /// Signs observed since the last call.
    Observe(Vec<Observation>),
    /// The time passed (the Cron Trigger's minute).
    Tick,
    /// The book as the operator sees it.
    View,
    /// Key objects' word on their index rows (kept apart from the book,
    /// whether or not alerting is on: [`crate::index::owed`]).
    Rows(Vec<RowReport>),
    /// The route's owed rows, as health shows them.
    OwedRows,
}

/// `count` signs of `condition` on `route`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    pub route: String,
    pub condition: Condition,
    pub count: u64,
    pub detail: String,
}

/// The book, stored as it always was (one JSON value), and the
/// configuration of the step under way.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KeptAlerts {
    #[serde(flatten)]
    pub book: AlertBook,
    #[serde(skip)]
    config: Option<AlertsConfig>,
}

impl KeptAlerts {
    /// Applies `call` at `now` under `config`: the view the caller gets.
    pub fn answer(
        &mut self,
        call: &AlertCall,
        now: u64,
        config: &AlertsConfig,
    ) -> serde_json::Value {
        self.config = Some(config.clone());
        match call {
            AlertCall::Observe(observations) => {
                for seen in observations {
                    self.book.observe(
                        &seen.route,
                        seen.condition,
                        seen.count,
                        &seen.detail,
                        now,
                        config,
                    );
                }
            }
            AlertCall::Tick => self.book.tick(now, config),
            AlertCall::View | AlertCall::Rows(_) | AlertCall::OwedRows => {}
        }
        self.view()
    }

    /// What the operator sees (nothing changes).
    pub fn view(&self) -> serde_json::Value {
        serde_json::json!({
            "configured": true,
            "conditions": self.book.view(),
            "outbox": self.book.outbox_len(),
            "delivered": self.book.delivered,
            "given_up": self.book.given_up,
        })
    }
}

/// The object's answer when `ALERTS` is not set (or broken).
pub fn not_configured() -> serde_json::Value {
    serde_json::json!({ "configured": false })
}

impl Book for KeptAlerts {
    type Call = (AlertCall, AlertsConfig);
    type Reply = serde_json::Value;
    type Changes = String;

    fn apply(&mut self, (call, config): &(AlertCall, AlertsConfig), now: u64) -> serde_json::Value {
        self.answer(call, now, config)
    }

    /// The time passed; what is due is sent by the object after
    /// ([`AlertBook::due`], [`AlertBook::sent`]).
    fn alarm(&mut self, now: u64) -> AlarmStep {
        if let Some(config) = self.config.clone() {
            self.book.tick(now, &config);
        }
        AlarmStep::Keep
    }

    fn next_alarm(&self) -> Option<u64> {
        self.book.next_wake(self.config.as_ref()?)
    }

    fn take_wakes(&mut self) -> Vec<String> {
        Vec::new()
    }

    fn take_changes(&mut self) -> String {
        serde_json::to_string(self).expect("a book serializes")
    }
}

#[cfg(test)]
mod tests;
