//! Candidate pairs without comparing all pairs, and the rules' verdict on
//! each.
//!
//! Blocking: names meet when they share their rarest content word (every
//! pair where one name's words are among the other's is found this way),
//! have the same letters without separators, when one is the other's
//! initials, or when they are neighbours in the sorted order of their
//! letters, forwards or backwards (spelling variants). Each entity meets at
//! most [`MAX_BLOCK`] others by its rarest word.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::names::{is_given_name, Courtesy, NameForm};
use super::{Entity, Method};

/// A word shared by more names than this is no evidence for blocking.
pub const MAX_BLOCK: usize = 200;

/// Names compared with this many neighbours in sorted letter order.
const SPELLING_WINDOW: usize = 4;

/// Added words that make a longer name a different thing: heads of place,
/// organisation, event and work names (`LONDON BRIDGE`, `CHRISTMAS EVE`),
/// and modifiers of places (`NEW YORK`, `NORTH KOREA`). Sorted.
#[rustfmt::skip]
const DIFFERENT_THING: &[&str] = &[
    "ABBEY", "ACADEMY", "ACT", "AGENCY", "AIRLINES", "AIRPORT", "ALBUM", "ARMY", "ASSOCIATION", "AVENUE",
    "AWARD", "AWARDS", "BANK", "BATTLE", "BAY", "BEACH", "BOARD", "BRIDGE", "BUILDING", "CAMPAIGN",
    "CANAL", "CASTLE", "CATHEDRAL", "CENTER", "CENTRAL", "CENTRE", "CHAMPIONSHIP", "CHAMPIONSHIPS",
    "CHAPEL", "CHURCH", "CITY", "CLUB", "COAST", "COLLEGE", "COMMISSION", "COMMITTEE", "COMPANY",
    "CONFERENCE", "CONGRESS", "CORPORATION", "COUNCIL", "COUNTY", "COURT", "CUP", "DAM", "DAY", "DEPARTMENT",
    "DISTRICT", "DYNASTY", "EAST", "EASTERN", "EMPIRE", "ENTERTAINMENT", "EVE", "FALLS", "FC", "FEDERATION",
    "FESTIVAL", "FILM", "FILMS", "FORCE", "FOREST", "FORT", "FOUNDATION", "GALLERY", "GAMES", "GARDEN",
    "GARDENS", "GOVERNMENT", "GREAT", "GREATER", "GROUP", "HALL", "HARBOUR", "HIGH", "HIGHWAY", "HILL",
    "HILLS", "HOSPITAL", "HOTEL", "HOUSE", "INSTITUTE", "INTERNATIONAL", "ISLAND", "ISLANDS", "KINGDOM",
    "LAKE", "LANE", "LEAGUE", "LIBRARY", "LINE", "LITTLE", "LOWER", "MAGAZINE", "MINISTRY", "MOUNT",
    "MOUNTAIN", "MOUNTAINS", "MUSEUM", "NATIONAL", "NAVY", "NEW", "NEWS", "NORTH", "NORTHERN", "OLD",
    "ORCHESTRA", "PALACE", "PARISH", "PARK", "PARLIAMENT", "PARTY", "PEAK", "PICTURES", "PLACE", "PORT",
    "PRESS", "PRIZE", "PROVINCE", "RAILWAY", "RECORDS", "REGION", "REPUBLIC", "RIVER", "ROAD", "ROYAL",
    "SCHOOL", "SEA", "SERIES", "SHOW", "SOCIETY", "SOUTH", "SOUTHERN", "SQUARE", "STADIUM", "STATE",
    "STATES", "STATION", "STREET", "STUDIO", "STUDIOS", "SYSTEM", "TEAM", "TEMPLE", "THEATER", "THEATRE",
    "TIMES", "TOUR", "TOWER", "TOWN", "TOWNSHIP", "TREATY", "TRIBE", "TROPHY", "UNION", "UNITED",
    "UNIVERSITY", "UPPER", "VALLEY", "VILLAGE", "WAR", "WEST", "WESTERN", "WORLD",
];

