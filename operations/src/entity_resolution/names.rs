//! Entity names as resolution compares them: accents, case, punctuation,
//! possessives, leading articles, courtesy titles and company designators
//! set aside, and what they said kept as flags (the gender a title implies,
//! a possessive inside the name, a connector word, numbers).

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// What a courtesy title says about its bearer. Two titles of different
/// kinds name different people (`MR FEZZIWIG`, `MRS FEZZIWIG`, `MISS FEZZIWIG`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Courtesy {
    Male,
    /// Mrs, Madame, Frau.
    Married,
    /// Miss, Mademoiselle.
    Unmarried,
    /// Ms, Lady, Dame: a woman, married or not.
    Female,
    /// Dr, Professor, Reverend: anyone.
    Neutral,
}

impl Courtesy {
    /// Whether the same person can bear both titles.
    pub fn compatible(self, other: Courtesy) -> bool {
        use Courtesy::*;
        match (self, other) {
            (Neutral, _) | (_, Neutral) => true,
            (Male, Male) => true,
            (Male, _) | (_, Male) => false,
            (Female, _) | (_, Female) => true,
            (a, b) => a == b,
        }
    }

    pub fn is_female(self) -> bool {
        matches!(self, Courtesy::Married | Courtesy::Unmarried | Courtesy::Female)
    }
}

/// Courtesy titles (leading words), sorted.
const COURTESY: &[(&str, Courtesy)] = &[
    ("DAME", Courtesy::Female),
    ("DOCTOR", Courtesy::Neutral),
    ("DR", Courtesy::Neutral),
    ("FRAU", Courtesy::Married),
    ("HERR", Courtesy::Male),
    ("LADY", Courtesy::Female),
    ("LORD", Courtesy::Male),
    ("MADAM", Courtesy::Married),
    ("MADAME", Courtesy::Married),
    ("MADEMOISELLE", Courtesy::Unmarried),
    ("MASTER", Courtesy::Male),
    ("MISS", Courtesy::Unmarried),
    ("MISTER", Courtesy::Male),
    ("MLLE", Courtesy::Unmarried),
    ("MME", Courtesy::Married),
    ("MONSIEUR", Courtesy::Male),
    ("MR", Courtesy::Male),
    ("MRS", Courtesy::Married),
    ("MS", Courtesy::Female),
    ("PROF", Courtesy::Neutral),
    ("PROFESSOR", Courtesy::Neutral),
    ("REV", Courtesy::Neutral),
    ("REVEREND", Courtesy::Neutral),
    ("SENOR", Courtesy::Male),
    ("SENORA", Courtesy::Married),
    ("SENORITA", Courtesy::Unmarried),
    ("SIR", Courtesy::Male),
];

/// Leading articles.
const ARTICLES: &[&str] = &["A", "AN", "THE"];

/// Trailing company designators (`ACME INC` is `ACME`), sorted.
const DESIGNATORS: &[&str] = &["CORP", "GMBH", "INC", "INCORPORATED", "LLC", "LLP", "LTD", "PLC"];

/// Words that join two names into a compound (`SCROOGE AND MARLEY`, `BANK
/// OF ENGLAND`, `GHOST OF CHRISTMAS PAST`), sorted. Name particles (`DE`,
/// `VAN`, `VON`) are not among them: they belong to a person's name.
const CONNECTORS: &[&str] = &["&", "AND", "AT", "BY", "FOR", "FROM", "IN", "OF", "ON", "OR", "THE", "TO", "WITH"];

/// Name particles: part of a name but no evidence on their own.
const PARTICLES: &[&str] =
    &["D", "DA", "DE", "DEL", "DELLA", "DEN", "DER", "DI", "DOS", "DU", "LA", "LE", "VAN", "VON"];

fn is_roman_numeral(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 6
        && t.chars().all(|c| matches!(c, 'I' | 'V' | 'X' | 'L'))
        && !matches!(t, "L" | "LI" | "LIV" | "XL")
}

/// A name split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameForm {
    /// Upper-case words without accents, apostrophes or punctuation, and
    /// without leading articles, courtesy titles and trailing designators.
    pub tokens: Vec<String>,
    /// The kind of the courtesy title(s) it carried, if any (the most
    /// specific one when several).
    pub courtesy: Option<Courtesy>,
    /// A word other than the last was possessive: `MARLEY'S GHOST` is
    /// something of Marley's, not Marley. (A possessive on the last word is
    /// the name's own: `SCROOGE'S` is `SCROOGE`.)
    pub possessive: bool,
    /// The words hold a connector (`CONNECTORS`): a compound name.
    pub compound: bool,
}

