use super::*;

fn canonical(text: &str) -> String {
    String::from_utf8(parse(text.as_bytes()).unwrap().canonical()).unwrap()
}

fn error(text: &str) -> String {
    parse(text.as_bytes()).unwrap_err().to_string()
}

#[test]
fn members_sort_and_whitespace_goes() {
    assert_eq!(
        canonical(r#"{ "b": [1, 2, {"d": null, "c": true}], "a": "x" }"#),
        r#"{"a":"x","b":[1,2,{"c":true,"d":null}]}"#
    );
}

#[test]
fn names_sort_by_utf16_code_units() {
    // RFC 8785 §3.2.3: U+1F600 (surrogate 0xD83D) sorts before U+FF61.
    assert_eq!(
        canonical("{\"\u{ff61}\":2,\"\u{1f600}\":1}"),
        "{\"\u{1f600}\":1,\"\u{ff61}\":2}"
    );
    assert_eq!(
        canonical(r#"{"ö":4,"\u0080":3,"1":2,"\r":1}"#),
        "{\"\\r\":1,\"1\":2,\"\u{80}\":3,\"ö\":4}"
    );
}

#[test]
fn strings_escape_only_what_jcs_escapes() {
    assert_eq!(canonical(r#""\u0041\u00e9\u20ac""#), "\"Aé€\"");
    assert_eq!(canonical(r#""\ud83d\ude00""#), "\"😀\"");
    assert_eq!(canonical(r#""\u001f\n\"\\\/""#), r#""\u001f\n\"\\/""#);
    assert_eq!(canonical(r#""\u000f\b\f\r\t""#), r#""\u000f\b\f\r\t""#);
    assert_eq!(canonical("\"\u{2028}\""), "\"\u{2028}\"");
}

#[test]
fn numbers_take_the_ecmascript_layout_of_their_value() {
    // RFC 8785 Appendix B and §3.2.2.3 vectors that a double holds exactly.
    for (input, expected) in [
        ("[1.0, 1e0, 100e-2, 0.1e1]", "[1,1,1,1]"),
        ("1e30", "1e+30"),
        ("-0.0", "0"),
        ("-0", "0"),
        ("0.000001", "0.000001"),
        ("0.0000001", "1e-7"),
        ("1E21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("4.50", "4.5"),
        ("2e-3", "0.002"),
        ("123e-2", "1.23"),
        ("-1.5E+3", "-1500"),
        ("0.000000000000000000000000001", "1e-27"),
        ("12345678901234567890123", "1.2345678901234567890123e+22"),
    ] {
        assert_eq!(canonical(input), expected, "{input}");
    }
}

#[test]
fn a_leading_zero_is_reported_where_it_is() {
    assert_eq!(error("[-0123]"), "invalid number at line 1 column 4");
    assert_eq!(error("007"), "invalid number at line 1 column 2");
}

#[test]
fn exponents_up_to_a_billion_are_read() {
    assert_eq!(canonical("1e1000000000"), "1e+1000000000");
    assert_eq!(canonical("-2.5E-999999999"), "-2.5e-999999999");
    assert!(error("1e1000000001").starts_with("number out of range"));
}

#[test]
fn numbers_that_differ_in_value_never_share_a_form() {
    // A double cannot tell these apart; their values differ.
    let pairs = [
        ("9007199254740993", "9007199254740992"),
        ("333333333.33333329", "333333333.3333333"),
        ("0.1", "0.10000000000000000555"),
        ("1e400", "1e401"),
        ("1", "1.000000000000000000000001"),
    ];
    for (a, b) in pairs {
        assert_ne!(canonical(a), canonical(b), "{a} vs {b}");
    }
    assert_eq!(canonical("9007199254740993"), "9007199254740993");
    assert_eq!(canonical("333333333.33333329"), "333333333.33333329");
}

#[test]
fn duplicate_member_names_are_refused() {
    let message = error(r#"{"amount":1,"amount":100}"#);
    assert!(
        message.starts_with("duplicate member name \"amount\""),
        "{message}"
    );
    assert!(message.ends_with("line 1 column 13"), "{message}");
    // Escapes are resolved before names are compared.
    assert!(error(r#"{"a":1,"\u0061":2}"#).starts_with("duplicate"));
    assert!(parse(br#"{"a":{"a":1},"b":{"a":2}}"#).is_ok());
    // Past the linear scan, by hash: a repeat at any distance.
    let members: Vec<String> = (0..40).map(|n| format!("\"m{n}\":{n}")).collect();
    let large = format!("{{{}}}", members.join(","));
    assert!(parse(large.as_bytes()).is_ok());
    for repeat in ["m0", "m17", "m39"] {
        let repeated = format!("{{{},\"{repeat}\":1}}", members.join(","));
        assert!(error(&repeated).starts_with("duplicate"), "{repeat}");
    }
}

#[test]
fn a_large_object_is_read_in_linear_time() {
    // 200,000 members: a quadratic duplicate check would take minutes.
    let members: Vec<String> = (0..200_000).map(|n| format!("\"{n:x}\":{n}")).collect();
    let body = format!("{{{}}}", members.join(","));
    crate::within(20, move || assert!(parse(body.as_bytes()).is_ok()));
}

#[test]
fn refusals_say_what_and_where() {
    assert_eq!(
        error("{\"a\":"),
        "EOF while parsing a value at line 1 column 6"
    );
    assert_eq!(error("[1,\n 2,]"), "expected value at line 2 column 4");
    assert!(error("\"\u{1}\"").starts_with("control character"));
    assert!(error("01").starts_with("invalid number"));
    assert!(error("1.").starts_with("invalid number"));
    assert!(error("1e").starts_with("invalid number"));
    assert!(error("-").starts_with("invalid number"));
    assert!(error("1 2").starts_with("trailing characters"));
    assert!(error("").starts_with("EOF"));
    assert!(error(r#""\ud800""#).starts_with("lone leading surrogate"));
    assert!(error(r#""\udc00""#).starts_with("lone trailing surrogate"));
    assert!(error(r#""\x""#).starts_with("invalid escape"));
    assert!(error("1e9999999999").starts_with("number out of range"));
    assert!(error("{1:2}").starts_with("key must be a string"));
    assert_eq!(
        parse(&[b'"', 0xff, b'"']).unwrap_err().message,
        "invalid UTF-8"
    );
}

#[test]
fn nesting_is_bounded() {
    let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
    assert!(parse(ok.as_bytes()).is_ok());
    let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
    assert!(error(&deep).starts_with("recursion limit exceeded"));
    let deep_objects = "{\"a\":".repeat(10_000);
    assert!(error(&deep_objects).starts_with("recursion limit exceeded"));
}

#[test]
fn pointers_follow_rfc_6901() {
    let value = parse(br#"{"a/b":{"m~n":[10,{"id":"x"}]},"":1}"#).unwrap();
    assert_eq!(value.pointer(""), Some(&value));
    assert_eq!(value.pointer("/"), Some(&Json::Number("1".into())));
    assert_eq!(
        value.pointer("/a~1b/m~0n/1/id"),
        Some(&Json::String("x".into()))
    );
    assert_eq!(value.pointer("/a~1b/m~0n/01"), None);
    assert_eq!(value.pointer("/a~1b/m~0n/2"), None);
    assert_eq!(value.pointer("nope"), None);
}