/// Entity types that say nothing (the fast method's, or none).
pub fn informative_type(t: &str) -> Option<&str> {
    let t = t.trim();
    (!t.is_empty() && !t.eq_ignore_ascii_case("NOUN PHRASE") && !t.eq_ignore_ascii_case("UNKNOWN")).then_some(t)
}

fn person_type(t: &str) -> bool {
    let t = t.to_ascii_uppercase();
    t.contains("PERSON") || t.contains("PEOPLE") || t.contains("CHARACTER") || t == "HUMAN"
}

/// Why two entities can never be one, whatever else says they might.
pub fn conflict(a: &NameForm, b: &NameForm, type_a: &str, type_b: &str) -> Option<String> {
    if let (Some(x), Some(y)) = (a.courtesy, b.courtesy) {
        if !x.compatible(y) {
            return Some("their titles name different people".into());
        }
    }
    if a.numbers() != b.numbers() {
        return Some("they differ in a number".into());
    }
    if let (Some(x), Some(y)) = (informative_type(type_a), informative_type(type_b)) {
        if !x.eq_ignore_ascii_case(y) {
            return Some(format!("types {x} and {y}"));
        }
    }
    if different_given_names(a, b) {
        return Some("different given names".into());
    }
    None
}

/// `JOHN SMITH` and `MARY SMITH`: same last word, different first words,
/// neither first word the other's initial.
fn different_given_names(a: &NameForm, b: &NameForm) -> bool {
    let (ta, tb) = (&a.tokens, &b.tokens);
    if ta.len() < 2 || tb.len() < 2 || ta.last() != tb.last() || a.compound || b.compound {
        return false;
    }
    let (fa, fb) = (&ta[0], &tb[0]);
    fa != fb && !(fa.len() == 1 && fb.starts_with(fa.as_str())) && !(fb.len() == 1 && fa.starts_with(fb.as_str()))
}

/// A pair of entities (`a < b`, indices) and the rules' verdict: `merge`
/// when the rules merge them; otherwise plausible but not certain (a chat
/// model is asked, rules alone keep them apart).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub a: usize,
    pub b: usize,
    /// The rule that found the pair.
    pub method: Method,
    pub merge: bool,
    /// Higher is surer; merges are made in descending order.
    pub score: f64,
    pub evidence: String,
    /// For a shorter name and a longer one (part, initials): the shorter
    /// occurs with the longer and in its documents, so it may stand for it.
    pub supported: bool,
}

/// Number of values two ascending lists share.
pub fn shared(a: &[u32], b: &[u32]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Pairs of entity indices (`a < b`) worth judging, each once, ascending.
pub fn blocked_pairs(forms: &[NameForm]) -> Vec<(usize, usize)> {
    let mut pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut add = |x: usize, y: usize| {
        if x != y {
            pairs.insert((x.min(y), x.max(y)));
        }
    };
    // Rarest content word.
    let mut postings: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, f) in forms.iter().enumerate() {
        let words: BTreeSet<&str> = f.content_tokens().collect();
        for w in words {
            postings.entry(w).or_default().push(i);
        }
    }
    for (i, f) in forms.iter().enumerate() {
        let rarest = f.content_tokens().map(|w| (postings[w].len(), w)).min();
        if let Some((n, w)) = rarest {
            if n <= MAX_BLOCK {
                for &j in &postings[w] {
                    add(i, j);
                }
            }
        }
    }
    // Same letters.
    let mut by_compact: HashMap<String, usize> = HashMap::new();
    for (i, f) in forms.iter().enumerate() {
        let c = f.compact();
        if !c.is_empty() {
            match by_compact.get(&c) {
                Some(&first) => add(first, i),
                None => {
                    by_compact.insert(c, i);
                }
            }
        }
    }
    // Initials: `UN` meets `UNITED NATIONS`, `U S` meets `UNITED STATES`.
    let mut by_initials: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, f) in forms.iter().enumerate() {
        let initials = f.initials();
        if f.content_tokens().count() >= 2 && (2..=6).contains(&initials.len()) {
            by_initials.entry(initials).or_default().push(i);
        }
    }
    for (i, f) in forms.iter().enumerate() {
        if let Some(js) = by_initials.get(&f.compact()) {
            if js.len() <= MAX_BLOCK {
                for &j in js {
                    add(i, j);
                }
            }
        }
    }
    // Spelling neighbours, forwards and backwards.
    for reversed in [false, true] {
        let mut keys: Vec<(String, usize)> = forms
            .iter()
            .enumerate()
            .map(|(i, f)| (if reversed { f.compact().chars().rev().collect() } else { f.compact() }, i))
            .filter(|(k, _)| !k.is_empty())
            .collect();
        keys.sort_unstable();
        for (x, (_, i)) in keys.iter().enumerate() {
            for (_, j) in keys.iter().skip(x + 1).take(SPELLING_WINDOW) {
                add(*i, *j);
            }
        }
    }
    pairs.into_iter().collect()
}

