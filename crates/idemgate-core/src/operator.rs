//! The operator API's pure decisions (SPEC §7): who may call it, and which
//! Durable Object a receipt query names.

use subtle::ConstantTimeEq;

use crate::config::Config;
use crate::key::{IdempotencyKey, KeySource, Scope};
use crate::problem::Problem;

/// `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time. With
/// no token configured the receipt routes do not exist (404).
pub fn authorize(admin_token: Option<&str>, authorization: Option<&str>) -> Result<(), Problem> {
    let Some(expected) = admin_token else {
        return Err(Problem::NotFound);
    };
    let presented = authorization
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(Problem::Unauthorized)
    }
}

/// The Durable Object name a receipt query refers to: `key`, `path` (when
/// keys are scoped by path) and `tenant` (the raw tenant header value, when
/// `TENANT_HEADER` is set).
pub fn receipt_object_name(config: &Config, query: &[(String, String)]) -> Result<String, Problem> {
    let param = |name: &str| {
        query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let key = IdempotencyKey::parse(param("key").unwrap_or(""), &KeySource::Header("key".into()))?;
    let scope = Scope {
        kind: config.key_scope,
        path: param("path").unwrap_or("/"),
        tenant: match &config.tenant_header {
            Some(header) => Some(param("tenant").ok_or_else(|| Problem::MissingTenant {
                header: header.clone(),
            })?),
            None => None,
        },
    };
    Ok(scope.object_name(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_token_configured_hides_the_routes() {
        assert_eq!(authorize(None, Some("Bearer x")), Err(Problem::NotFound));
    }

    #[test]
    fn wrong_or_missing_token_is_401_and_right_one_passes() {
        assert_eq!(authorize(Some("s3cret"), None), Err(Problem::Unauthorized));
        assert_eq!(
            authorize(Some("s3cret"), Some("Bearer nope")),
            Err(Problem::Unauthorized)
        );
        assert_eq!(
            authorize(Some("s3cret"), Some("s3cret")),
            Err(Problem::Unauthorized)
        );
        assert_eq!(authorize(Some("s3cret"), Some("Bearer s3cret")), Ok(()));
    }
}
