//! "Did you mean" suggestions for misspelt keys, verbs and values.

/// ` (did you mean `x`?)` for the closest candidate, or "" when none is close.
pub fn did_you_mean<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(input, candidates).map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default()
}

/// The candidate closest to `input` by edit distance, if it is close enough to
/// be a plausible typo (distance ≤ 1/3 of the length, at least 1, at most 3),
/// or one that `input` is a prefix of (a truncated name, `o200k` for `o200k_base`).
pub fn closest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (input.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| {
            let truncated = input.len() >= 3 && c.starts_with(input);
            (if truncated { 1 } else { strsim::damerau_levenshtein(input, c) }, c)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(closest("sise", ["size", "overlap"]), Some("size"));
        assert_eq!(closest("chunkin", ["chunking", "input"]), Some("chunking"));
        assert_eq!(closest("zzzzzz", ["size", "overlap"]), None);
        assert_eq!(closest("o200k", ["o200k_base", "cl100k_base"]), Some("o200k_base"));
        assert_eq!(did_you_mean("xyz", ["size"]), "");
    }
}