/// `short`'s words are the first or the last words of `long`'s (more words).
/// Returns the added words.
fn extension<'a>(short: &NameForm, long: &'a NameForm) -> Option<&'a [String]> {
    let (s, l) = (&short.tokens, &long.tokens);
    if s.is_empty() || s.len() >= l.len() {
        return None;
    }
    if l.starts_with(s) {
        Some(&l[s.len()..])
    } else if l.ends_with(s) {
        Some(&l[..l.len() - s.len()])
    } else {
        None
    }
}

/// `J MARLEY` / `J R R TOLKIEN` against `JACOB MARLEY` / `JOHN RONALD REUEL
/// TOLKIEN`: as many words, the same last word, every other word of one an
/// initial of the other's, at least one initial.
fn initials_of_person(a: &NameForm, b: &NameForm) -> bool {
    let (ta, tb) = (&a.tokens, &b.tokens);
    if ta.len() != tb.len() || ta.len() < 2 || ta.last() != tb.last() || ta.last().is_some_and(|t| t.len() < 2) {
        return false;
    }
    let mut initial = false;
    for (x, y) in ta.iter().zip(tb).take(ta.len() - 1) {
        if x == y {
            continue;
        }
        let (one, full) = if x.len() == 1 { (x, y) } else { (y, x) };
        if one.len() != 1 || !full.starts_with(one.as_str()) {
            return false;
        }
        initial = true;
    }
    initial
}

/// A shortened name stands for a longer one where most of its text units
/// are in documents that use the longer one (one sense per discourse:
/// `WILSON` across an encyclopedia is many people, within one article one).
pub const SAME_DOCUMENTS: f64 = 0.75;

/// What the corpus says beyond the two names of a pair: the last words of
/// names with a courtesy title (`MR SCROOGE`, `MRS CRATCHIT`) are
/// surnames, and which document each text unit is from.
#[derive(Debug, Default)]
pub struct Evidence<'a> {
    titled: HashSet<String>,
    /// Document number of each text unit number; empty: one document.
    unit_doc: &'a [u32],
}

impl<'a> Evidence<'a> {
    pub fn new(forms: &[NameForm], unit_doc: &'a [u32]) -> Self {
        let titled = forms
            .iter()
            .filter(|f| f.courtesy.is_some() && !f.compound && !f.possessive)
            .filter_map(|f| f.tokens.last().cloned())
            .collect();
        Evidence { titled, unit_doc }
    }

    /// A person's name: it holds a common given name, or ends with a surname
    /// seen after a courtesy title.
    fn is_person(&self, f: &NameForm) -> bool {
        f.courtesy.is_some()
            || f.tokens.iter().any(|t| is_given_name(t))
            || f.tokens.last().is_some_and(|t| self.titled.contains(t))
    }

    /// The share of `short`'s text units that are in documents with a text
    /// unit of `long`.
    fn in_documents_of(&self, short: &[u32], long: &[u32]) -> f64 {
        if self.unit_doc.is_empty() || short.is_empty() {
            return 1.0;
        }
        let doc = |u: &u32| self.unit_doc.get(*u as usize).copied().unwrap_or(u32::MAX);
        let docs: HashSet<u32> = long.iter().map(doc).collect();
        short.iter().filter(|u| docs.contains(&doc(u))).count() as f64 / short.len() as f64
    }
}

