//! Whether a model answer is usable for its purpose. Every chat call names
//! the check its answer must pass ([`AnswerCheck`]); an answer that fails it
//! is retried, counted, and never cached (see [`super::ResponseCache`]):
//! a garbled or cut-off answer must not become a permanent "nothing found".

use std::borrow::Cow;

use serde_json::Value;

use super::Completion;
use graphrag_operations::json_repair;

/// The longest chat answer accepted, in bytes. A real answer is at most a few
/// hundred KB (64k tokens); a server that streams megabytes is broken, and
/// keeping its output would fill memory, the cache and the index.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Why an answer cannot be used; stats.json counts each kind per model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InvalidKind {
    /// Cut off at the token limit (`finish_reason: length`).
    Truncated,
    /// Does not parse as what was asked for (records, JSON with the required
    /// fields, Y/N, non-empty text).
    Malformed,
    /// Longer than [`MAX_ANSWER_BYTES`].
    Oversized,
}

impl InvalidKind {
    /// The word messages and `LlmError::InvalidAnswer` use.
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidKind::Truncated => "truncated",
            InvalidKind::Malformed => "malformed",
            InvalidKind::Oversized => "oversized",
        }
    }
}

/// An answer that failed its check: never used, never cached, asked again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Which defect (counted per kind in stats.json).
    pub kind: InvalidKind,
    /// What is wrong, for messages and the corrective retry.
    pub reason: String,
}

impl Invalid {
    pub(crate) fn malformed(reason: impl Into<String>) -> Invalid {
        Invalid { kind: InvalidKind::Malformed, reason: reason.into() }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} answer: {}", self.kind.as_str(), self.reason)
    }
}

/// The check an answer must pass: `parse` turns its text into the value the
/// caller needs or says what is wrong; `expected` is what a corrective retry
/// asks the model for ("only the complete JSON object, no other text").
pub struct AnswerCheck<F> {
    expected: Cow<'static, str>,
    parse: F,
}

impl<T, F: Fn(&str) -> Result<T, String>> AnswerCheck<F> {
    /// A check that parses with `parse`; `expected` is said to the model
    /// when an answer did not parse.
    pub fn new(expected: impl Into<Cow<'static, str>>, parse: F) -> Self {
        AnswerCheck { expected: expected.into(), parse }
    }

    /// The answer's value, if it is complete, of a sane size and parses.
    pub fn check(&self, completion: &Completion) -> Result<T, Invalid> {
        match completion.finish_reason.as_deref() {
            Some("length") => {
                return Err(Invalid {
                    kind: InvalidKind::Truncated,
                    reason: "cut off at the token limit (finish_reason: length)".into(),
                })
            }
            Some("content_filter") => {
                return Err(Invalid::malformed(
                    "withheld by the server's content filter (finish_reason: content_filter)",
                ))
            }
            _ => {}
        }
        if completion.content.len() > MAX_ANSWER_BYTES {
            return Err(Invalid {
                kind: InvalidKind::Oversized,
                reason: format!("{} bytes, more than the {MAX_ANSWER_BYTES} accepted", completion.content.len()),
            });
        }
        (self.parse)(&completion.content).map_err(Invalid::malformed)
    }

    /// What a corrective retry asks the model for.
    pub fn expected(&self) -> &str {
        &self.expected
    }
}

/// U+FFFD in an answer means the server's bytes did not decode: characters
/// were lost, so the text cannot be trusted.
fn decoded_cleanly(text: &str) -> Result<(), String> {
    if text.contains('\u{fffd}') {
        return Err("it contains undecodable characters (U+FFFD)".into());
    }
    Ok(())
}

/// Prose: a non-empty text that decoded cleanly (answers, summaries).
pub fn text() -> AnswerCheck<impl Fn(&str) -> Result<(), String>> {
    AnswerCheck::new("a plain-text answer", |t: &str| {
        if t.trim().is_empty() {
            return Err("the answer is empty".into());
        }
        decoded_cleanly(t)
    })
}

