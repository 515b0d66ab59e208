//! Reads the configuration from the Workers environment: `[vars]` and
//! secrets alike are properties of `env`.

use std::rc::Rc;

use worker::js_sys::{Reflect, JSON};
use worker::wasm_bindgen::JsValue;
use worker::Env;

use idemgate_core::config::Config;
use idemgate_core::problem::Problem;

/// A var may arrive as a string, as a number or boolean when
/// `wrangler.toml` writes it unquoted, or as an object when it is a TOML
/// table (`[vars.ROUTES.stripe]`); each is read as its text, the way
/// `JSON.stringify` writes it (an object as JSON, which is also what
/// `--var ROUTES:'{...}'` passes). Formatting numbers in JavaScript keeps
/// Rust's float formatting out of the wasm.
pub fn lookup(env: &Env, name: &str) -> Option<String> {
    let value = Reflect::get(env, &JsValue::from_str(name)).ok()?;
    if value.is_undefined() || value.is_null() {
        return None;
    }
    if let Some(text) = value.as_string() {
        return Some(text);
    }
    JSON::stringify(&value).ok()?.as_string()
}

/// The configuration, parsed once per isolate ([`crate::isolate`]).
pub fn config_from_env(env: &Env) -> Result<Rc<Config>, Problem> {
    crate::isolate::with(|isolate| {
        isolate
            .config
            .borrow_mut()
            .get_or_insert_with(|| {
                let mut config = Config::from_lookup(|name| lookup(env, name))?;
                // A binding is an object of the environment, not a string.
                config.refuse_missing_bindings(|name| {
                    Reflect::get(env, &JsValue::from_str(name)).is_ok_and(|value| value.is_object())
                });
                Ok(Rc::new(config))
            })
            .clone()
    })
}
