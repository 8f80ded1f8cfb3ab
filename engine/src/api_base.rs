//! A model's `api_base` as settings check it and the clients call it: parsed
//! once into a URL (http or https, with a host), and shown in messages with
//! its secrets masked (query values such as api keys and SAS tokens, a
//! password).

use reqwest::Url;

/// The parsed api_base: an http(s) URL that can take path segments.
pub fn parse(base: &str) -> Result<Url, String> {
    let url = Url::parse(base.trim()).map_err(|e| format!("`{}` is not a URL ({e})", redact_query(base)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{}` is not an http:// or https:// URL", redact(&url)));
    }
    if url.cannot_be_a_base() || url.host().is_none() {
        return Err(format!("`{}` has no host", redact(&url)));
    }
    Ok(url)
}

/// Query parameters that are not secret (kept in messages).
pub(crate) const PUBLIC_PARAMS: [&str; 1] = ["api-version"];

/// `url` with its query values (api keys, SAS tokens) masked.
pub(crate) fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v = if PUBLIC_PARAMS.contains(&k.as_ref()) { v.into_owned() } else { "***".to_string() };
                (k.into_owned(), v)
            })
            .collect();
        shown.query_pairs_mut().clear().extend_pairs(pairs);
    }
    let _ = shown.set_password(shown.password().map(|_| "***"));
    shown.to_string()
}

/// A URL-ish string with everything after `?` masked (for one that does not parse).
fn redact_query(text: &str) -> String {
    match text.split_once('?') {
        Some((head, _)) => format!("{head}?***"),
        None => text.to_string(),
    }
}