/// A JSON object (tolerantly parsed: fences, prose, small syntax slips) that
/// `schema` accepts; the value comes with whether the JSON needed repair.
pub fn json<T>(
    expected: impl Into<Cow<'static, str>>,
    schema: impl Fn(&Value) -> Result<T, String>,
) -> AnswerCheck<impl Fn(&str) -> Result<(T, bool), String>> {
    AnswerCheck::new(expected, move |t: &str| {
        decoded_cleanly(t)?;
        let parsed = json_repair::parse_object(t)?;
        Ok((schema(&parsed.value)?, !parsed.repairs.is_empty()))
    })
}

/// Any JSON object.
pub fn json_object() -> AnswerCheck<impl Fn(&str) -> Result<(Value, bool), String>> {
    json("only the complete JSON object, no other text", |v: &Value| Ok(v.clone()))
}

/// `Y`/`yes` or `N`/`no` (GraphRAG's gleaning loop check): whether it is yes.
pub fn yes_no() -> AnswerCheck<impl Fn(&str) -> Result<bool, String>> {
    AnswerCheck::new("a single letter, Y or N", |t: &str| {
        let word: String = t.trim().trim_matches(|c: char| !c.is_alphanumeric()).to_ascii_uppercase();
        match word.split(|c: char| !c.is_alphanumeric()).next().unwrap_or("") {
            "Y" | "YES" => Ok(true),
            "N" | "NO" => Ok(false),
            _ => Err(format!("expected Y or N, got {:?}", t.chars().take(40).collect::<String>())),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(content: &str) -> Completion {
        Completion { content: content.into(), finish_reason: Some("stop".into()), ..Completion::default() }
    }

    #[test]
    fn truncated_and_oversized_answers_are_invalid_whatever_their_text() {
        let cut = Completion { finish_reason: Some("length".into()), ..done("A fine start") };
        assert_eq!(text().check(&cut).unwrap_err().kind, InvalidKind::Truncated);
        let huge = done(&"a".repeat(MAX_ANSWER_BYTES + 1));
        assert_eq!(text().check(&huge).unwrap_err().kind, InvalidKind::Oversized);
        assert!(text().check(&done("A fine answer.")).is_ok());
        // A server that does not say why it stopped is taken at its word.
        assert!(text().check(&Completion { finish_reason: None, ..done("ok") }).is_ok());
        let filtered = Completion { finish_reason: Some("content_filter".into()), ..done("A fine") };
        assert_eq!(text().check(&filtered).unwrap_err().kind, InvalidKind::Malformed);
    }

    #[test]
    fn text_must_be_present_and_decoded() {
        assert_eq!(text().check(&done("  \n")).unwrap_err().kind, InvalidKind::Malformed);
        assert!(text().check(&done("\u{fffd}\u{fffd} garbled")).is_err());
    }

    #[test]
    fn json_needs_an_object_the_schema_accepts() {
        let titled = json("a report", |v: &Value| {
            v.get("title").and_then(Value::as_str).map(str::to_string).ok_or("no title".to_string())
        });
        assert_eq!(titled.check(&done(r#"{"title": "T"}"#)).unwrap(), ("T".to_string(), false));
        let (value, repaired) = titled.check(&done("Here it is:\n```json\n{\"title\": \"T\",}\n```")).unwrap();
        assert_eq!(value, "T");
        assert!(repaired);
        assert_eq!(titled.check(&done(r#"{"summary": "S"}"#)).unwrap_err().reason, "no title");
        assert!(titled.check(&done("no JSON here")).is_err());
        assert!(json_object().check(&done("[1, 2]")).is_err());
    }

    #[test]
    fn yes_no_reads_the_first_word() {
        let c = yes_no();
        for (answer, yes) in
            [("Y", true), ("yes.", true), (" N\n", false), ("No, nothing more", false), ("**YES**", true)]
        {
            assert_eq!(c.check(&done(answer)).unwrap(), yes, "{answer}");
        }
        assert!(c.check(&done("maybe")).is_err());
        assert!(c.check(&done("")).is_err());
    }
}
