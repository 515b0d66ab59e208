//! Reads the configuration from the Workers environment: `[vars]` and
//! secrets alike are properties of `env`.

use std::cell::RefCell;
use std::rc::Rc;

use worker::js_sys::Reflect;
use worker::wasm_bindgen::JsValue;
use worker::Env;

use idemgate_core::config::Config;
use idemgate_core::problem::Problem;

/// A var may arrive as a string, or as a number or boolean when
/// `wrangler.toml` writes it unquoted; both are read as their text.
fn lookup(env: &Env, name: &str) -> Option<String> {
    let value = Reflect::get(env, &JsValue::from_str(name)).ok()?;
    if value.is_undefined() || value.is_null() {
        return None;
    }
    if let Some(text) = value.as_string() {
        return Some(text);
    }
    if let Some(number) = value.as_f64() {
        return Some(number.to_string());
    }
    value.as_bool().map(|flag| flag.to_string())
}

/// The configuration, parsed once per isolate: an isolate's `env` never
/// changes (new variables or secrets mean a new deployment, so new
/// isolates), and parsing it on every request cost about 5% of a replay.
pub fn config_from_env(env: &Env) -> Result<Rc<Config>, Problem> {
    PARSED.with(|parsed| {
        parsed
            .borrow_mut()
            .get_or_insert_with(|| Config::from_lookup(|name| lookup(env, name)).map(Rc::new))
            .clone()
    })
}

thread_local! {
    static PARSED: RefCell<Option<Result<Rc<Config>, Problem>>> = const { RefCell::new(None) };
}
