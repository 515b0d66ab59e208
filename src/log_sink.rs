//! Where decision log lines go (adapter): `console.log`, called from a
//! microtask. Under an attached inspector (`wrangler dev` always attaches
//! one, and `wrangler tail` in production) every console call captures
//! the JavaScript stack, and called straight from Rust that stack is deep
//! in wasm frames; from a microtask it is one frame. The line still
//! belongs to its request, and lines keep their order.

use wasm_bindgen::prelude::*;

use idemgate_core::decision_log::DecisionLog;

#[wasm_bindgen(
    inline_js = "export function log_line(line) { queueMicrotask(() => console.log(line)); }"
)]
extern "C" {
    fn log_line(line: &str);
}

pub fn emit(line: &DecisionLog) {
    log_line(&line.to_json());
}

/// A line that is not a decision's (reconciliation's), already JSON.
pub fn emit_text(line: &str) {
    log_line(line);
}
