//! Hooks for the end-to-end tests, compiled only with the `test-hooks`
//! feature: the release worker has none of this (a test checks its wasm).
//!
//! - `IDEMGATE_TEST_DROP_ALARMS=true` makes every alarm the object sets
//!   vanish though the runtime said it took it: the worst alarm outage, in
//!   which only the scheduled sweep still delivers.
//! - `IDEMGATE_TEST_SECOND_VERSION_KEYS=true` delivers each delivery where
//!   the second version kept its receipt: a deployment before its upgrade.
//! - A request header `X-Idemgate-Test-Audit: fail` on an operator act
//!   makes its intent's audit write fail (the audit log's writer refuses
//!   it); `fail-result` makes the write of its result fail.

use worker::Env;

pub fn alarms_dropped(env: &Env) -> bool {
    crate::env::lookup(env, "IDEMGATE_TEST_DROP_ALARMS").as_deref() == Some("true")
}

pub fn second_version_keys(env: &Env) -> bool {
    crate::env::lookup(env, "IDEMGATE_TEST_SECOND_VERSION_KEYS").as_deref() == Some("true")
}

pub fn audit_hook(header_list: &[(String, String)]) -> crate::audit_client::AuditHook {
    use crate::audit_client::AuditHook;
    match idemgate_core::headers::get(header_list, "x-idemgate-test-audit") {
        Some("fail") => AuditHook::FailIntent,
        Some("fail-result") => AuditHook::FailResult,
        _ => AuditHook::None,
    }
}
