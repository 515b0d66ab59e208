//! `reconcile.types`: which event types a route wants. An account's events
//! API lists every type, also those the route's endpoint never subscribed
//! to, and those must not reach the origin.

/// Exact names, and prefixes written with a trailing `*`; `*` alone is
/// every type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeFilter {
    patterns: Vec<String>,
}

impl TypeFilter {
    pub fn parse(patterns: &[String]) -> Result<TypeFilter, String> {
        if patterns.is_empty() {
            return Err("must name at least one event type ([\"*\"] for every type)".into());
        }
        for pattern in patterns {
            let stem = pattern.strip_suffix('*').unwrap_or(pattern);
            let valid = !pattern.is_empty()
                && pattern.len() <= 128
                && !stem.contains('*')
                && pattern.bytes().all(|byte| byte.is_ascii_graphic());
            if !valid {
                return Err(format!(
                    "{:?} is not an event type: visible ASCII, at most 128 characters, `*` only at the end",
                    pattern.chars().take(64).collect::<String>()
                ));
            }
        }
        Ok(TypeFilter {
            patterns: patterns.to_vec(),
        })
    }

    pub fn matches(&self, event_type: &str) -> bool {
        self.patterns
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => event_type.starts_with(prefix),
                None => event_type == pattern,
            })
    }

    /// The names, when none has a wildcard: an API that filters by exact
    /// names is then asked for only these.
    pub fn exact(&self) -> Option<&[String]> {
        (!self.patterns.iter().any(|pattern| pattern.ends_with('*')))
            .then_some(self.patterns.as_slice())
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(patterns: &[&str]) -> TypeFilter {
        TypeFilter::parse(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_star_suffix_matches_a_prefix_and_a_name_only_itself() {
        let types = filter(&["payment_intent.*", "charge.refunded"]);
        assert!(types.matches("payment_intent.succeeded"));
        assert!(types.matches("charge.refunded"));
        assert!(!types.matches("charge.refunded.updated"));
        assert!(!types.matches("charge.succeeded"));
        assert!(!types.matches("payment_intent"));
        assert!(filter(&["*"]).matches("anything.at_all"));
    }

    #[test]
    fn only_names_without_a_wildcard_go_to_the_api() {
        assert_eq!(filter(&["a.b", "c"]).exact().unwrap().len(), 2);
        assert!(filter(&["a.*"]).exact().is_none());
    }

    #[test]
    fn an_empty_list_and_an_inner_star_are_refused() {
        assert!(TypeFilter::parse(&[]).is_err());
        assert!(TypeFilter::parse(&["a*b".into()]).is_err());
        assert!(TypeFilter::parse(&["".into()]).is_err());
        assert!(TypeFilter::parse(&["a b".into()]).is_err());
    }
}
