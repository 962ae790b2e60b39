//! Where a committed vector file first differs from the generated one, said
//! in the file's terms: the section, the vector's index and name, and the
//! fields that differ; or the line, if only the formatting does.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// How much of a differing value a message shows.
const SHOWN: usize = 160;

/// A JSON object's entries in file order (`serde_json::Value` sorts them).
struct Sections(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Sections {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Sections;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Sections, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    entries.push(entry);
                }
                Ok(Sections(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// `None` if `committed` is `generated` byte for byte; otherwise where it
/// first differs, in file order.
pub(crate) fn first_difference(committed: &str, generated: &str) -> Option<String> {
    if committed == generated {
        return None;
    }
    let committed_sections = match serde_json::from_str::<Sections>(committed) {
        Ok(sections) => sections.0,
        Err(e) => return Some(format!("the file is not a JSON object ({e})")),
    };
    let generated_sections = match serde_json::from_str::<Sections>(generated) {
        Ok(sections) => sections.0,
        Err(e) => return Some(format!("the generated text is not a JSON object ({e})")),
    };
    for (key, want) in &generated_sections {
        let Some((_, got)) = committed_sections.iter().find(|(k, _)| k == key) else {
            return Some(format!("section `{key}` is missing"));
        };
        if let Some(difference) = section_difference(key, got, want) {
            return Some(difference);
        }
    }
    if let Some((key, _)) = committed_sections
        .iter()
        .find(|(k, _)| !generated_sections.iter().any(|(g, _)| g == k))
    {
        return Some(format!("section `{key}` is not in the definitions"));
    }
    let order = |sections: &[(String, Value)]| sections.iter().map(|(k, _)| k.clone()).collect();
    let (got, want): (Vec<_>, Vec<_>) = (order(&committed_sections), order(&generated_sections));
    if got != want {
        return Some(format!(
            "the sections are in another order: {got:?}, generated {want:?}"
        ));
    }
    Some(formatting_difference(committed, generated))
}

/// Where section `key` first differs, if it does.
fn section_difference(key: &str, got: &Value, want: &Value) -> Option<String> {
    if got == want {
        return None;
    }
    let (Value::Array(got), Value::Array(want)) = (got, want) else {
        return Some(value_difference(&format!("`{key}`"), got, want));
    };
    for i in 0..got.len().max(want.len()) {
        match (got.get(i), want.get(i)) {
            (Some(g), Some(w)) if g != w => {
                return Some(value_difference(&item(key, i, w), g, w));
            }
            (None, Some(w)) => {
                return Some(format!(
                    "{} is missing (the file has {} of the {} {key} vectors)",
                    item(key, i, w),
                    got.len(),
                    want.len()
                ));
            }
            (Some(g), None) => {
                return Some(format!(
                    "{} is not in the definitions (the file has {} {key} vectors, the \
                     definitions {})",
                    item(key, i, g),
                    got.len(),
                    want.len()
                ));
            }
            _ => {}
        }
    }
    None
}

/// A vector by section, index and name (or key id): `invalid[17] "hmac: padded"`.
fn item(key: &str, i: usize, v: &Value) -> String {
    match (v.get("name"), v.get("id")) {
        (Some(Value::String(name)), _) => format!("{key}[{i}] {name:?}"),
        (_, Some(id)) => format!("{key}[{i}] (id {id})"),
        _ => format!("{key}[{i}]"),
    }
}

/// `what` differs: which fields (of an object), and the first one's values.
fn value_difference(what: &str, got: &Value, want: &Value) -> String {
    if let (Value::Object(g), Value::Object(w)) = (got, want) {
        let mut fields: Vec<&String> = w.keys().chain(g.keys()).collect();
        fields.sort();
        fields.dedup();
        fields.retain(|f| g.get(*f) != w.get(*f));
        if let Some(first) = fields.first() {
            let names: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
            let (g, w) = shown(g.get(*first), w.get(*first));
            return format!(
                "{what}: {} differ{}\n    file:      {g}\n    generated: {w}",
                names.join(", "),
                if fields.len() == 1 { "s" } else { "" },
            );
        }
    }
    let (g, w) = shown(Some(got), Some(want));
    format!("{what} differs\n    file:      {g}\n    generated: {w}")
}

/// Two values as a message shows them: their JSON from a little before the
/// first character where they differ, each cut to [`SHOWN`] characters.
fn shown(got: Option<&Value>, want: Option<&Value>) -> (String, String) {
    let text = |v: Option<&Value>| v.map_or_else(|| "(absent)".to_owned(), Value::to_string);
    let (got, want) = (text(got), text(want));
    let common = got
        .chars()
        .zip(want.chars())
        .take_while(|(g, w)| g == w)
        .count();
    let skip = common.saturating_sub(SHOWN / 4);
    let cut = |text: &str| {
        let total = text.chars().count();
        let mut out: String = text.chars().skip(skip).take(SHOWN).collect();
        if skip > 0 {
            out.insert(0, '…');
        }
        if skip + SHOWN < total {
            out.push_str(&format!("… ({total} characters)"));
        }
        out
    };
    (cut(&got), cut(&want))
}

/// The same JSON, written otherwise: the first line that differs.
fn formatting_difference(committed: &str, generated: &str) -> String {
    let mut got = committed.split_inclusive('\n');
    let mut want = generated.split_inclusive('\n');
    for line in 1.. {
        match (got.next(), want.next()) {
            (Some(g), Some(w)) if g == w => {}
            (g, w) => {
                let show = |l: Option<&str>| match l {
                    Some(l) => format!("{l:?}"),
                    None => "(end of file)".to_owned(),
                };
                return format!(
                    "the same vectors, formatted otherwise: line {line} differs\n    file:      {}\n    \
                     generated: {}",
                    show(g),
                    show(w)
                );
            }
        }
    }
    unreachable!("two different texts differ on some line")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(value: Value) -> String {
        serde_json::to_string_pretty(&value).expect("json") + "\n"
    }

    fn base() -> Value {
        serde_json::json!({
            "description": "d",
            "valid": [{"name": "a", "token": "t1"}, {"name": "b", "token": "t2", "now": 1}],
            "keys": [{"id": 7, "secret": "s"}],
        })
    }

    #[test]
    fn equal_files_do_not_differ() {
        assert_eq!(first_difference(&file(base()), &file(base())), None);
    }

    #[test]
    fn a_changed_vector_is_named_with_its_fields() {
        let mut changed = base();
        changed["valid"][1]["token"] = "t3".into();
        changed["valid"][1]["now"] = 2.into();
        let d = first_difference(&file(changed), &file(base())).expect("differs");
        assert!(
            d.starts_with("valid[1] \"b\": `now`, `token` differ"),
            "{d}"
        );
        assert!(
            d.contains("file:      2") && d.contains("generated: 1"),
            "{d}"
        );
        let mut key = base();
        key["keys"][0]["secret"] = "x".into();
        let d = first_difference(&file(key), &file(base())).expect("differs");
        assert!(d.starts_with("keys[0] (id 7): `secret` differs"), "{d}");
    }

    #[test]
    fn the_first_difference_in_file_order_is_named() {
        // `valid` comes before `keys` in the file, after it alphabetically.
        let want =
            r#"{"valid": [{"name": "a", "token": "t"}], "keys": [{"id": 7, "secret": "s"}]}"#;
        let got = r#"{"valid": [{"name": "a", "token": "x"}], "keys": [{"id": 7, "secret": "x"}]}"#;
        let d = first_difference(got, want).expect("differs");
        assert!(d.starts_with("valid[0] \"a\": `token` differs"), "{d}");
    }

    #[test]
    fn missing_and_extra_vectors_and_sections_are_named() {
        let mut fewer = base();
        fewer["valid"].as_array_mut().expect("array").pop();
        let d = first_difference(&file(fewer.clone()), &file(base())).expect("differs");
        assert!(
            d.starts_with("valid[1] \"b\" is missing (the file has 1 of the 2"),
            "{d}"
        );
        let d = first_difference(&file(base()), &file(fewer)).expect("differs");
        assert!(
            d.starts_with("valid[1] \"b\" is not in the definitions"),
            "{d}"
        );
        let mut no_keys = base();
        no_keys.as_object_mut().expect("object").remove("keys");
        let d = first_difference(&file(no_keys.clone()), &file(base())).expect("differs");
        assert_eq!(d, "section `keys` is missing");
        let d = first_difference(&file(base()), &file(no_keys)).expect("differs");
        assert_eq!(d, "section `keys` is not in the definitions");
    }

    #[test]
    fn a_changed_scalar_section_is_shown_where_it_differs() {
        let mut long = base();
        long["description"] = "é".repeat(500).into();
        let d = first_difference(&file(long), &file(base())).expect("differs");
        assert!(d.starts_with("`description` differs"), "{d}");
        assert!(d.contains("… (502 characters)"), "{d}");
        assert!(d.contains("generated: \"d\""), "{d}");
        // Far into a long text: shown from a little before the difference.
        let text = |end: &str| format!("{}{end}", "x".repeat(1000));
        let (mut got, mut want) = (base(), base());
        got["description"] = text("file's end").into();
        want["description"] = text("generator's end").into();
        let d = first_difference(&file(got), &file(want)).expect("differs");
        assert!(d.contains("file:      …xxx"), "{d}");
        assert!(d.contains("xfile's end\""), "{d}");
        assert!(d.contains("xgenerator's end\""), "{d}");
    }

    #[test]
    fn formatting_and_order_differences_are_named() {
        let want = file(base());
        let d = first_difference(&want.replacen("\"a\"", "\"a\" ", 1), &want).expect("differs");
        assert!(d.contains("formatted otherwise: line 11 differs"), "{d}");
        let d = first_difference(want.trim_end(), &want).expect("differs");
        assert!(d.contains("line 20 differs\n    file:      \"}\"\n"), "{d}");
        let d = first_difference(&format!("{want}\n"), &want).expect("differs");
        assert!(d.contains("line 21 differs"), "{d}");
        assert!(d.contains("generated: (end of file)"), "{d}");
        let swapped = "{\"valid\": [], \"description\": \"d\"}";
        let d =
            first_difference(swapped, "{\"description\": \"d\", \"valid\": []}").expect("differs");
        assert!(d.starts_with("the sections are in another order"), "{d}");
    }

    #[test]
    fn a_file_that_is_not_json_says_so() {
        let d = first_difference("{\"valid\": [", &file(base())).expect("differs");
        assert!(d.starts_with("the file is not a JSON object"), "{d}");
        let d = first_difference("[]", &file(base())).expect("differs");
        assert!(d.starts_with("the file is not a JSON object"), "{d}");
    }
}