/// What the rules make of one pair (`a`, `b` left as 0: the caller's
/// indices); `None`: unrelated, or in [`conflict`].
pub fn judge(a: &Entity, b: &Entity, fa: &NameForm, fb: &NameForm, ev: &Evidence) -> Option<Candidate> {
    let verdict = |method, merge, score, evidence, supported| {
        Some(Candidate { a: 0, b: 0, method, merge, score, evidence, supported })
    };
    if fa.tokens.is_empty() || fb.tokens.is_empty() || conflict(fa, fb, a.entity_type, b.entity_type).is_some() {
        return None;
    }
    let together = shared(a.units, b.units);
    let with = match together {
        0 => "never in the same text unit".to_string(),
        1 => "in 1 text unit together".to_string(),
        n => format!("in {n} text units together"),
    };
    // `MRS CRATCHIT` is not who a bare `CRATCHIT` or `BOB CRATCHIT` names.
    let female_alone = |x: &NameForm, y: &NameForm| x.courtesy.is_some_and(Courtesy::is_female) && y.courtesy.is_none();
    let one_female = female_alone(fa, fb) || female_alone(fb, fa);
    if fa.key() == fb.key() || fa.compact() == fb.compact() {
        // `MARLEY'S GHOST` is not `MARLEY GHOST`.
        let merge = !(one_female || fa.possessive != fb.possessive);
        let score = if merge { 1.0 } else { 0.6 };
        return verdict(Method::SameName, merge, score, format!("same name: {} / {}", a.title, b.title), false);
    }
    if fa.compound || fb.compound {
        return None;
    }
    // A short form stands for a long one where they meet, and where the
    // short one is used, the long one is too.
    let stands_for = |short: &Entity, long: &Entity| -> (bool, String) {
        let share = ev.in_documents_of(short.units, long.units);
        let docs = if share < 1.0 {
            format!(", {:.0}% of {}'s text units in documents with {}", share * 100.0, short.title, long.title)
        } else {
            String::new()
        };
        (together > 0 && share >= SAME_DOCUMENTS, format!("{with}{docs}"))
    };
    // Initials.
    if initials_of_person(fa, fb) {
        return verdict(Method::Initials, true, 0.9, format!("initials: {} / {}, {with}", a.title, b.title), false);
    }
    for (x, fx, fy, y) in [(a, fa, fb, b), (b, fb, fa, a)] {
        if fx.tokens.len() == 1 && fy.content_tokens().count() >= 2 && fx.compact() == fy.initials() {
            let (holds, support) = stands_for(x, y);
            let evidence = format!("{} is the initials of {}, {support}", x.title, y.title);
            return verdict(Method::Initials, holds, if holds { 0.85 } else { 0.6 }, evidence, holds);
        }
    }
    // One name is the other with words added.
    let (short, long, fs, fl) = if fa.tokens.len() < fb.tokens.len() { (a, b, fa, fb) } else { (b, a, fb, fa) };
    if let Some(added) = extension(fs, fl) {
        if fs.possessive || fl.possessive {
            return None;
        }
        let (holds, support) = stands_for(short, long);
        let evidence = format!("{} is part of {}, {support}", short.title, long.title);
        let types: Vec<&str> = [short.entity_type, long.entity_type].into_iter().filter_map(informative_type).collect();
        let different_thing = added.iter().any(|w| DIFFERENT_THING.binary_search(&w.as_str()).is_ok());
        let weak = fs.content_tokens().all(|t| t.chars().count() < 3);
        // Without types, only a person's name is known to stay the same
        // thing when shortened (`PROJECT GUTENBERG LICENSE` is no
        // `PROJECT GUTENBERG`, `MERRY CHRISTMAS` no `CHRISTMAS`).
        let person = if types.is_empty() { ev.is_person(fl) } else { types.iter().all(|t| person_type(t)) };
        let merge = holds && person && !(different_thing || weak || one_female);
        return verdict(Method::NameExtension, merge, if merge { 0.9 } else { 0.5 }, evidence, holds);
    }
    // Spelling variants.
    let (ca, cb) = (fa.compact(), fb.compact());
    let shortest = ca.chars().count().min(cb.chars().count());
    if fa.tokens.len() != fb.tokens.len() || shortest < 5 {
        return None;
    }
    let distance = strsim::damerau_levenshtein(&ca, &cb);
    if distance > 2 {
        return None;
    }
    // Never merged by rules: one letter apart are as often different
    // things (`COLOMBIA` / `COLUMBIA`, `AUSTRIA` / `AUSTRALIA`), a country
    // and its people (`BOTSWANA` / `BATSWANA`) or a plural as variants.
    let score = if distance == 1 { 0.4 } else { 0.3 };
    let edits = if distance == 1 { "1 edit" } else { "2 edits" };
    verdict(Method::Spelling, false, score, format!("spelling: {} / {} ({edits}), {with}", a.title, b.title), false)
}

