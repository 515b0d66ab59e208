//! `.dev.vars`, read the way `wrangler dev` reads it (the `dotenv` package
//! wrangler bundles): `NAME=value` lines, `#` comments, an optional
//! `export `, values in `'...'`, `"..."` or `` `...` `` that may span lines
//! (so `ROUTES` can be JSON over several lines), `\n` and `\r` expanded in
//! double quotes only, and an unquoted value cut at `#` and trimmed. A
//! later line wins over an earlier one of the same name.

/// The variables of a dotenv text, in file order, later names last.
pub fn parse(text: &str) -> Vec<(String, String)> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let (parsed, consumed) = parse_at(&lines[index..]);
        index += consumed.max(1);
        if let Some((name, value)) = parsed {
            vars.retain(|(known, _)| *known != name);
            vars.push((name, value));
        }
    }
    vars
}

/// One variable starting at `lines[0]`, and how many lines it took.
fn parse_at(lines: &[&str]) -> (Option<(String, String)>, usize) {
    let line = lines[0].trim_start();
    let line = match line.strip_prefix("export") {
        Some(rest) if rest.starts_with(char::is_whitespace) => rest.trim_start(),
        _ => line,
    };
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-'))
        .unwrap_or(line.len());
    let (name, rest) = line.split_at(name_end);
    if name.is_empty() {
        return (None, 1);
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let value = if let Some(value) = rest.strip_prefix('=') {
        value
    } else if let Some(value) = rest
        .strip_prefix(':')
        .filter(|v| v.starts_with([' ', '\t']))
    {
        value
    } else {
        return (None, 1);
    };
    let value = value.trim_start_matches([' ', '\t']);
    if let Some(quote) = value
        .chars()
        .next()
        .filter(|c| ['\'', '"', '`'].contains(c))
    {
        if let Some((inner, consumed)) = quoted(value, &lines[1..], quote) {
            let inner = match quote {
                '"' => inner.replace("\\n", "\n").replace("\\r", "\r"),
                _ => inner,
            };
            return (Some((name.to_string(), inner)), consumed);
        }
    }
    let unquoted = value.split('#').next().unwrap_or("").trim();
    (Some((name.to_string(), unquoted.to_string())), 1)
}

/// The text between `quote` at the start of `first` and the next
/// unescaped `quote`, perhaps on a later line, when only spaces and a
/// comment follow it; and the lines it took.
fn quoted(first: &str, more: &[&str], quote: char) -> Option<(String, usize)> {
    let mut text = first[quote.len_utf8()..].to_string();
    let mut consumed = 1;
    loop {
        let mut escaped = false;
        for (at, c) in text.char_indices() {
            if c == quote && !escaped {
                let after = text[at + c.len_utf8()..].trim_start_matches([' ', '\t']);
                if !(after.is_empty() || after.starts_with('#')) {
                    return None;
                }
                return Some((text[..at].to_string(), consumed));
            }
            escaped = c == '\\' && !escaped;
        }
        let next = more.get(consumed - 1)?;
        text.push('\n');
        text.push_str(next);
        consumed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn get(vars: &[(String, String)], name: &str) -> Option<String> {
        vars.iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.clone())
    }

    #[test]
    fn reads_what_wrangler_reads() {
        let vars = parse(concat!(
            "# a comment\n",
            "PLAIN=whsec_abc  # trailing comment\n",
            "export EXPORTED=1\n",
            "SPACED = two words \n",
            "SINGLE='it # is kept'\n",
            "DOUBLE=\"a\\nb\"\n",
            "LITERAL='a\\nb'\n",
            "ROUTES='{\n  \"stripe\": {\"path\": \"/hooks/stripe\"}\n}'\n",
            "AFTER=yes\n",
            "COLON: value\n",
            "EMPTY=\n",
            "PLAIN=later wins\n",
            "not a variable line\n",
        ));
        assert_eq!(get(&vars, "PLAIN").as_deref(), Some("later wins"));
        assert_eq!(get(&vars, "EXPORTED").as_deref(), Some("1"));
        assert_eq!(get(&vars, "SPACED").as_deref(), Some("two words"));
        assert_eq!(get(&vars, "SINGLE").as_deref(), Some("it # is kept"));
        assert_eq!(get(&vars, "DOUBLE").as_deref(), Some("a\nb"));
        assert_eq!(get(&vars, "LITERAL").as_deref(), Some("a\\nb"));
        assert_eq!(
            get(&vars, "ROUTES").as_deref(),
            Some("{\n  \"stripe\": {\"path\": \"/hooks/stripe\"}\n}")
        );
        assert_eq!(get(&vars, "AFTER").as_deref(), Some("yes"));
        assert_eq!(get(&vars, "COLON").as_deref(), Some("value"));
        assert_eq!(get(&vars, "EMPTY").as_deref(), Some(""));
        assert_eq!(vars.len(), 10);
    }

    #[test]
    fn an_unclosed_quote_is_read_as_an_unquoted_value() {
        let vars = parse("OPEN='abc\nNEXT=1\n");
        assert_eq!(get(&vars, "OPEN").as_deref(), Some("'abc"));
        assert_eq!(get(&vars, "NEXT").as_deref(), Some("1"));
    }
}
