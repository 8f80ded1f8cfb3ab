//! tiktoken-compatible token counting and encoding, offline (ranks are embedded).

use std::fmt;
use std::str::FromStr;

/// The tiktoken encodings graphrag-rs can chunk and count with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    O200kBase,
    Cl100kBase,
}

impl Encoding {
    pub const NAMES: [&'static str; 2] = ["o200k_base", "cl100k_base"];

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    pub fn tokenizer(self) -> &'static bpe_openai::Tokenizer {
        match self {
            Encoding::O200kBase => bpe_openai::o200k_base(),
            Encoding::Cl100kBase => bpe_openai::cl100k_base(),
        }
    }

    /// Number of tokens `text` encodes to.
    pub fn count(self, text: &str) -> usize {
        self.tokenizer().count(text)
    }

    /// Token ids of `text`.
    pub fn encode(self, text: &str) -> Vec<u32> {
        self.tokenizer().encode(text)
    }

    /// Byte length of each token id (o200k/cl100k do not normalise, so token
    /// bytes map one to one onto the input bytes).
    pub fn token_len(self, token: u32) -> usize {
        self.tokenizer().bpe.token_len(token)
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Encoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "o200k_base" => Ok(Encoding::O200kBase),
            "cl100k_base" => Ok(Encoding::Cl100kBase),
            other => Err(format!(
                "unknown encoding `{other}`{}; expected one of {}",
                crate::suggest::did_you_mean(other, Encoding::NAMES),
                Encoding::NAMES.join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_known_tiktoken_values() {
        // Reference counts from tiktoken (python) for these strings.
        assert_eq!(Encoding::Cl100kBase.count("hello world"), 2);
        assert_eq!(Encoding::O200kBase.count("hello world"), 2);
        assert_eq!(Encoding::Cl100kBase.encode("hello world"), vec![15339, 1917]);
        assert_eq!(Encoding::O200kBase.encode("hello world"), vec![24912, 2375]);
    }

    #[test]
    fn token_lengths_cover_the_input_bytes() {
        let text = "Añejo 東京 🎄 ok";
        let enc = Encoding::O200kBase;
        let total: usize = enc.encode(text).iter().map(|&t| enc.token_len(t)).sum();
        assert_eq!(total, text.len());
    }

    #[test]
    fn parse_names_and_suggest() {
        assert_eq!("cl100k_base".parse::<Encoding>(), Ok(Encoding::Cl100kBase));
        let err = "o200k".parse::<Encoding>().unwrap_err();
        assert!(err.contains("did you mean `o200k_base`"), "{err}");
    }
}