/// Two longer names that one shorter name stands for can be one thing's.
fn compatible_expansions(x: &NameForm, y: &NameForm, tx: &str, ty: &str) -> bool {
    if conflict(x, y, tx, ty).is_some() {
        return false;
    }
    x.key() == y.key() || extension(x, y).is_some() || extension(y, x).is_some() || initials_of_person(x, y)
}

/// A shorter name meets the thing a longer name names, not only that
/// spelling of it: `EBENEZER` never shares a text unit with `EBENEZER
/// SCROOGE`, but does with `SCROOGE` and `MR SCROOGE`, which the rules make
/// the same person. A name extension that failed only for want of meeting
/// (or of shared documents) is judged again with the text units of every
/// name the rules merge the longer name with.
fn meet_as_merged(entities: &[Entity], forms: &[NameForm], ev: &Evidence, out: &mut [Candidate]) {
    let mut parent: Vec<usize> = (0..entities.len()).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for c in out.iter().filter(|c| c.merge) {
        let (ra, rb) = (root(&mut parent, c.a), root(&mut parent, c.b));
        parent[ra.max(rb)] = ra.min(rb);
    }
    let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
    for e in 0..entities.len() {
        let r = root(&mut parent, e);
        groups.entry(r).or_default().push(e);
    }
    for c in out.iter_mut().filter(|c| c.method == Method::NameExtension && !c.merge && !c.supported) {
        let (short, long) = if forms[c.a].tokens.len() < forms[c.b].tokens.len() { (c.a, c.b) } else { (c.b, c.a) };
        let group = &groups[&root(&mut parent, long)];
        if group.len() < 2 || group.contains(&short) {
            continue;
        }
        let mut units: Vec<u32> = group.iter().flat_map(|&e| entities[e].units.iter().copied()).collect();
        units.sort_unstable();
        units.dedup();
        let as_merged = Entity { units: &units, ..entities[long] };
        let Some(v) = judge(&entities[short], &as_merged, &forms[short], &forms[long], ev) else { continue };
        if v.supported {
            let others: Vec<&str> = group.iter().filter(|&&e| e != long).map(|&e| entities[e].title).collect();
            c.merge = v.merge;
            c.supported = true;
            c.score = if v.merge { 0.85 } else { c.score };
            c.evidence = format!("{}, counting the names the rules merge it with ({})", v.evidence, others.join(", "));
        }
    }
}

