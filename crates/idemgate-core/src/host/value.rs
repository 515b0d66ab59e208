//! A book kept as one stored value (JSON under one key of the object's
//! key-value storage), written whole after each step: the order book, the
//! alert book, a route's reconciliation runs.

use serde::de::DeserializeOwned;

use super::{Book, Store};

/// The object's key-value storage and its alarm.
#[allow(async_fn_in_trait)]
pub trait ValueStorage {
    async fn get(&self, key: &str) -> Result<Option<String>, String>;
    async fn put(&self, key: &str, value: String) -> Result<(), String>;
    async fn delete_all(&self) -> Result<(), String>;
    async fn set_alarm(&self, at: u64) -> Result<(), String>;
}

/// Keeps a book under `key`; its changes are its whole JSON.
pub struct ValueStore<S> {
    pub storage: S,
    pub key: &'static str,
}

impl<B, S> Store<B> for ValueStore<S>
where
    B: Book<Changes = String> + DeserializeOwned + Default,
    S: ValueStorage,
{
    async fn load(&self) -> Result<B, String> {
        match self.storage.get(self.key).await? {
            Some(json) => serde_json::from_str(&json).map_err(|error| error.to_string()),
            None => Ok(B::default()),
        }
    }

    async fn save(&self, changes: String) -> Result<(), String> {
        self.storage.put(self.key, changes).await
    }

    async fn forget(&self) -> Result<(), String> {
        self.storage.delete_all().await
    }

    async fn set_alarm(&self, at: u64) -> Result<(), String> {
        self.storage.set_alarm(at).await
    }
}

/// Key-value storage in memory, for native tests and the simulation:
/// writes can be made to fail.
#[derive(Debug, Default)]
pub struct MemoryValues {
    pub values: std::cell::RefCell<std::collections::BTreeMap<String, String>>,
    pub alarm: std::cell::Cell<Option<u64>>,
    /// The next this many writes fail.
    pub failing_puts: std::cell::Cell<u32>,
    pub puts: std::cell::Cell<u64>,
}

impl ValueStorage for MemoryValues {
    async fn get(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.values.borrow().get(key).cloned())
    }

    async fn put(&self, key: &str, value: String) -> Result<(), String> {
        if self.failing_puts.get() > 0 {
            self.failing_puts.set(self.failing_puts.get() - 1);
            return Err("the write failed".into());
        }
        self.puts.set(self.puts.get() + 1);
        self.values.borrow_mut().insert(key.to_string(), value);
        Ok(())
    }

    async fn delete_all(&self) -> Result<(), String> {
        self.values.borrow_mut().clear();
        self.alarm.set(None);
        Ok(())
    }

    async fn set_alarm(&self, at: u64) -> Result<(), String> {
        self.alarm.set(Some(at));
        Ok(())
    }
}
