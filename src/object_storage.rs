//! A Durable Object's key-value storage and alarm as the core's hosts
//! keep their books in it ([`idemgate_core::host::value::ValueStorage`]).

use worker::js_sys::{Date as JsDate, Number};
use worker::{ScheduledTime, Storage};

use idemgate_core::host::value::ValueStorage;

pub struct KeyValues {
    pub storage: Storage,
    /// Counts a write, for the benchmark's cost figures.
    pub on_write: fn(),
}

impl ValueStorage for KeyValues {
    async fn get(&self, key: &str) -> Result<Option<String>, String> {
        self.storage
            .get::<String>(key)
            .await
            .map_err(|error| error.to_string())
    }

    async fn put(&self, key: &str, value: String) -> Result<(), String> {
        (self.on_write)();
        self.storage
            .put(key, value)
            .await
            .map_err(|error| error.to_string())
    }

    async fn delete_all(&self) -> Result<(), String> {
        self.storage
            .delete_all()
            .await
            .map_err(|error| error.to_string())
    }

    async fn set_alarm(&self, at: u64) -> Result<(), String> {
        // A date: `set_alarm` reads a bare number as an offset from now.
        let at = JsDate::new(&Number::from(at as f64));
        self.storage
            .set_alarm(ScheduledTime::new(at))
            .await
            .map_err(|error| error.to_string())
    }
}
