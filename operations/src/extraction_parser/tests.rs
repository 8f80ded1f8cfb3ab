use super::*;
use proptest::prelude::*;

fn parse(text: &str) -> Extraction {
    parse_graph_records(text, &Delimiters::default())
}

fn names(x: &Extraction) -> Vec<&str> {
    x.entities.iter().map(|e| e.name.as_str()).collect()
}

fn pairs(x: &Extraction) -> Vec<(&str, &str, f64)> {
    x.relationships.iter().map(|r| (r.source.as_str(), r.target.as_str(), r.strength)).collect()
}

const GOOD: &str = r#"("entity"<|>EBENEZER SCROOGE<|>PERSON<|>Ebenezer Scrooge is a cold, miserly businessman who owns a counting-house in London)
##
("entity"<|>BOB CRATCHIT<|>PERSON<|>Bob Cratchit is Scrooge's underpaid clerk)
##
("entity"<|>JACOB MARLEY<|>PERSON<|>Jacob Marley was Scrooge's business partner, dead seven years, who returns as a ghost)
##
("entity"<|>LONDON<|>GEO<|>London is the city where Scrooge lives and works)
##
("relationship"<|>BOB CRATCHIT<|>EBENEZER SCROOGE<|>Bob Cratchit works as a clerk for Ebenezer Scrooge<|>9)
##
("relationship"<|>JACOB MARLEY<|>EBENEZER SCROOGE<|>Jacob Marley was Scrooge's partner and warns him as a ghost<|>8)
##
("relationship"<|>EBENEZER SCROOGE<|>LONDON<|>Scrooge's counting-house is in London<|>4)
<|COMPLETE|>"#;

#[test]
fn default_delimiters() {
    let d = Delimiters::default();
    assert_eq!((d.tuple.as_str(), d.record.as_str(), d.completion.as_str()), ("<|>", "##", "<|COMPLETE|>"));
}

#[test]
fn well_formed_output() {
    let x = parse(GOOD);
    assert_eq!(names(&x), ["EBENEZER SCROOGE", "BOB CRATCHIT", "JACOB MARLEY", "LONDON"]);
    assert_eq!(x.entities[3].entity_type, "GEO");
    assert_eq!(x.entities[1].description, "Bob Cratchit is Scrooge's underpaid clerk");
    assert_eq!(
        pairs(&x),
        [
            ("BOB CRATCHIT", "EBENEZER SCROOGE", 9.0),
            ("JACOB MARLEY", "EBENEZER SCROOGE", 8.0),
            ("EBENEZER SCROOGE", "LONDON", 4.0)
        ]
    );
    assert_eq!(x.relationships[2].description, "Scrooge's counting-house is in London");
    assert_eq!((x.dropped, x.repaired), (0, 0));
}

#[test]
fn records_on_one_line_and_newline_separated() {
    let one_line = GOOD.replace('\n', "");
    let x = parse(&one_line);
    assert_eq!((x.entities.len(), x.relationships.len(), x.dropped, x.repaired), (4, 3, 0, 0));
    let newline_only = GOOD.replace("##\n", "");
    let x = parse(&newline_only);
    assert_eq!((x.entities.len(), x.relationships.len(), x.dropped, x.repaired), (4, 3, 0, 0));
    // Adjacent records with neither a record delimiter nor a newline.
    let glued = GOOD.replace("\n##\n", "");
    let x = parse(&glued);
    assert_eq!((x.entities.len(), x.relationships.len(), x.dropped, x.repaired), (4, 3, 0, 0));
}

#[test]
fn completion_and_anything_after_it_ignored() {
    let text = format!("{GOOD}\n(\"entity\"<|>AFTER<|>PERSON<|>should not appear)\nThanks!");
    let x = parse(&text);
    assert!(!names(&x).contains(&"AFTER"));
    let lower = GOOD.replace("<|COMPLETE|>", "<|complete|>\n(\"entity\"<|>AFTER<|>PERSON<|>no)");
    assert!(!names(&parse(&lower)).contains(&"AFTER"));
}

#[test]
fn chatty_preamble_and_markdown_fences() {
    let text = format!(
        "Sure! Here are the entities and relationships I found in the text:\n\n```\n{GOOD}\n```\n\nLet me know if you need anything else."
    );
    let x = parse(&text);
    assert_eq!((x.entities.len(), x.relationships.len(), x.dropped, x.repaired), (4, 3, 0, 0));
    // Preamble on the same line as the first record, bullets, headings.
    let text = "Output: (\"entity\"<|>FRED<|>PERSON<|>Fred is Scrooge's nephew)\n\
                ## Relationships:\n\
                - (\"relationship\"<|>FRED<|>EBENEZER SCROOGE<|>Fred invites his uncle to dinner<|>7)\n\
                1. (\"entity\"<|>EBENEZER SCROOGE<|>PERSON<|>A miser)\n";
    let x = parse(text);
    assert_eq!(names(&x), ["FRED", "EBENEZER SCROOGE"]);
    assert_eq!(pairs(&x), [("FRED", "EBENEZER SCROOGE", 7.0)]);
    assert_eq!((x.dropped, x.repaired), (0, 0));
}

#[test]
fn quoted_and_unquoted_fields() {
    let text = r#"("entity"<|>"Bob Cratchit"<|>"PERSON"<|>"Scrooge's clerk")##(entity<|>'Tiny Tim'<|>PERSON<|>Bob's youngest son)##("relationship"<|>"Tiny Tim"<|>"bob cratchit"<|>"Tim is Bob's son"<|>"10")"#;
    let x = parse(text);
    assert_eq!(names(&x), ["BOB CRATCHIT", "TINY TIM"]);
    assert_eq!(x.entities[0].description, "Scrooge's clerk");
    assert_eq!(x.entities[0].entity_type, "PERSON");
    assert_eq!(pairs(&x), [("TINY TIM", "BOB CRATCHIT", 10.0)]);
    assert_eq!(x.relationships[0].description, "Tim is Bob's son");
    assert_eq!((x.dropped, x.repaired), (0, 0));
}

#[test]
fn stray_whitespace_and_newlines_inside_records() {
    let text = "(  \"entity\" <|>  EBENEZER   SCROOGE <|> PERSON <|>\n  A squeezing, wrenching, grasping,\n scraping, clutching, covetous old sinner\n)\n##\n(\"relationship\"<|>EBENEZER SCROOGE\n<|>JACOB MARLEY<|>Partners in business\n<|> 8 )";
    let x = parse(text);
    assert_eq!(names(&x), ["EBENEZER SCROOGE"]);
    assert_eq!(x.entities[0].description, "A squeezing, wrenching, grasping, scraping, clutching, covetous old sinner");
    assert_eq!(pairs(&x), [("EBENEZER SCROOGE", "JACOB MARLEY", 8.0)]);
    assert_eq!((x.dropped, x.repaired), (0, 0));
}

#[test]
fn missing_closing_parenthesis_is_repaired() {
    let text = "(\"entity\"<|>BELLE<|>PERSON<|>Belle was once engaged to Scrooge (long ago)\n(\"entity\"<|>FEZZIWIG<|>PERSON<|>Scrooge's old employer)\n(\"relationship\"<|>FEZZIWIG<|>EBENEZER SCROOGE<|>Fezziwig employed young Scrooge<|>6";
    let x = parse(text);
    assert_eq!(names(&x), ["BELLE", "FEZZIWIG"]);
    assert_eq!(x.entities[0].description, "Belle was once engaged to Scrooge (long ago)");
    assert_eq!(pairs(&x), [("FEZZIWIG", "EBENEZER SCROOGE", 6.0)]);
    assert_eq!((x.dropped, x.repaired), (0, 2));
}

#[test]
fn record_type_in_any_case() {
    let text = "(ENTITY<|>A<|>PERSON<|>a)##(Entity<|>B<|>PERSON<|>b)##(\"Relationship\"<|>A<|>B<|>ab<|>3)##(relation<|>B<|>C<|>bc<|>2)##(RELATIONSHIPS<|>C<|>A<|>ca<|>1)";
    let x = parse(text);
    assert_eq!(names(&x), ["A", "B"]);
    assert_eq!(pairs(&x), [("A", "B", 3.0), ("B", "C", 2.0), ("C", "A", 1.0)]);
    assert_eq!((x.dropped, x.repaired), (0, 0));
}

#[test]
fn lowercase_entity_type_is_repaired() {
    let x = parse("(\"entity\"<|>Scrooge<|>person<|>a miser)##(\"entity\"<|>London<|>Geo<|>a city)");
    assert_eq!(names(&x), ["SCROOGE", "LONDON"]);
    assert_eq!(x.entities[0].entity_type, "PERSON");
    assert_eq!(x.entities[1].entity_type, "GEO");
    assert_eq!((x.dropped, x.repaired), (0, 2));
}

#[test]
fn extra_fields_and_strength_position() {
    // Old LightRAG: description, keywords, strength.
    let x = parse("(\"relationship\"<|>A<|>B<|>A knows B<|>friendship, trust<|>7)");
    assert_eq!(pairs(&x), [("A", "B", 7.0)]);
    assert_eq!(x.relationships[0].description, "A knows B");
    assert_eq!((x.dropped, x.repaired), (0, 0));
    // Junk after the strength: the last numeric field is used, repaired.
    let x = parse("(\"relationship\"<|>A<|>B<|>A knows B<|>5<|>end)");
    assert_eq!(pairs(&x), [("A", "B", 5.0)]);
    assert_eq!(x.repaired, 1);
    // Extra entity fields are ignored.
    let x = parse("(\"entity\"<|>A<|>PERSON<|>desc<|>more<|>9)");
    assert_eq!(x.entities[0].description, "desc");
    assert_eq!((x.dropped, x.repaired), (0, 0));
}

#[test]
fn bad_or_missing_strength_defaults_to_one() {
    let text = "(\"relationship\"<|>A<|>B<|>ab<|>strong)\n(\"relationship\"<|>B<|>C<|>bc)\n(\"relationship\"<|>C<|>D<|>cd<|>8/10)\n(\"relationship\"<|>D<|>E<|>de<|>NaN)\n(\"relationship\"<|>E<|>F<|>ef<|>**6**)\n(\"relationship\"<|>F<|>G<|>7.5)";
    let x = parse(text);
    assert_eq!(
        pairs(&x),
        [("A", "B", 1.0), ("B", "C", 1.0), ("C", "D", 8.0), ("D", "E", 1.0), ("E", "F", 6.0), ("F", "G", 7.5)]
    );
    assert_eq!(x.relationships[5].description, "");
    assert_eq!((x.dropped, x.repaired), (0, 5));
}

#[test]
fn unusable_records_are_dropped() {
    let text = "(\"entity\"<|><|>PERSON<|>no name)\n(\"entity\"<|>\"\"<|>PERSON<|>quoted empty name)\n(\"entity\"<|>LONELY)\n(\"relationship\"<|>A<|>A<|>self loop<|>5)\n(\"relationship\"<|>A<|><|>no target<|>5)\n(\"relationship\"<|>A)\n(\"widget\"<|>X<|>Y<|>Z<|>W)\n(\"entity\" BROKEN PERSON no delimiters)\n(\"entity\"<|>OK<|>PERSON<|>fine)";
    let x = parse(text);
    assert_eq!(names(&x), ["OK"]);
    assert!(x.relationships.is_empty());
    assert_eq!((x.dropped, x.repaired), (8, 0));
}

#[test]
fn missing_record_type_is_inferred() {
    let x =
        parse("(SCROOGE<|>PERSON<|>A miser)##(SCROOGE<|>MARLEY<|>Partners<|>8)##(entitiy<|>MARLEY<|>PERSON<|>A ghost)");
    assert_eq!(names(&x), ["SCROOGE", "MARLEY"]);
    assert_eq!(pairs(&x), [("SCROOGE", "MARLEY", 8.0)]);
    assert_eq!((x.dropped, x.repaired), (0, 3));
}

#[test]
fn lightrag_new_format_detected_automatically() {
    let text = "entity<|#|>Alex<|#|>person<|#|>Alex is a character who experiences frustration.\n\
                entity<|#|>Taylor<|#|>person<|#|>Taylor is portrayed with authoritarian certainty.\n\
                relation<|#|>Alex<|#|>Taylor<|#|>power dynamics, observation<|#|>Alex observes Taylor's authoritarian behavior.\n\
                relation<|#|>Taylor<|#|>Jordan<|#|>shared goals<|#|>\n\
                <|COMPLETE|>";
    let x = parse(text);
    assert_eq!(names(&x), ["ALEX", "TAYLOR"]);
    assert_eq!(x.entities[0].entity_type, "PERSON");
    assert_eq!(pairs(&x), [("ALEX", "TAYLOR", 1.0), ("TAYLOR", "JORDAN", 1.0)]);
    assert_eq!(x.relationships[0].description, "Alex observes Taylor's authoritarian behavior.");
    // Empty description: the keywords stand in.
    assert_eq!(x.relationships[1].description, "shared goals");
    assert_eq!((x.dropped, x.repaired), (0, 0));
    // Same with the caller's LightRAG delimiters.
    let d = Delimiters { tuple: "<|#|>".into(), record: "\n".into(), completion: "<|COMPLETE|>".into() };
    let y = parse_graph_records(text, &d);
    assert_eq!(x, y);
}

#[test]
fn old_lightrag_content_keywords_ignored() {
    let text = "(\"entity\"<|>\"Alex\"<|>\"person\"<|>\"Alex is frustrated.\")##\n(\"content_keywords\"<|>\"power dynamics, discovery\")<|COMPLETE|>";
    let x = parse(text);
    assert_eq!(names(&x), ["ALEX"]);
    assert_eq!(x.dropped, 0);
}

#[test]
fn delimiter_spacing_tolerated() {
    let x = parse("(\"entity\"< | >A<| >PERSON< |>desc)##(\"relationship\" <|> A <|> B <|> ab <|> 2)");
    assert_eq!(names(&x), ["A"]);
    assert_eq!(x.entities[0].description, "desc");
    assert_eq!(pairs(&x), [("A", "B", 2.0)]);
}

#[test]
fn full_width_bar_accepted() {
    let x = parse(
        "(\"entity\"<\u{FF5C}>A<\u{FF5C}>PERSON<\u{FF5C}>desc)\n<\u{FF5C}COMPLETE\u{FF5C}>\n(\"entity\"<|>B<|>P<|>d)",
    );
    assert_eq!(names(&x), ["A"]);
    assert_eq!(x.entities[0].description, "desc");
}

fn fixture(name: &str) -> Extraction {
    let text = match name {
        "gpt_clean" => include_str!("../../fixtures/extraction/gpt_clean.txt"),
        "llama_chatty" => include_str!("../../fixtures/extraction/llama_chatty.txt"),
        "small_model_broken" => include_str!("../../fixtures/extraction/small_model_broken.txt"),
        "lightrag_zh" => include_str!("../../fixtures/extraction/lightrag_zh.txt"),
        _ => unreachable!(),
    };
    parse(text)
}

#[test]
fn fixture_gpt_clean() {
    let x = fixture("gpt_clean");
    assert_eq!(names(&x), ["HALVARD PORT AUTHORITY", "INES OKAFOR", "BRENNICK", "COASTAL DEVELOPMENT BANK"]);
    assert_eq!(x.relationships.len(), 3);
    assert_eq!((x.dropped, x.repaired), (0, 0));
}

#[test]
fn fixture_llama_chatty() {
    let x = fixture("llama_chatty");
    assert_eq!(names(&x), ["TOMAS REYES", "LUMEN SYMPOSIUM", "KESTREL SENSOR", "MEI LINDQVIST"]);
    assert_eq!(x.entities[2].entity_type, "TECHNOLOGY");
    assert_eq!(
        x.entities[2].description,
        "The Kestrel sensor is a low-power chip that detects methane leaks; its design builds on research in thin-film optics"
    );
    assert_eq!(
        pairs(&x),
        [
            ("TOMAS REYES", "KESTREL SENSOR", 8.0),
            ("TOMAS REYES", "LUMEN SYMPOSIUM", 5.0),
            ("MEI LINDQVIST", "TOMAS REYES", 1.0)
        ]
    );
    assert_eq!((x.dropped, x.repaired), (0, 1));
}

#[test]
fn fixture_small_model_broken() {
    let x = fixture("small_model_broken");
    assert_eq!(names(&x), ["HALVARD PORT AUTHORITY", "INES OKAFOR", "BRENNICK", "BRENNICK"]);
    assert_eq!(x.entities[0].entity_type, "ORGANIZATION");
    assert_eq!(x.entities[0].description, "The port authority of Halvard");
    assert_eq!(x.entities[2].description, "A town (on the coast)");
    assert_eq!(x.entities[3].description, "");
    assert_eq!(
        pairs(&x),
        [
            ("INES OKAFOR", "HALVARD PORT AUTHORITY", 9.0),
            ("INES OKAFOR", "BRENNICK", 1.0),
            ("COASTAL DEVELOPMENT BANK", "HALVARD PORT AUTHORITY", 8.0)
        ]
    );
    assert_eq!(x.relationships[2].description, "The bank lends money to the port authority");
    assert_eq!((x.dropped, x.repaired), (3, 5));
}

#[test]
fn fixture_lightrag_chinese() {
    let x = fixture("lightrag_zh");
    assert_eq!(names(&x), ["李白", "杜甫", "长安"]);
    assert_eq!(x.entities[2].entity_type, "LOCATION");
    assert_eq!(x.entities[0].description, "李白是唐代最著名的浪漫主义诗人之一，被后人誉为“诗仙”。");
    assert_eq!(pairs(&x), [("李白", "杜甫", 1.0), ("李白", "长安", 1.0), ("杜甫", "长安", 1.0)]);
    assert_eq!(x.relationships[0].description, "李白与杜甫在洛阳相识，结下深厚友谊。");
    assert_eq!((x.dropped, x.repaired), (0, 0));
}

#[test]
fn default_delimiters_recognised_when_callers_differ() {
    let d = Delimiters { tuple: "{TD}".into(), record: "{RD}".into(), completion: "{CD}".into() };
    // The text uses the caller's delimiters.
    let x = parse_graph_records(
        "(\"entity\"{TD}A{TD}PERSON{TD}a){RD}(\"relationship\"{TD}A{TD}B{TD}ab{TD}4){CD}(\"entity\"{TD}Z{TD}P{TD}z)",
        &d,
    );
    assert_eq!(names(&x), ["A"]);
    assert_eq!(pairs(&x), [("A", "B", 4.0)]);
    // The model ignored them and used GraphRAG's defaults.
    let x = parse_graph_records(GOOD, &d);
    assert_eq!((x.entities.len(), x.relationships.len(), x.dropped), (4, 3, 0));
    // A caller delimiter that occurs inside the default one does not split it.
    let bar = Delimiters { tuple: "|".into(), ..Delimiters::default() };
    let x = parse_graph_records(GOOD, &bar);
    assert_eq!((x.entities.len(), x.relationships.len(), x.dropped), (4, 3, 0));
    let x = parse_graph_records("(\"entity\"|A|PERSON|a)##(\"relationship\"|A|B|ab|4)", &bar);
    assert_eq!(names(&x), ["A"]);
    assert_eq!(pairs(&x), [("A", "B", 4.0)]);
}

#[test]
fn small_model_messy_output() {
    // Qwen-0.5B-style: numbered, bold record types, smart quotes, a missing
    // paren, Chinese names, a trailing explanation.
    let text = "Here is the extracted information:\n\n\
        1. (**entity**<|>“李白”<|>PERSON<|>李白是唐代诗人)\n\
        2. (**entity**<|>长安<|>geo<|>Chang'an, capital of the Tang dynasty\n\
        3. (**relationship**<|>李白<|>长安<|>Li Bai lived in Chang'an for a time<|>relationship strength: 6)\n\
        4. (**relationship**<|>李白<|>李白<|>self<|>3)\n\n\
        Note: I have extracted all entities.\n";
    let x = parse(text);
    assert_eq!(names(&x), ["李白", "长安"]);
    assert_eq!(x.entities[0].description, "李白是唐代诗人");
    assert_eq!(x.entities[1].entity_type, "GEO");
    assert_eq!(x.entities[1].description, "Chang'an, capital of the Tang dynasty");
    assert_eq!(pairs(&x), [("李白", "长安", 6.0)]);
    // Repaired: lowercase type + missing paren (one count), bad strength; dropped: self loop.
    assert_eq!((x.dropped, x.repaired), (1, 2));
}

#[test]
fn missing_delimiters_between_records() {
    // The model forgot the record delimiter and one record lost its parens.
    let text = "(\"entity\"<|>A<|>PERSON<|>a) (\"entity\"<|>B<|>PERSON<|>b)\n\"entity\"<|>C<|>PERSON<|>c\n(\"relationship\"<|>A<|>C<|>ac<|>2)";
    let x = parse(text);
    assert_eq!(names(&x), ["A", "B", "C"]);
    assert_eq!(pairs(&x), [("A", "C", 2.0)]);
    assert_eq!(x.dropped, 0);
}

#[test]
fn normalize_name_cases() {
    assert_eq!(normalize_name("  \"Ebenezer   Scrooge\" "), "EBENEZER SCROOGE");
    assert_eq!(normalize_name("'bob\ncratchit'"), "BOB CRATCHIT");
    assert_eq!(normalize_name("“Marley”"), "MARLEY");
    assert_eq!(normalize_name("O'Brien"), "O'BRIEN");
    assert_eq!(normalize_name("москва"), "МОСКВА");
    assert_eq!(normalize_name("\"\""), "");
    assert_eq!(normalize_name("a\u{0}b"), "AB");
}

#[test]
fn claims() {
    let text = "(NORTHWIND LOGISTICS<|>MARITIME SAFETY BOARD<|>FALSIFIED RECORDS<|>TRUE<|>2021-01-01T00:00:00<|>2022-06-30T00:00:00<|>Northwind Logistics falsified inspection records<|>A report published on 2023-03-14 states that Northwind Logistics was fined (heavily).)\n##\n(dara quinn<|><|>falsified records<|>suspected<|>NONE<|>NONE<|>Dara Quinn is under investigation<|>The report adds...\n##\n(<|>X<|>Y<|>TRUE)\n##\n(ONLY<|>TWO)\n<|COMPLETE|>\n(AFTER<|>X<|>Y<|>TRUE)";
    let (claims, dropped) = parse_claim_records(text, &Delimiters::default());
    assert_eq!(dropped, 2);
    assert_eq!(claims.len(), 2);
    assert_eq!(claims[0].subject, "NORTHWIND LOGISTICS");
    assert_eq!(claims[0].object, "MARITIME SAFETY BOARD");
    assert_eq!(claims[0].status, "TRUE");
    assert_eq!(claims[0].start_date, "2021-01-01T00:00:00");
    assert_eq!(claims[0].end_date, "2022-06-30T00:00:00");
    assert_eq!(
        claims[0].source_text,
        "A report published on 2023-03-14 states that Northwind Logistics was fined (heavily)."
    );
    assert_eq!(claims[1].subject, "DARA QUINN");
    assert_eq!(claims[1].object, "NONE");
    assert_eq!(claims[1].claim_type, "FALSIFIED RECORDS");
    assert_eq!(claims[1].status, "SUSPECTED");
    assert_eq!(claims[1].source_text, "The report adds...");
}

#[test]
fn claims_multiline_without_record_delimiter() {
    let text = "(A<|>B<|>FRAUD<|>TRUE<|>NONE<|>NONE<|>A defrauded\nB over years<|>quote one)\n(C<|>NONE<|>FRAUD<|>FALSE<|>NONE<|>NONE<|>desc<|>quote two)";
    let (claims, dropped) = parse_claim_records(text, &Delimiters::default());
    assert_eq!(dropped, 0);
    assert_eq!(claims.len(), 2);
    assert_eq!(claims[0].description, "A defrauded B over years");
    assert_eq!(claims[1].subject, "C");
}

#[test]
fn degenerate_inputs() {
    for t in
        ["", "(", ")", "<|>", "##", "<|COMPLETE|>", "(\"entity\"", "((((", "<|><|><|>", "entity<|#|>", "\u{0}", "(<|>)"]
    {
        let x = parse(t);
        assert!(x.entities.is_empty() && x.relationships.is_empty(), "{t:?}");
        let _ = parse_claim_records(t, &Delimiters::default());
    }
    let weird = Delimiters { tuple: String::new(), record: " ".into(), completion: String::new() };
    let x = parse_graph_records(GOOD, &weird);
    assert_eq!(x.entities.len(), 4);
}

#[test]
fn linear_time_on_large_input() {
    let mut big = String::new();
    for i in 0..20_000 {
        big.push_str(&format!("(\"entity\"<|>E{i}<|>PERSON<|>desc {i})##\n"));
    }
    big.push_str(&"(".repeat(100_000));
    big.push_str(&"<|>".repeat(100_000));
    let start = std::time::Instant::now();
    let x = parse(&big);
    assert_eq!(x.entities.len(), 20_000);
    assert!(start.elapsed().as_secs() < 20);
}

/// Valid output to mutate in the property tests.
fn valid_output() -> String {
    let mut s = GOOD.to_string();
    s.push_str("\nentity<|#|>Alex<|#|>person<|#|>desc\nrelation<|#|>Alex<|#|>Bo<|#|>kw<|#|>desc\n");
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_text(s in ".{0,400}") {
        let x = parse(&s);
        for e in &x.entities {
            prop_assert!(!e.name.is_empty());
        }
        for r in &x.relationships {
            prop_assert!(r.source != r.target && !r.source.is_empty() && !r.target.is_empty());
            prop_assert!(r.strength.is_finite());
        }
        let _ = parse_claim_records(&s, &Delimiters::default());
    }

    #[test]
    fn never_panics_on_delimiter_soup(parts in proptest::collection::vec(
        prop_oneof![
            Just("<|>".to_string()), Just("<|#|>".to_string()), Just("##".to_string()),
            Just("(".to_string()), Just(")".to_string()), Just("\"".to_string()),
            Just("\n".to_string()), Just("entity".to_string()), Just("relationship".to_string()),
            Just("<|COMPLETE|>".to_string()), Just("7".to_string()), "[a-zA-Zé李 ]{0,6}",
        ], 0..60)) {
        let s: String = parts.concat();
        let _ = parse(&s);
        let _ = parse_claim_records(&s, &Delimiters::default());
    }

    #[test]
    fn never_panics_on_mutated_output(
        cut in 0usize..2000,
        edits in proptest::collection::vec((0usize..2000, 0usize..8, ".{0,3}"), 0..12),
    ) {
        let mut s = valid_output();
        for (pos, len, insert) in edits {
            let mut p = pos.min(s.len());
            while !s.is_char_boundary(p) { p -= 1; }
            let mut e = (p + len).min(s.len());
            while !s.is_char_boundary(e) { e -= 1; }
            s.replace_range(p..e, &insert);
        }
        let mut c = cut.min(s.len());
        while !s.is_char_boundary(c) { c -= 1; }
        let x = parse(&s[..c]);
        for r in &x.relationships {
            prop_assert!(r.source != r.target && !r.source.is_empty());
        }
        let _ = parse_claim_records(&s[..c], &Delimiters::default());
    }

    #[test]
    fn truncation_keeps_earlier_records(cut in 0usize..1200) {
        let s = GOOD;
        let mut c = cut.min(s.len());
        while !s.is_char_boundary(c) { c -= 1; }
        let x = parse(&s[..c]);
        let full = parse(s);
        // Every entity parsed from a prefix is a prefix of the full list,
        // except possibly the last (truncated) one.
        let n = x.entities.len();
        prop_assert!(n <= full.entities.len());
        for i in 0..n.saturating_sub(1) {
            prop_assert_eq!(&x.entities[i], &full.entities[i]);
        }
    }
}