/// Candidate pairs and the rules' verdicts; `unit_doc` gives the document
/// number of each text unit number (empty: one document). A name that is
/// part, or the initials, of several names that cannot be one (`SMITH`:
/// `JOHN SMITH`, `MARY SMITH`; `AFL`: `AMERICAN FOOTBALL LEAGUE`,
/// `AUSTRALIAN FOOTBALL LEAGUE`) is ambiguous: rules merge it with none.
pub fn candidates(entities: &[Entity], forms: &[NameForm], unit_doc: &[u32]) -> Vec<Candidate> {
    let ev = Evidence::new(forms, unit_doc);
    let mut out: Vec<Candidate> = blocked_pairs(forms)
        .into_iter()
        .filter_map(|(a, b)| {
            let c = judge(&entities[a], &entities[b], &forms[a], &forms[b], &ev)?;
            Some(Candidate { a, b, ..c })
        })
        .collect();
    meet_as_merged(entities, forms, &ev, &mut out);
    // Expansions the shorter name may stand for (longer names, initials'
    // full names), by the shorter name.
    let mut expanded: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    for (k, c) in out.iter().enumerate() {
        if c.supported {
            let (short, long) =
                if forms[c.a].compact().len() < forms[c.b].compact().len() { (c.a, c.b) } else { (c.b, c.a) };
            expanded.entry(short).or_default().push((k, long));
        }
    }
    let mut shorts: Vec<usize> = expanded.keys().copied().collect();
    shorts.sort_unstable();
    for short in shorts {
        let exp = &expanded[&short];
        let ambiguous = exp.iter().enumerate().any(|(i, &(_, x))| {
            exp[i + 1..].iter().any(|&(_, y)| {
                !compatible_expansions(&forms[x], &forms[y], entities[x].entity_type, entities[y].entity_type)
            })
        });
        if ambiguous {
            let longs: Vec<&str> = exp.iter().map(|&(_, l)| entities[l].title).collect();
            for &(k, _) in exp {
                if out[k].merge {
                    out[k].merge = false;
                    out[k].score = 0.5;
                    out[k].evidence =
                        format!("{} stands for names that are not one: {}", entities[short].title, longs.join(", "));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(names: &[(&str, &[u32])]) -> Vec<(String, String, bool)> {
        let entities: Vec<Entity> = names.iter().map(|(t, u)| Entity { title: t, entity_type: "", units: u }).collect();
        let forms: Vec<NameForm> = names.iter().map(|(t, _)| NameForm::parse(t)).collect();
        candidates(&entities, &forms, &[])
            .into_iter()
            .map(|c| (names[c.a].0.to_string(), names[c.b].0.to_string(), c.merge))
            .collect()
    }

    fn merged(found: &[(String, String, bool)], a: &str, b: &str) -> bool {
        found.iter().any(|(x, y, m)| *m && ((x == a && y == b) || (x == b && y == a)))
    }

    #[test]
    fn a_given_name_joins_the_full_name_where_it_meets_any_name_of_that_person() {
        // The example corpus: `EBENEZER` (Fezziwig's warehouse) never shares
        // a text unit with `EBENEZER SCROOGE` (the opening, the gravestone),
        // but does with `SCROOGE`, which is him; `JACOB` meets `JACOB MARLEY`.
        let found = resolve(&[
            ("EBENEZER", &[10, 11]),
            ("EBENEZER SCROOGE", &[0, 30]),
            ("SCROOGE", &[0, 5, 10, 11, 30]),
            ("JACOB", &[2, 3]),
            ("JACOB MARLEY", &[2]),
            ("MARLEY", &[1, 2]),
        ]);
        assert!(merged(&found, "EBENEZER SCROOGE", "SCROOGE"), "{found:?}");
        assert!(merged(&found, "JACOB", "JACOB MARLEY"), "{found:?}");
        assert!(merged(&found, "EBENEZER", "EBENEZER SCROOGE"), "{found:?}");
    }

    #[test]
    fn a_given_name_that_never_meets_the_person_or_names_two_people_stays_apart() {
        // Never where any name of the person is.
        let found = resolve(&[("EBENEZER", &[10]), ("EBENEZER SCROOGE", &[0]), ("SCROOGE", &[0, 5])]);
        assert!(!merged(&found, "EBENEZER", "EBENEZER SCROOGE"), "{found:?}");
        // Two people with that given name: merged with neither.
        let found = resolve(&[
            ("JOHN", &[10]),
            ("JOHN SMITH", &[0]),
            ("SMITH", &[0, 10]),
            ("JOHN BROWN", &[20]),
            ("BROWN", &[10, 20]),
        ]);
        assert!(!merged(&found, "JOHN", "JOHN SMITH") && !merged(&found, "JOHN", "JOHN BROWN"), "{found:?}");
    }
}