impl NameForm {
    pub fn parse(title: &str) -> NameForm {
        let folded: String = title
            .nfd()
            .filter(|c| !is_combining_mark(*c))
            .map(|c| if matches!(c, '\u{2019}' | '\u{2018}' | '`') { '\'' } else { c })
            .flat_map(char::to_uppercase)
            .collect();
        let mut words: Vec<String> = Vec::new();
        let mut possessive = false;
        let raw: Vec<&str> = folded
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '&'))
            .map(|w| w.trim_matches('\''))
            .filter(|w| !w.is_empty())
            .collect();
        for (i, w) in raw.iter().enumerate() {
            let base = w.strip_suffix("'S").filter(|b| !b.is_empty());
            if base.is_some() && i + 1 < raw.len() {
                possessive = true;
            }
            let w = base.unwrap_or(w).replace('\'', "");
            if !w.is_empty() {
                words.push(w);
            }
        }
        let mut start = 0;
        let mut courtesy: Option<Courtesy> = None;
        while start + 1 < words.len() {
            let w = words[start].as_str();
            if ARTICLES.contains(&w) {
                start += 1;
            } else if let Ok(i) = COURTESY.binary_search_by(|(t, _)| t.cmp(&w)) {
                let kind = COURTESY[i].1;
                courtesy = Some(match courtesy {
                    Some(c) if c != Courtesy::Neutral => c,
                    _ => kind,
                });
                start += 1;
            } else {
                break;
            }
        }
        let mut end = words.len();
        while end > start + 1 && DESIGNATORS.binary_search(&words[end - 1].as_str()).is_ok() {
            end -= 1;
        }
        let tokens: Vec<String> = words.drain(start..end).collect();
        let compound = tokens.iter().any(|t| CONNECTORS.binary_search(&t.as_str()).is_ok());
        NameForm { tokens, courtesy, possessive, compound }
    }

    /// The words joined by single spaces: names with equal keys are the
    /// same name written differently.
    pub fn key(&self) -> String {
        self.tokens.join(" ")
    }

    /// The words without separators (`COUNTING-HOUSE`, `COUNTINGHOUSE`).
    pub fn compact(&self) -> String {
        self.tokens.concat()
    }

    /// Numbers and roman numerals after the first word (`GEORGE III`,
    /// `APOLLO 11`): names that differ in them are different things.
    pub fn numbers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .tokens
            .iter()
            .enumerate()
            .filter(|(i, t)| t.chars().any(|c| c.is_ascii_digit()) || (*i > 0 && is_roman_numeral(t)))
            .map(|(_, t)| t.as_str())
            .collect();
        out.sort_unstable();
        out
    }

    /// First letters of the words that are not connectors or particles
    /// (`UNITED NATIONS` → `UN`).
    pub fn initials(&self) -> String {
        self.tokens.iter().filter(|t| !is_connector(t) && !is_particle(t)).filter_map(|t| t.chars().next()).collect()
    }

    /// Words that say which thing a name is (not connectors, particles,
    /// numbers or single letters): the blocking keys of resolution.
    pub fn content_tokens(&self) -> impl Iterator<Item = &str> {
        self.tokens.iter().map(String::as_str).filter(|t| t.chars().count() >= 2 && !is_connector(t) && !is_particle(t))
    }
}

/// Common given names (upper case, one per line, sorted): a name holding
/// one is a person's. Words that also name places or things (`CAROL`,
/// `FLORENCE`, `VIRGINIA`) are left out.
const GIVEN_NAMES: &str = include_str!("given_names.txt");

pub fn is_given_name(t: &str) -> bool {
    static LIST: std::sync::OnceLock<Vec<&str>> = std::sync::OnceLock::new();
    LIST.get_or_init(|| GIVEN_NAMES.lines().collect()).binary_search(&t).is_ok()
}

pub fn is_connector(t: &str) -> bool {
    CONNECTORS.binary_search(&t).is_ok()
}

pub fn is_particle(t: &str) -> bool {
    PARTICLES.binary_search(&t).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(t: &str) -> NameForm {
        NameForm::parse(t)
    }

    #[test]
    fn lists_are_sorted() {
        let given: Vec<&str> = GIVEN_NAMES.lines().collect();
        for list in [DESIGNATORS, CONNECTORS, PARTICLES, &given[..]] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
        assert!(COURTESY.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn titles_articles_accents_and_punctuation_are_set_aside() {
        let f = form("Mr. Scrooge");
        assert_eq!((f.key(), f.courtesy), ("SCROOGE".to_string(), Some(Courtesy::Male)));
        assert_eq!(form("MRS FEZZIWIG").courtesy, Some(Courtesy::Married));
        assert_eq!(form("Sinn Féin").key(), "SINN FEIN");
        assert_eq!(form("The White House").key(), "WHITE HOUSE");
        assert_eq!(form("counting-house").key(), "COUNTING HOUSE");
        assert_eq!(form("COUNTINGHOUSE").compact(), form("counting-house").compact());
        assert_eq!(form("Acme, Inc.").key(), "ACME");
        assert_eq!(form("O'Brien").key(), "OBRIEN");
        // A title alone is a name.
        assert_eq!(form("MISS").key(), "MISS");
        assert_eq!(form("THE").key(), "THE");
    }

    #[test]
    fn possessives() {
        let own = form("SCROOGE'S");
        assert_eq!((own.key(), own.possessive), ("SCROOGE".to_string(), false));
        let of = form("Marley\u{2019}s Ghost");
        assert_eq!((of.key(), of.possessive), ("MARLEY GHOST".to_string(), true));
    }

    #[test]
    fn compounds_numbers_initials() {
        assert!(form("SCROOGE AND MARLEY").compound);
        assert!(form("GHOST OF CHRISTMAS PAST").compound);
        assert!(!form("LUDWIG VAN BEETHOVEN").compound);
        assert_eq!(form("George III").numbers(), ["III"]);
        assert_eq!(form("Apollo 11").numbers(), ["11"]);
        assert!(form("Ivan Petrov").numbers().is_empty());
        assert_eq!(form("United Nations").initials(), "UN");
        assert_eq!(form("Bank of England").initials(), "BE");
        assert_eq!(form("J.R.R. Tolkien").tokens, ["J", "R", "R", "TOLKIEN"]);
    }

    #[test]
    fn courtesy_kinds() {
        use Courtesy::*;
        assert!(!Male.compatible(Married));
        assert!(!Married.compatible(Unmarried));
        assert!(Female.compatible(Married) && Neutral.compatible(Male) && Male.compatible(Male));
        assert_eq!(form("Dr Mrs Smith").courtesy, Some(Married));
        assert_eq!(form("Master Peter Cratchit").courtesy, Some(Male));
        assert!(is_given_name("JACOB") && !is_given_name("CAROL") && !is_given_name("SCROOGE"));
    }
}
