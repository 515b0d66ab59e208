//! Hooks for the end-to-end tests, compiled only with the `test-hooks`
//! feature: the release worker has none of this (a test checks its wasm).
//!
//! - `IDEMGATE_TEST_DROP_ALARMS=true` makes every alarm the object sets
//!   vanish though the runtime said it took it: the worst alarm outage, in
//!   which only the scheduled sweep still delivers.
//! - `IDEMGATE_TEST_SECOND_VERSION_KEYS=true` delivers each delivery where
//!   the second version kept its receipt: a deployment before its upgrade.
//! - `IDEMGATE_TEST_V4_INDEX=true` writes every index row into the D1
//!   index, as a v4 deployment did (the upgrade's test).
//! - `POST /__idemgate/test/index-shards?route=R&fail=true` makes every
//!   index shard of route R refuse every call (`fail=false` undoes it).
//! - A request header `X-Idemgate-Test-Audit: fail` on an operator act
//!   makes its intent's audit write fail (the audit log's writer refuses
//!   it); `fail-result` makes the write of its result fail.

use worker::Env;

pub fn alarms_dropped(env: &Env) -> bool {
    crate::env::lookup(env, "IDEMGATE_TEST_DROP_ALARMS").as_deref() == Some("true")
}

pub fn v4_index(env: &Env) -> bool {
    crate::env::lookup(env, "IDEMGATE_TEST_V4_INDEX").as_deref() == Some("true")
}

/// Tells every shard of `route` to fail (or answer again).
pub async fn fail_index_shards(env: &Env, route: &str, fail: bool) -> Result<(), String> {
    let shards = crate::env::config_from_env(env)
        .map(|config| config.index_shards)
        .map_err(|problem| format!("{problem:?}"))?;
    let line = match fail {
        true => crate::index_shard::TEST_FAIL,
        false => crate::index_shard::TEST_ANSWER,
    };
    for shard in 0..shards {
        crate::object_rpc::call(
            env,
            crate::index_db::INDEX_SHARD_BINDING,
            &idemgate_core::index::shard::shard_name(route, shard),
            Some(route),
            line,
            "index shard",
        )
        .await?;
    }
    Ok(())
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
