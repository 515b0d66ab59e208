//! `application/x-www-form-urlencoded` (the URL Standard's parser): query
//! strings, and the bodies of form-posting senders (Twilio, Braintree, the
//! `form:` key source).

/// The name/value pairs of `text`, in order: `+` is a space,
/// percent-escapes are decoded, invalid UTF-8 is replaced.
pub fn pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

/// Whether a `Content-Type` says the body is a form.
pub fn is_form_media_type(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case("application/x-www-form-urlencoded")
}

/// A field a form holds more than once: which value a sender meant cannot
/// be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeated;

/// The one value of `name`, if the form has it once.
pub fn single<'a>(pairs: &'a [(String, String)], name: &str) -> Result<Option<&'a str>, Repeated> {
    let mut values = pairs
        .iter()
        .filter(|(field, _)| field == name)
        .map(|(_, value)| value.as_str());
    let first = values.next();
    match values.next() {
        Some(_) => Err(Repeated),
        None => Ok(first),
    }
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(at + 1..at + 3)
                    .and_then(|pair| std::str::from_utf8(pair).ok());
                match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        at += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_as_the_url_standard_says() {
        assert_eq!(
            pairs("a=1&b=x+y&c=%2Fz&&d&e=%zz&f=%C3%A9"),
            [
                ("a", "1"),
                ("b", "x y"),
                ("c", "/z"),
                ("d", ""),
                ("e", "%zz"),
                ("f", "\u{e9}")
            ]
            .map(|(name, value)| (name.to_string(), value.to_string()))
        );
        assert!(pairs("").is_empty());
    }

    #[test]
    fn a_field_sent_twice_has_no_single_value() {
        let form = pairs("a=1&b=2&a=3");
        assert_eq!(single(&form, "b"), Ok(Some("2")));
        assert_eq!(single(&form, "c"), Ok(None));
        assert_eq!(single(&form, "a"), Err(Repeated));
    }

    #[test]
    fn form_media_types() {
        assert!(is_form_media_type(
            "application/x-www-form-urlencoded; charset=utf-8"
        ));
        assert!(is_form_media_type("Application/X-WWW-Form-Urlencoded"));
        assert!(!is_form_media_type("application/json"));
        assert!(!is_form_media_type("multipart/form-data"));
    }
}
