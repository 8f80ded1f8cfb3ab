//! OpenAI's wire format (chat completions, their stream, embeddings): the
//! form every request is made in first (see `wire`).

use serde_json::Value;

use super::Completion;

/// A chat completion's answer.
pub(super) fn completion(json: &Value) -> Result<Completion, String> {
    let content = json
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .ok_or("response has no choices[0].message.content")?
        .to_string();
    let usage = |k: &str| json.pointer(&format!("/usage/{k}")).and_then(Value::as_u64);
    Ok(Completion {
        prompt_tokens: usage("prompt_tokens").unwrap_or(0),
        completion_tokens: usage("completion_tokens").unwrap_or(0),
        content,
        finish_reason: json.pointer("/choices/0/finish_reason").and_then(Value::as_str).map(str::to_string),
    })
}

/// One `chat.completion.chunk` of a stream: its text, finish reason and usage.
pub(super) fn stream_event(event: &Value, done: &mut Completion) -> Option<String> {
    if let Some(reason) = event.pointer("/choices/0/finish_reason").and_then(Value::as_str) {
        done.finish_reason = Some(reason.to_string());
    }
    if let Some(u) = event.get("usage").filter(|u| u.is_object()) {
        done.prompt_tokens = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(done.prompt_tokens);
        done.completion_tokens = u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(done.completion_tokens);
    }
    event.pointer("/choices/0/delta/content").and_then(Value::as_str).filter(|d| !d.is_empty()).map(str::to_string)
}

/// The vectors of an embeddings answer in input order, and its prompt tokens.
pub(super) fn embeddings(bytes: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64), String> {
    // Read straight into vectors (megabytes of numbers at 3072 dimensions);
    // an answer of another shape is read again as JSON to say what is wrong.
    let (items, tokens) = match serde_json::from_slice::<EmbeddingResponse>(bytes) {
        Ok(r) => (r.data, r.usage.and_then(|u| u.prompt_tokens).unwrap_or(0)),
        Err(_) => {
            let json: Value = serde_json::from_slice(bytes).map_err(|e| format!("response is not JSON ({e})"))?;
            return Err(embedding_defect(&json));
        }
    };
    let mut out = vec![Vec::new(); expected];
    for (pos, item) in items.into_iter().enumerate() {
        *out.get_mut(item.index.unwrap_or(pos)).ok_or("embedding index out of range")? = item.embedding;
    }
    if out.iter().any(Vec::is_empty) {
        return Err("response is missing embeddings for some inputs".into());
    }
    Ok((out, tokens))
}

/// An OpenAI embeddings answer.
#[derive(serde::Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
    usage: Option<EmbeddingUsage>,
}

#[derive(serde::Deserialize)]
struct EmbeddingItem {
    index: Option<usize>,
    #[serde(deserialize_with = "numbers_or_base64")]
    embedding: Vec<f32>,
}

/// A vector given as a list of numbers or as base64 of little-endian f32
/// (`encoding_format: base64`).
fn numbers_or_base64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    struct Vector;
    impl<'de> serde::de::Visitor<'de> for Vector {
        type Value = Vec<f32>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of numbers or base64 of little-endian f32")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f32>, A::Error> {
            let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(x) = seq.next_element()? {
                v.push(x);
            }
            Ok(v)
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Vec<f32>, E> {
            decode_base64_f32(text).map_err(E::custom)
        }
    }
    d.deserialize_any(Vector)
}

/// The f32 values of `text`, standard base64 of their little-endian bytes.
fn decode_base64_f32(text: &str) -> Result<Vec<f32>, String> {
    use base64::Engine as _;
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("embedding is not base64 ({e})"))?;
    if bytes.len() % 4 != 0 {
        return Err(format!("base64 embedding of {} bytes is not a list of f32", bytes.len()));
    }
    Ok(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

#[derive(serde::Deserialize)]
struct EmbeddingUsage {
    prompt_tokens: Option<u64>,
}

/// What is wrong with an embeddings answer that is JSON but not of the expected shape.
fn embedding_defect(json: &Value) -> String {
    let Some(data) = json.get("data").and_then(Value::as_array) else { return "response has no data array".into() };
    for item in data {
        match item.get("embedding") {
            Some(Value::Array(numbers)) if !numbers.iter().all(Value::is_number) => {
                return "embedding is not a list of numbers".into();
            }
            Some(Value::String(text)) => {
                if let Err(e) = decode_base64_f32(text) {
                    return e;
                }
            }
            Some(Value::Array(_)) => {}
            _ => return "data item has no embedding".into(),
        }
    }
    "response is not an embeddings answer (data[].embedding, data[].index)".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<Vec<Vec<f32>>, String> {
        serde_json::from_str::<EmbeddingResponse>(body)
            .map(|r| r.data.into_iter().map(|i| i.embedding).collect())
            .map_err(|_| embedding_defect(&serde_json::from_str(body).unwrap()))
    }

    #[test]
    fn embeddings_are_read_as_numbers_or_base64() {
        // 1.0 and -2.5 as little-endian f32: 00 00 80 3f, 00 00 20 c0.
        let numbers = parse(r#"{"data":[{"index":0,"embedding":[1.0,-2.5]}]}"#).unwrap();
        let base64 = parse(r#"{"data":[{"index":0,"embedding":"AACAPwAAIMA="}]}"#).unwrap();
        assert_eq!(numbers, vec![vec![1.0, -2.5]]);
        assert_eq!(base64, numbers);
    }

    #[test]
    fn broken_base64_embeddings_say_what_is_wrong() {
        let not_base64 = parse(r#"{"data":[{"embedding":"not base64!"}]}"#).unwrap_err();
        assert!(not_base64.starts_with("embedding is not base64"), "{not_base64}");
        // Six bytes: one f32 and half of another.
        let ragged = parse(r#"{"data":[{"embedding":"AACAPwAA"}]}"#).unwrap_err();
        assert_eq!(ragged, "base64 embedding of 6 bytes is not a list of f32");
        let words = parse(r#"{"data":[{"embedding":["a"]}]}"#).unwrap_err();
        assert_eq!(words, "embedding is not a list of numbers");
    }

    proptest::proptest! {
        #[test]
        fn base64_vectors_decode_bit_for_bit(v in proptest::collection::vec(proptest::num::f32::ANY, 0..64)) {
            // Encoded as the mock server answers `encoding_format: base64`.
            let back = decode_base64_f32(&graphrag_mock_llm::embed::to_base64(&v)).unwrap();
            proptest::prop_assert_eq!(back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        }

        #[test]
        fn any_text_decodes_or_fails_cleanly(text in "\\PC{0,40}") {
            let _ = decode_base64_f32(&text);
        }
    }
}
