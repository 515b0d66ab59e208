//! One shape for every Durable Object that keeps a book: a [`Book`] is the
//! object's state and rules, pure (a call applied at `now`, what its alarm
//! does, when it next wakes, whom it wakes, what changed); the [`Host`]
//! runs it the same way for each: load once, apply, store before any
//! answer leaves, set the alarm to the book's next moment, and hand the
//! wakes to the adapter. A Worker class is then a newtype that forwards
//! its RPC and `alarm` to a host over its storage ([`Store`]).
//!
//! Why the store takes changes rather than the book: a book kept as one
//! value writes itself whole ([`ValueBook`] and [`value::ValueStore`]);
//! one kept as rows (the flow coordinator's permits and waiters) writes
//! only the rows a call touched, which is what Durable Object storage
//! bills.

pub mod value;

#[cfg(test)]
mod tests;

use std::cell::RefCell;

/// What an object's alarm leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmStep {
    /// Nothing is left to keep: the object deletes what it stores.
    Forget,
    /// Store the book, send its wakes and set the next alarm.
    Keep,
}

/// An object's state and rules.
pub trait Book {
    type Call;
    type Reply;
    /// What a step changed, for the store to write.
    type Changes;
    fn apply(&mut self, call: &Self::Call, now: u64) -> Self::Reply;
    fn alarm(&mut self, now: u64) -> AlarmStep;
    fn next_alarm(&self) -> Option<u64>;
    /// The objects to wake, since last taken.
    fn take_wakes(&mut self) -> Vec<String>;
    fn take_changes(&mut self) -> Self::Changes;
}

/// Where a book is kept.
#[allow(async_fn_in_trait)]
pub trait Store<B: Book> {
    /// The book as stored (a new one when nothing is).
    async fn load(&self) -> Result<B, String>;
    async fn save(&self, changes: B::Changes) -> Result<(), String>;
    /// Deletes everything the object stores.
    async fn forget(&self) -> Result<(), String>;
    async fn set_alarm(&self, at: u64) -> Result<(), String>;
}

/// A book as its object holds it: read once, written after each step.
pub struct Host<B: Book, S: Store<B>> {
    store: S,
    book: RefCell<Option<B>>,
    /// The alarm set last: set again only when it moves.
    alarm_at: RefCell<Option<u64>>,
}

impl<B: Book, S: Store<B>> Host<B, S> {
    pub fn new(store: S) -> Host<B, S> {
        Host {
            store,
            book: RefCell::new(None),
            alarm_at: RefCell::new(None),
        }
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// Applies `call` at `now`: its reply, once what it changed is stored,
    /// and the objects to wake.
    pub async fn call(&self, call: &B::Call, now: u64) -> Result<(B::Reply, Vec<String>), String> {
        self.step(now, |book| book.apply(call, now)).await
    }

    /// Runs `f` on the book as a step of its own (an answer to a wake, an
    /// operator's read): stored, and the alarm moved, as a call is.
    pub async fn step<T>(
        &self,
        now: u64,
        f: impl FnOnce(&mut B) -> T,
    ) -> Result<(T, Vec<String>), String> {
        self.load().await?;
        let (done, changes, wakes) = self.with(|book| {
            let done = f(book);
            (done, book.take_changes(), book.take_wakes())
        });
        if let Err(message) = self.store.save(changes).await {
            // Storage is the truth: read it again next time.
            *self.book.borrow_mut() = None;
            return Err(message);
        }
        self.arm(now).await;
        Ok((done, wakes))
    }

    /// The object's alarm at `now`: the objects to wake. A storage failure
    /// is an error, so the runtime runs the alarm again.
    pub async fn alarm(&self, now: u64) -> Result<Vec<String>, String> {
        *self.alarm_at.borrow_mut() = None;
        self.load().await?;
        let (step, changes, wakes) = self.with(|book| {
            let step = book.alarm(now);
            (step, book.take_changes(), book.take_wakes())
        });
        if step == AlarmStep::Forget {
            self.store.forget().await?;
            // The storage, its alarm with it, is gone.
            *self.book.borrow_mut() = None;
            *self.alarm_at.borrow_mut() = None;
            return Ok(Vec::new());
        }
        if let Err(message) = self.store.save(changes).await {
            *self.book.borrow_mut() = None;
            return Err(message);
        }
        self.arm(now).await;
        Ok(wakes)
    }

    /// The runtime ran the object's alarm (and so cleared it), for an
    /// object whose alarm is a call of its own rather than [`Host::alarm`].
    pub fn alarm_rang(&self) {
        *self.alarm_at.borrow_mut() = None;
    }

    /// Reads the book without a step (nothing is stored).
    pub async fn read<T>(&self, f: impl FnOnce(&B) -> T) -> Result<T, String> {
        self.load().await?;
        Ok(self.with(|book| f(book)))
    }

    async fn load(&self) -> Result<(), String> {
        if self.book.borrow().is_some() {
            return Ok(());
        }
        let book = self.store.load().await?;
        self.book.borrow_mut().get_or_insert(book);
        Ok(())
    }

    fn with<T>(&self, f: impl FnOnce(&mut B) -> T) -> T {
        let mut book = self.book.borrow_mut();
        f(book.as_mut().expect("loaded first"))
    }

    /// Sets the alarm to the book's next moment (one already past, now),
    /// unless this instance set it there already.
    async fn arm(&self, now: u64) {
        let Some(next) = self.with(|book| book.next_alarm()) else {
            return;
        };
        if *self.alarm_at.borrow() == Some(next) {
            return;
        }
        if self.store.set_alarm(next.max(now)).await.is_ok() {
            *self.alarm_at.borrow_mut() = Some(next);
        }
    }
}
