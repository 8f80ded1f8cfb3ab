use super::*;
use proptest::prelude::*;
use serde_json::json;

fn ok(text: &str) -> Lenient {
    parse_lenient(text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

fn repairs(text: &str) -> Vec<Repair> {
    ok(text).repairs
}

#[test]
fn valid_json_needs_no_repair() {
    let text = r#"{"title": "It's \"quoted\"", "n": [1, -2.5e3, true, null], "s": "a\\b\u00e9"}"#;
    let got = ok(text);
    assert_eq!(got.value, serde_json::from_str::<Value>(text).unwrap());
    assert!(got.repairs.is_empty());
    assert_eq!(ok(" 42 ").value, json!(42));
    assert_eq!(ok("\"x\"").value, json!("x"));
}

#[test]
fn community_report_in_prose_and_fence() {
    let text = "Sure! Here is the community report you asked for:\n\n```json\n{\n  \"title\": \"Verdant Oasis Plaza and Unity March\",\n  \"summary\": \"The community revolves around the Verdant Oasis Plaza, the location of the Unity March {annual}.\",\n  \"rating\": 5.0,\n  \"rating_explanation\": \"The impact severity rating is moderate due to the potential for unrest.\",\n  \"findings\": [\n    {\"summary\": \"Verdant Oasis Plaza as the central location\", \"explanation\": \"It's linked to [Data: Entities (5), Relationships (37, 38)].\"}\n  ]\n}\n```\n\nLet me know if you need anything else!";
    let got = ok(text);
    assert_eq!(got.repairs, vec![Repair::CodeFence, Repair::SurroundingProse]);
    assert_eq!(got.value["title"], "Verdant Oasis Plaza and Unity March");
    assert_eq!(got.value["rating"], 5.0);
    assert_eq!(got.value["findings"].as_array().unwrap().len(), 1);

    let fenced = "```\n{\"a\": 1}\n```";
    assert_eq!(ok(fenced).value, json!({"a": 1}));
    assert_eq!(repairs(fenced), vec![Repair::CodeFence]);
    assert_eq!(parse_object(fenced).unwrap().value, json!({"a": 1}));
}

#[test]
fn prose_braces_inside_strings_are_ignored() {
    let text = r#"Result: {"summary": "braces } and ] inside", "x": "{not: json}"} -- and a stray } here"#;
    let got = ok(text);
    assert_eq!(got.value, json!({"summary": "braces } and ] inside", "x": "{not: json}"}));
    assert_eq!(got.repairs, vec![Repair::SurroundingProse]);
    // The first complete value wins.
    assert_eq!(ok(r#"{"a": 1} {"b": 2}"#).value, json!({"a": 1}));
}

#[test]
fn failed_candidates_are_skipped() {
    let text = "Use the format {key: value}. Output:\n{\"key\": \"entity\"}";
    assert_eq!(ok(text).value, json!({"key": "entity"}));
    let text = "See (as requested) {the answer} below: [{\"a\": 1}]";
    assert_eq!(ok(text).value, json!([{"a": 1}]));
}

#[test]
fn parse_object_skips_arrays() {
    let text = "According to [1] and [2, 3], the answer is {\"answer\": 42}.";
    assert_eq!(ok(text).value, json!([1]));
    let got = parse_object(text).unwrap();
    assert_eq!(got.value, json!({"answer": 42}));
    assert_eq!(got.repairs, vec![Repair::SurroundingProse]);
    let err = parse_object("[{\"a\": 1}]").unwrap_err();
    assert!(err.contains("found an array"), "{err}");
    let err = parse_object("42").unwrap_err();
    assert!(err.contains("found a number"), "{err}");
    assert_eq!(parse_object("{}").unwrap().value, json!({}));
}

#[test]
fn prefers_fenced_json_over_prose_brackets() {
    let text = "Entities [see above] are listed below.\n```json\n{\"entities\": [\"A\", \"B\"]}\n```";
    let got = ok(text);
    assert_eq!(got.value, json!({"entities": ["A", "B"]}));
    assert_eq!(got.repairs, vec![Repair::CodeFence, Repair::SurroundingProse]);
}

#[test]
fn no_json_is_an_error() {
    assert_eq!(parse_lenient("I cannot help with that.").unwrap_err(), "no JSON object or array found");
    assert_eq!(parse_lenient("").unwrap_err(), "no JSON object or array found");
    assert_eq!(parse_object("nothing here").unwrap_err(), "no JSON object found");
    let err = parse_lenient("{oops this is prose}").unwrap_err();
    assert!(err.contains("unexpected"), "{err}");
}

#[test]
fn truncated_report() {
    let text = "{\n  \"title\": \"Unity March\",\n  \"summary\": \"The march is a significant ev";
    let got = ok(text);
    assert_eq!(got.value, json!({"title": "Unity March", "summary": "The march is a significant ev"}));
    assert_eq!(got.repairs, vec![Repair::Truncated]);

    let text = "```json\n{\"title\": \"T\", \"rating\": 7.5, \"findings\": [{\"summary\": \"S\", \"explanation\": \"E\"}, {\"summ";
    let got = ok(text);
    assert_eq!(got.value, json!({"title": "T", "rating": 7.5, "findings": [{"summary": "S", "explanation": "E"}, {}]}));
    assert_eq!(got.repairs, vec![Repair::CodeFence, Repair::Truncated]);
}

#[test]
fn truncated_at_awkward_points() {
    let cases: &[(&str, Value)] = &[
        ("{", json!({})),
        ("[", json!([])),
        ("{\"a\"", json!({})),
        ("{\"a\":", json!({})),
        ("{\"a\": 1,", json!({"a": 1})),
        ("{\"a\": 1, \"b", json!({"a": 1})),
        ("{\"a\": 1, \"b\": ", json!({"a": 1})),
        ("{\"a\": 1.", json!({})),
        ("{\"a\": -", json!({})),
        ("{\"a\": 1e+", json!({})),
        ("[1, 2.", json!([1])),
        ("[1, 23", json!([1, 23])),
        ("{\"a\": tr", json!({"a": true})),
        ("{\"a\": Fa", json!({"a": false})),
        ("[n", json!([null])),
        ("{\"a\": \"x\\", json!({"a": "x"})),
        ("{\"a\": \"x\\u00", json!({"a": "x"})),
        ("{\"a\": \"\\ud83d\\ude", json!({"a": ""})),
        ("{\"a\": [1, {\"b\": [\"c", json!({"a": [1, {"b": ["c"]}]})),
        ("{\"a\": 1 /* comment", json!({"a": 1})),
        ("```json\n{\"a\": [1, 2\n```\n", json!({"a": [1, 2]})),
    ];
    for (text, want) in cases {
        let got = ok(text);
        assert_eq!(&got.value, want, "{text:?}");
        assert!(got.repairs.contains(&Repair::Truncated), "{text:?}");
    }
}

#[test]
fn map_reduce_points_with_trailing_commas() {
    let text = r#"{
  "points": [
{"description": "Person X is the owner of Company Y [Data: Reports (1, 5)]", "score": 80,},
{"description": "Company Y faces allegations", "score": 65,},
  ],
}"#;
    let got = ok(text);
    assert_eq!(got.repairs, vec![Repair::TrailingComma]);
    assert_eq!(got.value["points"][1]["score"], 65);
    assert_eq!(ok("[1,,2,]").value, json!([1, 2]));
}

#[test]
fn lightrag_keywords_in_single_quotes() {
    let text = "{'high_level_keywords': ['International trade', 'Global economic stability'], 'low_level_keywords': ['Trade agreements', 'Tariffs', 'Currency exchange']}";
    let got = ok(text);
    assert_eq!(
        got.value,
        json!({
            "high_level_keywords": ["International trade", "Global economic stability"],
            "low_level_keywords": ["Trade agreements", "Tariffs", "Currency exchange"]
        })
    );
    assert_eq!(got.repairs, vec![Repair::SingleQuotes]);

    // Apostrophes, escaped quotes and double quotes inside single quotes.
    let text = r#"{'a': 'the company's revenue', 'b': 'it\'s', 'c': 'say "hi"', "d": "don't"}"#;
    assert_eq!(ok(text).value, json!({"a": "the company's revenue", "b": "it's", "c": "say \"hi\"", "d": "don't"}));
}

#[test]
fn double_quoted_strings_are_left_alone() {
    let text = r#"{"a": "it's \"quoted\" and 'single'", "b": "x\\y",}"#;
    let got = ok(text);
    assert_eq!(got.value, json!({"a": "it's \"quoted\" and 'single'", "b": "x\\y"}));
    assert_eq!(got.repairs, vec![Repair::TrailingComma]);
}

#[test]
fn unquoted_keys() {
    let got = ok("{title: \"T\", rating: 4, $ref: null, 1: \"one\", naïve_key: true}");
    assert_eq!(got.value, json!({"title": "T", "rating": 4, "$ref": null, "1": "one", "naïve_key": true}));
    assert_eq!(got.repairs, vec![Repair::UnquotedKey]);
}

#[test]
fn python_literals() {
    let got = ok("{'is_entity': True, 'merged': False, 'parent': None}");
    assert_eq!(got.value, json!({"is_entity": true, "merged": false, "parent": null}));
    assert_eq!(got.repairs, vec![Repair::SingleQuotes, Repair::PythonLiteral]);
    assert!(parse_lenient("{\"a\": Nope}").is_err());
}

#[test]
fn control_characters_are_escaped() {
    let text = "{\"description\": \"line one\nline two\tindented\u{1}\"}";
    let got = ok(text);
    assert_eq!(got.value["description"], "line one\nline two\tindented\u{1}");
    assert_eq!(got.repairs, vec![Repair::ControlCharacter]);
    // Invalid escapes keep their backslash; lone surrogates become U+FFFD.
    let got = ok(r#"{"re": "\d+\.\w", "s": "\ud800x"}"#);
    assert_eq!(got.value, json!({"re": "\\d+\\.\\w", "s": "\u{fffd}x"}));
    assert_eq!(got.repairs, vec![Repair::ControlCharacter]);
    assert_eq!(ok(r#"["\uzz"]"#).value, json!(["\\uzz"]));
    assert_eq!(ok(r#"["\ud83d\ude00"]"#).value, json!(["\u{1F600}"]));
}

#[test]
fn comments_are_dropped() {
    let text = "{\n  // the entity\n  \"name\": \"ACME\", /* inline */\n  \"type\": \"ORG\" // trailing\n}";
    let got = ok(text);
    assert_eq!(got.value, json!({"name": "ACME", "type": "ORG"}));
    assert_eq!(got.repairs, vec![Repair::Comment]);
    assert_eq!(ok("{\"url\": \"http://x/*y*/\"}").repairs, vec![]);
    assert!(parse_lenient("{\"a\": 1 / 2}").is_err());
}

#[test]
fn missing_commas_between_lines() {
    let text = "{\n  \"entities\": [\n    \"A\"\n    \"B\"\n  ]\n  \"count\": 2\n}";
    let got = ok(text);
    assert_eq!(got.value, json!({"entities": ["A", "B"], "count": 2}));
    assert_eq!(got.repairs, vec![Repair::MissingComma]);
    assert_eq!(ok("[{\"a\": 1}\n{\"a\": 2}]").value, json!([{"a": 1}, {"a": 2}]));
}

#[test]
fn everything_at_once() {
    let text = "Here you go:\n```json\n{\n  // report\n  title: 'Ann\\'s \"Team\"',\n  rating: 7,\n  active: True\n  findings: [\n    {'summary': 'line\nbreak',},\n  ],\n  \"tail\": [1, 2";
    let got = ok(text);
    assert_eq!(
        got.value,
        json!({"title": "Ann's \"Team\"", "rating": 7, "active": true, "findings": [{"summary": "line\nbreak"}], "tail": [1, 2]})
    );
    let mut kinds = got.repairs.clone();
    kinds.sort_by_key(|r| r.name());
    let mut want = vec![
        Repair::CodeFence,
        Repair::SurroundingProse,
        Repair::Comment,
        Repair::UnquotedKey,
        Repair::SingleQuotes,
        Repair::PythonLiteral,
        Repair::MissingComma,
        Repair::ControlCharacter,
        Repair::TrailingComma,
        Repair::Truncated,
    ];
    want.sort_by_key(|r| r.name());
    assert_eq!(kinds, want);
    assert_eq!(&got.repairs[..2], &[Repair::CodeFence, Repair::SurroundingProse]);
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let ok_depth = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
    assert!(parse_lenient(&ok_depth).is_ok());
    assert!(parse_lenient(&("x ".to_string() + &ok_depth)).is_ok());
    let deep = "[".repeat(100_000);
    let err = parse_lenient(&deep).unwrap_err();
    assert!(err.contains("deeper"), "{err}");
    let deep = "{\"a\":".repeat(100_000);
    assert!(parse_object(&deep).is_err());
    let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
    assert!(parse_lenient(&deep).is_err());
}

#[test]
fn pathological_input_stays_fast() {
    // Every `{` is a failing candidate; the scan must stay linear.
    let started = std::time::Instant::now();
    let text = "{a b ".repeat(50_000);
    assert!(parse_lenient(&text).is_err());
    // Only the last, truncated candidate succeeds.
    let text = "{a ".repeat(50_000);
    assert_eq!(parse_lenient(&text).unwrap().value, json!({}));
    let text = "['x' ".repeat(50_000);
    assert!(parse_lenient(&text).is_ok());
    let text = format!("{{\"a\": 1.{}", "/*{\"a\": tr".repeat(50_000));
    assert!(parse_lenient(&text).is_ok());
    let text = format!("{}*/ x", "{\"a\": 1./*".repeat(50_000));
    assert!(parse_lenient(&text).is_err());
    let text = format!("{}{{\"ok\": 1}}", "[x] ".repeat(50_000));
    assert_eq!(parse_object(&text).unwrap().value, json!({"ok": 1}));
    assert!(started.elapsed().as_secs() < 20);
}

#[test]
fn repair_names_are_distinct_snake_case() {
    let all = [
        Repair::CodeFence,
        Repair::SurroundingProse,
        Repair::SingleQuotes,
        Repair::TrailingComma,
        Repair::Truncated,
        Repair::UnquotedKey,
        Repair::PythonLiteral,
        Repair::ControlCharacter,
        Repair::Comment,
        Repair::MissingComma,
    ];
    let names: std::collections::HashSet<_> = all.iter().map(|r| r.name()).collect();
    assert_eq!(names.len(), all.len());
    for name in names {
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name}");
    }
    assert_eq!(Repair::CodeFence.name(), "code_fence");
}

fn json_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::char::range('a', 'z'),
        1 => prop::sample::select(vec![
            '"', '\\', '\'', '{', '}', '[', ']', ':', ',', '`', '/', '*', ' ', '\n', '\t',
            '\u{0}', '\u{1f}', '\u{7f}', 'é', '€', '\u{2028}', '😀', '\u{feff}',
        ]),
        1 => any::<char>(),
    ]
}

fn json_string() -> impl Strategy<Value = String> {
    prop::collection::vec(json_char(), 0..10).prop_map(|cs| cs.into_iter().collect())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Dyadic fractions print and parse back exactly.
        (-1_000_000_000i64..1_000_000_000).prop_map(|n| Value::from(n as f64 / 64.0)),
        json_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(json_string(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_container() -> impl Strategy<Value = Value> {
    json_value().prop_map(|v| match v {
        Value::Array(_) | Value::Object(_) => v,
        other => json!({"value": other, "list": [other]}),
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    json_container().prop_map(|v| match v {
        Value::Object(_) => v,
        other => json!({ "items": other }),
    })
}

fn serialize(value: &Value, pretty: bool) -> String {
    if pretty {
        serde_json::to_string_pretty(value).unwrap()
    } else {
        serde_json::to_string(value).unwrap()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_text_never_panics(chars in prop::collection::vec(json_char(), 0..200)) {
        let text: String = chars.into_iter().collect();
        let _ = parse_lenient(&text);
        if let Ok(found) = parse_object(&text) {
            prop_assert!(found.value.is_object());
        }
    }

    #[test]
    fn valid_json_round_trips_unrepaired(value in json_value(), pretty in any::<bool>()) {
        let text = serialize(&value, pretty);
        let got = parse_lenient(&text).unwrap();
        prop_assert_eq!(&got.value, &value);
        prop_assert!(got.repairs.is_empty());
    }

    #[test]
    fn embedded_json_is_recovered(
        value in json_container(),
        pretty in any::<bool>(),
        fence in any::<bool>(),
        // No `"` before the JSON: `"` + JSON + `"` is a JSON string, not an embedded value.
        before in "[A-Za-z0-9 ,.:;!?'()\n-]{0,40}",
        after in "[A-Za-z0-9 ,.:;!?'\"(){}\\[\\]\n-]{0,40}",
    ) {
        let json = serialize(&value, pretty);
        let text = if fence {
            format!("{before}\n```json\n{json}\n```\n{after}")
        } else {
            format!("{before}{json}{after}")
        };
        let got = parse_lenient(&text).unwrap();
        prop_assert_eq!(&got.value, &value);
        prop_assert_eq!(got.repairs.contains(&Repair::CodeFence), fence);
        prop_assert!(got
            .repairs
            .iter()
            .all(|r| matches!(r, Repair::CodeFence | Repair::SurroundingProse)));
        if value.is_object() {
            prop_assert_eq!(&parse_object(&text).unwrap().value, &value);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn truncated_objects_stay_objects(value in json_object(), pretty in any::<bool>()) {
        let text = serialize(&value, pretty);
        for (cut, _) in text.char_indices().skip(1) {
            let prefix = &text[..cut];
            if let Ok(found) = parse_lenient(prefix) {
                prop_assert!(found.value.is_object(), "{:?} -> {:?}", prefix, found.value);
                prop_assert!(found.repairs.contains(&Repair::Truncated));
            } else {
                prop_assert!(false, "{:?} failed: {:?}", prefix, parse_lenient(prefix));
            }
            if let Ok(found) = parse_object(prefix) {
                prop_assert!(found.value.is_object());
            }
        }
        prop_assert_eq!(parse_lenient(&text).unwrap().value, value);
    }
}
