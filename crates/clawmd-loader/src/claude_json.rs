//! The one answer the loader needs from `~/.claude.json`: are external imports approved for a
//! project (`projects[<root>].hasClaudeMdExternalIncludesApproved === true`)?
//!
//! The file sits in the agent's home, which the agent can write, so it is hostile input: it is
//! parsed as a stream that keeps only the keys on the way to that one flag, never as a whole
//! `serde_json::Value` (a 64 MiB array of numbers would take over a gigabyte as a `Value`).
//! Only the three levels of that path recurse; everything else is skipped without recursion,
//! at any depth, as JavaScript's `JSON.parse` accepts it. The answer is the one indexing a
//! parsed `Value` gives: duplicate keys resolve to the last, and anything that is not an object
//! on the way (or not `true` at the end) means "not approved".

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The key of the approval flag inside a project's entry.
const APPROVAL_FLAG: &str = "hasClaudeMdExternalIncludesApproved";

/// Whether `bytes` (the whole `~/.claude.json`) approve external imports for `project`;
/// an error when they are not valid JSON.
pub(crate) fn external_includes_approved(
    bytes: &[u8],
    project: &str,
) -> Result<bool, serde_json::Error> {
    let path = ["projects", project, APPROVAL_FLAG];
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let approved = Lookup(&path).deserialize(&mut de)?;
    de.end()?;
    Ok(approved)
}

/// Follows `self.0` (object keys) down the document; `true` only for a `true` at its end.
struct Lookup<'a>(&'a [&'a str]);

impl<'de> DeserializeSeed<'de> for Lookup<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Lookup<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key::<String>()? {
            match self.0.split_first() {
                Some((wanted, rest)) if key == *wanted => {
                    found = map.next_value_seed(Lookup(rest))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_bool<E>(self, value: bool) -> Result<bool, E> {
        Ok(self.0.is_empty() && value)
    }

    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What indexing a whole parsed `Value` answers: the reference the stream must match.
    fn by_value(bytes: &[u8], project: &str) -> Result<bool, ()> {
        let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|_| ())?;
        Ok(value["projects"][project][APPROVAL_FLAG] == serde_json::Value::Bool(true))
    }

    #[test]
    fn the_stream_answers_as_the_parsed_value_does() {
        let flag = APPROVAL_FLAG;
        let cases = [
            format!(r#"{{"projects": {{"/w": {{"{flag}": true}}}}}}"#),
            format!(r#"{{"projects": {{"/w": {{"{flag}": false}}}}}}"#),
            format!(r#"{{"projects": {{"/w": {{"{flag}": "true"}}}}}}"#),
            format!(r#"{{"projects": {{"/other": {{"{flag}": true}}}}}}"#),
            format!(r#"{{"projects": {{"/w": {{"{flag}": true}}, "/w": {{}}}}}}"#),
            format!(r#"{{"projects": {{"/w": {{}}, "/w": {{"{flag}": true}}}}}}"#),
            format!(r#"{{"projects": {{"/w": {{"{flag}": true}}}}, "projects": 1}}"#),
            format!(r#"{{"projects": {{"/w": {{"{flag}": true, "{flag}": null}}}}}}"#),
            format!(r#"{{"projects": [{{"/w": {{"{flag}": true}}}}]}}"#),
            format!(
                r#"{{"a": [1, 2.5, -3, null, "x", {{"b": []}}], "projects": {{"/w": {{"x": [[]], "{flag}": true}}}}}}"#
            ),
            format!(r#"{{"{flag}": true}}"#),
            r#"[true]"#.to_owned(),
            r#"true"#.to_owned(),
            r#"null"#.to_owned(),
            r#"{"projects": {"/w": {"hasClaudeMdExternalIncludesApproved": true}}} x"#.to_owned(),
            r#"{"projects": "#.to_owned(),
            r#"{"\u0070rojects": {"/w": {"hasClaudeMdExternalIncludesApproved": true}}}"#
                .to_owned(),
        ];
        for case in &cases {
            assert_eq!(
                external_includes_approved(case.as_bytes(), "/w").map_err(|_| ()),
                by_value(case.as_bytes(), "/w"),
                "{case}"
            );
        }
    }

    #[test]
    fn deep_nesting_off_the_path_is_skipped_as_json_parse_accepts_it() {
        // serde_json stops a `Value` at 128 levels; JavaScript's JSON.parse (Claude Code) has
        // no such limit, and neither has the stream's skipping, which does not recurse.
        let deep = format!(
            r#"{{"x": {}1{}, "projects": {{"/w": {{"{APPROVAL_FLAG}": true}}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(
            external_includes_approved(deep.as_bytes(), "/w").ok(),
            Some(true)
        );
        let unbalanced = format!("{}1", "[".repeat(100_000));
        assert!(external_includes_approved(unbalanced.as_bytes(), "/w").is_err());
    }

    #[test]
    fn a_large_document_is_streamed_past() {
        let mut doc = String::from(r#"{"filler": ["#);
        doc.push_str(&"0,".repeat(2_000_000));
        doc.push_str(r#"0], "projects": {"/w": {"hasClaudeMdExternalIncludesApproved": true}}}"#);
        assert_eq!(
            external_includes_approved(doc.as_bytes(), "/w").ok(),
            Some(true)
        );
    }
}
