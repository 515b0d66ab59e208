//! An in-memory [`Backend`]: a virtual clock, a receipt slot, a scripted
//! origin and switchable storage failures. It lets the engine's logic run
//! in plain `cargo test`, and counts every storage operation. Tests only.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;

use crate::decision_log::DecisionLog;
use crate::engine::{Backend, StorageOps};
use crate::origin::OutboundRequest;
use crate::receipt::{ForwardResult, HttpResponse, Receipt};

#[derive(Default)]
pub struct MemoryBackend {
    pub now: Cell<u64>,
    pub stored: RefCell<Option<Receipt>>,
    pub alarm: Cell<Option<u64>>,
    pub fail_writes: Cell<bool>,
    /// Answers the origin gives, in order; a 201 when the script runs out.
    pub script: RefCell<VecDeque<ForwardResult>>,
    pub forwarded: RefCell<Vec<OutboundRequest>>,
    pub ops: Cell<StorageOps>,
    pub logged: RefCell<Vec<DecisionLog>>,
}

impl MemoryBackend {
    pub fn new(now: u64) -> MemoryBackend {
        let backend = MemoryBackend::default();
        backend.now.set(now);
        backend
    }

    pub fn answer_with(&self, result: ForwardResult) {
        self.script.borrow_mut().push_back(result);
    }

    fn count(&self, bump: impl FnOnce(&mut StorageOps)) {
        StorageOps::bump(&self.ops, bump);
    }

    fn write_allowed(&self) -> Result<(), String> {
        self.count(|ops| ops.writes += 1);
        if self.fail_writes.get() {
            Err("injected write failure".into())
        } else {
            Ok(())
        }
    }
}

pub fn created(body: &str) -> ForwardResult {
    ForwardResult::Answered(HttpResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
    })
}

impl Backend for MemoryBackend {
    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    fn load(&self) -> Result<Option<Receipt>, String> {
        self.count(|ops| ops.reads += 1);
        Ok(self.stored.borrow().clone())
    }

    fn save(&self, receipt: &Receipt) -> Result<(), String> {
        self.write_allowed()?;
        *self.stored.borrow_mut() = Some(receipt.clone());
        Ok(())
    }

    fn delete(&self) -> Result<(), String> {
        self.write_allowed()?;
        *self.stored.borrow_mut() = None;
        Ok(())
    }

    async fn set_alarm(&self, at_ms: u64) -> Result<(), String> {
        self.count(|ops| ops.alarm_writes += 1);
        self.alarm.set(Some(at_ms));
        Ok(())
    }

    fn new_owner(&self) -> u64 {
        self.forwarded.borrow().len() as u64 + 1
    }

    async fn forward(&self, request: OutboundRequest, _timeout_ms: u64) -> ForwardResult {
        self.forwarded.borrow_mut().push(request);
        self.script
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| created(r#"{"payment_id":"pay_1"}"#))
    }

    /// Virtual time: sleeping moves the clock and returns at once.
    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        self.now.set(self.now.get() + ms);
        std::future::ready(())
    }

    fn log(&self, line: &DecisionLog) {
        self.logged.borrow_mut().push(line.clone());
    }
}
