use super::*;
use crate::storage::counting::CountingStore;
use crate::storage::object::{Listed, ObjectLocation};

fn key(n: u32) -> String {
    crate::llm::ResponseCache::key(&[&n.to_string()])
}

/// A segment's answers by key, the later line of a key replacing the
/// earlier; and how many lines do not read.
fn read_segment(segment: &Bytes) -> (HashMap<String, Bytes>, usize) {
    let mut answers = HashMap::new();
    let damaged = segment_lines(segment, |key, _, answer| {
        answers.insert(key.to_string(), answer);
    });
    (answers, damaged)
}

#[test]
fn segments_read_back_line_by_line_and_a_torn_line_is_counted_not_read() {
    let (a, b) = (key(1), key(2));
    let segment = Bytes::from(format!("{a}\t[1,2]\n{b}\t\"x\"\n{a}\t[3]\nnot a line\n{b}\t\"torn"));
    let (answers, damaged) = read_segment(&segment);
    assert_eq!(damaged, 2, "the line without a key and the unterminated one");
    assert_eq!(answers[&a], Bytes::from_static(b"[3]"), "a later line replaces an earlier one");
    assert_eq!(answers[&b], Bytes::from_static(b"\"x\""));
    assert_eq!(read_segment(&Bytes::new()), (HashMap::new(), 0));
}

/// A cache on `bucket` (of moto), counting its requests; written only
/// when flushed or full (its timer is an hour).
fn cache_on(bucket: &Arc<dyn object_store::ObjectStore>) -> (SegmentAnswers, Arc<CountingStore>) {
    let store = Arc::new(CountingStore::new(bucket.clone()));
    let at = ObjectLocation::new(store.clone(), "project/cache", "s3://bucket/project/cache").unwrap();
    (SegmentAnswers::flushed_every(Arc::new(at), Duration::from_secs(3600)), store)
}

/// Every object of `bucket`'s cache, with its contents.
fn objects(bucket: &Arc<dyn object_store::ObjectStore>) -> Vec<(String, Bytes)> {
    let at = ObjectLocation::new(bucket.clone(), "project/cache", "s3://bucket/project/cache").unwrap();
    let listed: Vec<Listed> = at.list("").unwrap();
    listed.into_iter().map(|l| (l.key.clone(), at.get(&l.key).unwrap().unwrap())).collect()
}

fn segments_of(bucket: &Arc<dyn object_store::ObjectStore>, partition: &str) -> Vec<String> {
    let prefix = format!("{partition}/{SEGMENTS}/");
    objects(bucket).into_iter().map(|(name, _)| name).filter(|n| n.starts_with(&prefix)).collect()
}

fn answer(found: Option<Found>) -> Option<Bytes> {
    found.map(|f| f.bytes)
}

#[test]
fn a_later_reader_reads_a_partition_in_requests_per_segment_not_per_answer() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("segments");
    let (writer, written) = cache_on(&bucket);
    let extract = writer.partition("extract_graph");
    for n in 0..50 {
        extract.put(&key(n), Bytes::from(format!("[{n}]")));
    }
    assert_eq!(answer(extract.get(&key(7))), Some(Bytes::from_static(b"[7]")), "read back before written");
    assert_eq!(written.counts().puts, 0, "kept in memory until flushed");
    writer.flush();
    extract.put(&key(50), Bytes::from_static(b"[50]"));
    writer.flush();
    writer.flush();
    assert_eq!(written.counts().puts, 2, "one segment per flush with answers waiting");

    let (reader, read) = cache_on(&bucket);
    let extract = reader.partition("extract_graph");
    for n in 0..=50 {
        assert_eq!(answer(extract.get(&key(n))), Some(Bytes::from(format!("[{n}]"))));
    }
    assert!(answer(extract.get(&key(99))).is_none());
    assert!(answer(extract.get(&key(98))).is_none());
    let counts = read.counts();
    // The partition's segments listed and read; the misses list the root's
    // segments (its fallback) once, and nothing else.
    assert_eq!((counts.lists, counts.gets, counts.listed), (2, 2, 2), "{counts:?}");
    assert!(answer(reader.get(&key(1))).is_none(), "the root does not read a partition's answers");
}

#[test]
fn later_segments_replace_earlier_answers() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("later");
    let replaced = key(2);
    let (first, _) = cache_on(&bucket);
    first.partition("summarize").put(&replaced, Bytes::from_static(b"1"));
    first.flush();
    // A writer's name sorts by its start time.
    std::thread::sleep(Duration::from_millis(2));
    let (second, _) = cache_on(&bucket);
    second.partition("summarize").put(&replaced, Bytes::from_static(b"2"));
    drop(second); // dropping the cache writes what it holds
    let (reader, _) = cache_on(&bucket);
    assert_eq!(answer(reader.partition("summarize").get(&replaced)), Some(Bytes::from_static(b"2")));
}

#[test]
fn answers_are_written_once_enough_wait_without_a_flush() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("full");
    let (writer, written) = cache_on(&bucket);
    for n in 0..FLUSH_ANSWERS as u32 {
        writer.put(&key(n), Bytes::from_static(b"0"));
    }
    assert_eq!(written.counts().puts, 1);
    let (reader, _) = cache_on(&bucket);
    assert!(answer(reader.get(&key(0))).is_some());
}

#[test]
fn a_writer_folds_its_own_segments_keeping_every_answer_and_the_later_one_of_a_key() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("folded");
    let (other, _) = cache_on(&bucket);
    other.partition("query").put(&key(1000), Bytes::from_static(b"\"other\""));
    other.flush();
    // Bounded, so that the answers it folds are unloaded: found again at their folded lines.
    let (writer, requests) = cache_on(&bucket);
    writer.bound(40 << 10);
    let query = writer.partition("query");
    for n in 0..FOLD_SEGMENTS as u32 {
        query.put(&key(n), long_answer(n));
        if n == 3 {
            query.put(&key(0), Bytes::from_static(b"[\"again\"]"));
        }
        writer.flush();
    }
    // Folded in runs of at most a quarter of the bound (10 KiB, 9 of these).
    let segments = segments_of(&bucket, "query");
    assert!(segments.len() <= 10, "{segments:?}");
    assert!(segments.iter().any(|s| s.contains(&other.shared.writer)), "the other writer's is left");
    assert_eq!(requests.counts().deletes as usize, FOLD_SEGMENTS + 1 - segments.len() + folded(&segments));
    for n in 1..FOLD_SEGMENTS as u32 {
        assert_eq!(answer(query.get(&key(n))), Some(long_answer(n)), "answer {n}, held by the folder");
    }
    assert_eq!(answer(query.get(&key(0))), Some(Bytes::from_static(b"[\"again\"]")));
    assert!(writer.held_bytes() <= 40 << 10);
    let (reader, read) = cache_on(&bucket);
    let query = reader.partition("query");
    for n in 1..FOLD_SEGMENTS as u32 {
        assert_eq!(answer(query.get(&key(n))), Some(long_answer(n)), "answer {n}, read by a later reader");
    }
    assert_eq!(answer(query.get(&key(0))), Some(Bytes::from_static(b"[\"again\"]")), "the later answer");
    assert_eq!(answer(query.get(&key(1000))), Some(Bytes::from_static(b"\"other\"")));
    assert_eq!(read.counts().gets as usize, segments.len());
}

/// The segments of `names` that fold others.
fn folded(names: &[String]) -> usize {
    names.iter().filter(|n| n.ends_with(&format!("-0001{SEGMENT_SUFFIX}"))).count()
}

#[test]
fn a_reader_never_rewrites_or_deletes_another_writer_s_segments() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("readonly");
    // More segments than a writer folds, each of another writer.
    for n in 0..FOLD_SEGMENTS as u32 + 2 {
        let (writer, _) = cache_on(&bucket);
        writer.partition("query").put(&key(n), long_answer(n));
    }
    let before = objects(&bucket);
    for bound in [None, Some(20 << 10)] {
        let (reader, read) = cache_on(&bucket);
        if let Some(bound) = bound {
            reader.bound(bound);
        }
        let query = reader.partition("query");
        for n in 0..FOLD_SEGMENTS as u32 + 2 {
            assert_eq!(answer(query.get(&key(n))), Some(long_answer(n)), "answer {n}");
        }
        reader.flush();
        drop(reader);
        let counts = read.counts();
        assert_eq!((counts.puts, counts.deletes, counts.copies), (0, 0, 0), "{counts:?}");
    }
    assert_eq!(objects(&bucket), before);
}

#[test]
fn a_reader_that_finds_a_listed_segment_gone_lists_again() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("gone");
    let (writer, _) = cache_on(&bucket);
    writer.partition("query").put(&key(1), Bytes::from_static(b"1"));
    drop(writer);
    let (reader, read) = cache_on(&bucket);
    let partition = reader.shared.partition("query");
    // As listed before its writer folded it away.
    let gone = [(format!("{SEGMENTS}/0-gone{SEGMENT_SUFFIX}"), 10)];
    assert!(!partition.read_listed(&reader.shared, &gone, false).unwrap(), "gone: list again");
    assert!(partition.read_listed(&reader.shared, &gone, true).unwrap(), "the last listing: skipped");
    assert_eq!(read.counts().lists, 0);
    assert_eq!(answer(reader.partition("query").get(&key(1))), Some(Bytes::from_static(b"1")));
}

#[test]
fn a_bounded_reader_asks_again_an_unloaded_answer_its_writer_folded_away() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("foldedaway");
    let (writer, _) = cache_on(&bucket);
    let query = writer.partition("query");
    for n in 0..FOLD_SEGMENTS as u32 - 1 {
        query.put(&key(n), long_answer(n));
        writer.flush();
    }
    let (server, _) = cache_on(&bucket);
    server.bound(20 << 10);
    let served = server.partition("query");
    assert_eq!(answer(served.get(&key(1))), Some(long_answer(1)));
    query.put(&key(99), long_answer(99));
    writer.flush();
    assert_eq!(segments_of(&bucket, "query").len(), 1, "folded");
    assert!(answer(served.get(&key(0))).is_none(), "its line is gone: a miss, not a wrong answer");
    assert_eq!(answer(served.get(&key(1))), Some(long_answer(1)), "still loaded");
}

#[test]
fn small_consecutive_segments_are_folded_in_runs_of_at_most_a_flush() {
    let (mb, limit) = (1 << 20, FLUSH_BYTES as u64);
    assert_eq!(fold_groups(&[1, 2, 3], limit), vec![(0..3)]);
    assert_eq!(fold_groups(&[1], limit), Vec::<std::ops::Range<usize>>::new());
    // A large segment is left alone and splits the runs.
    assert_eq!(fold_groups(&[1, 1, 9 * mb, 1, 1, 1], limit), [0..2, 3..6]);
    // Runs close before they pass FLUSH_BYTES (16 MiB).
    assert_eq!(fold_groups(&[6 * mb, 6 * mb, 6 * mb, 6 * mb, 1], limit), [0..2, 2..5]);
    assert_eq!(fold_groups(&[1, 9 * mb, 1], limit), Vec::<std::ops::Range<usize>>::new());
}

#[test]
fn segments_are_read_in_runs_of_at_most_the_limit() {
    assert_eq!(read_runs(&[5, 5, 5], u64::MAX), vec![(0..3)]);
    assert_eq!(read_runs(&[5, 5, 5], 10), [0..2, 2..3]);
    assert_eq!(read_runs(&[20, 5], 10), [0..1, 1..2], "one too large: alone");
    assert!(read_runs(&[], 10).is_empty());
}

#[test]
fn segment_lines_are_placed_where_they_are_written() {
    let (a, b) = (Bytes::from_static(b"[1]"), Bytes::from_static(b"\"two\""));
    let (segment, lines) = segment_of([(key(1).as_str(), &a), (key(2).as_str(), &b)].into_iter());
    let mut seen = Vec::new();
    assert_eq!(segment_lines(&segment, |k, line, answer| seen.push((k.to_string(), line, answer))), 0);
    assert_eq!(seen, [(key(1), lines[0].clone(), a), (key(2), lines[1].clone(), b)]);
    let line = &segment[lines[1].start as usize..lines[1].end as usize];
    assert_eq!(line, format!("{}\t\"two\"", key(2)).as_bytes());
}

#[test]
fn a_folded_segment_s_name_sorts_where_the_last_of_its_run_did() {
    let writer = "0000000000001-00000000000000ab";
    let name = |number, folds| segment_name(writer, OwnSegment { number, folds, bytes: 0 });
    let names = [name(4, 0), name(5, 1), name(5, 2), name(5, 0), name(6, 0)];
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, names);
}

fn long_answer(n: u32) -> Bytes {
    Bytes::from(format!("[\"{n}{}\"]", "x".repeat(1000)))
}

#[test]
fn a_bounded_cache_holds_at_most_its_bound_and_still_finds_every_answer_written() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("bounded");
    // An earlier server's answers: 400 of about 1 KB, in 4 segments.
    let (earlier, _) = cache_on(&bucket);
    for n in 0..400 {
        earlier.partition("query").put(&key(n), long_answer(n));
        if n % 100 == 99 {
            earlier.flush();
        }
    }
    drop(earlier);
    // Room for every entry (1,200 at 192 bytes) and about 300 answers.
    let budget = 512 << 10;
    let (server, requests) = cache_on(&bucket);
    let query = server.partition("query");
    query.bound(budget);
    let mut new = 1000;
    for _round in 0..2 {
        for n in 0..400 {
            assert_eq!(answer(query.get(&key(n))), Some(long_answer(n)), "answer {n}");
            assert!(answer(query.get(&key(new))).is_none());
            query.put(&key(new), long_answer(new));
            new += 1;
            assert!(server.held_bytes() <= budget, "{} bytes held", server.held_bytes());
        }
    }
    assert!(server.held_bytes() > budget / 2, "counted: {}", server.held_bytes());
    let counts = requests.counts();
    assert!(counts.gets > 400, "answers unloaded were read again, one line each: {counts:?}");
    assert!(counts.bytes_read < 3 * 400 * 1100, "a line at a time, not whole segments: {counts:?}");
    server.flush();
    let (reader, _) = cache_on(&bucket);
    let query = reader.partition("query");
    for n in (0..400).chain(1000..new) {
        assert_eq!(answer(query.get(&key(n))), Some(long_answer(n)), "answer {n}, read by a later reader");
    }
}

#[test]
fn a_bounded_cache_asked_from_several_threads_at_once_finds_every_answer() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("threads");
    let (earlier, _) = cache_on(&bucket);
    for n in 0..200 {
        earlier.partition("query").put(&key(n), long_answer(n));
    }
    earlier.flush();
    // Room for every entry (600) and about 100 answers.
    let budget = 256 << 10;
    let (server, _) = cache_on(&bucket);
    server.bound(budget);
    let query = server.partition("query");
    std::thread::scope(|scope| {
        for thread in 0..4u32 {
            let query = &query;
            scope.spawn(move || {
                for i in 0..200 {
                    let n = (i + thread * 50) % 200;
                    assert_eq!(answer(query.get(&key(n))), Some(long_answer(n)), "answer {n}");
                    if i % 2 == 0 {
                        let new = 1000 + thread * 1000 + i;
                        assert!(answer(query.get(&key(new))).is_none());
                        query.put(&key(new), long_answer(new));
                    }
                }
            });
        }
    });
    assert!(server.held_bytes() <= budget, "{} bytes held", server.held_bytes());
    server.flush();
    let (reader, _) = cache_on(&bucket);
    let query = reader.partition("query");
    let written = (0..4u32).flat_map(|t| (0..200).step_by(2).map(move |i| 1000 + t * 1000 + i));
    for n in (0..200).chain(written) {
        assert_eq!(answer(query.get(&key(n))), Some(long_answer(n)), "answer {n}, read by a later reader");
    }
}

#[test]
fn a_line_read_again_must_be_whole_and_the_key_s() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("rewritten");
    let (cache, _) = cache_on(&bucket);
    let partition = cache.shared.partition("query");
    let (k, name) = (key(1), format!("{SEGMENTS}/x{SEGMENT_SUFFIX}"));
    partition.at.put(&name, &Bytes::from(format!("{k}\t[1]\n{k}\t[2]\n"))).unwrap();
    let place = |start, len| Place { segment: Arc::from(name.as_str()), start, len };
    let second = (k.len() as u64 + 5, k.len() as u64 + 4);
    assert_eq!(partition.read_again(&k, &place(second.0, second.1)).unwrap(), Some(Bytes::from_static(b"[2]")));
    assert_eq!(partition.read_again(&key(2), &place(second.0, second.1)).unwrap(), None, "another key's line");
    // Its lines longer: the key's line at the place, cut short.
    partition.at.put(&name, &Bytes::from(format!("{k}\t[1000]\n"))).unwrap();
    assert_eq!(partition.read_again(&k, &place(0, second.1)).unwrap(), None, "not the cut line");
    // Or shorter: the place runs past its end.
    partition.at.put(&name, &Bytes::from(format!("{k}\t1\n"))).unwrap();
    assert_eq!(partition.read_again(&k, &place(0, second.1)).unwrap(), None, "not read past the end");
}

#[test]
fn a_local_cache_folder_is_imported_into_a_bucket() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("imported");
    let dir = tempfile::tempdir().unwrap();
    let file = |partition: &str, key: &str, json: &str| {
        let folder = dir.path().join(partition).join(&key[..2]);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("{key}.json")), json).unwrap();
    };
    file("", &key(1), "\"root\"");
    file("extract_graph", &key(2), "{\n  \"pretty\": true\n}");
    file("extract_graph", &key(3), "{torn");
    file("extract_graph", &key(4), "[4]");
    std::fs::write(dir.path().join("extract_graph").join("notes.txt"), "not an answer").unwrap();
    // A folder cache's own segments: copied too, after the files of older versions.
    let segments = dir.path().join("extract_graph").join(SEGMENTS);
    std::fs::create_dir_all(&segments).unwrap();
    let segment = format!("{}\t[5]\n{}\t#f32le:AACAPw==\n{}\t[torn", key(5), key(4), key(6));
    std::fs::write(segments.join(format!("w-00000000{SEGMENT_SUFFIX}")), segment).unwrap();
    let (cache, _) = cache_on(&bucket);
    let imported = import_folder(dir.path(), cache.shared.root.as_ref()).unwrap();
    assert_eq!(imported, Imported { answers: 5, segments: 2, skipped: 2 });
    let (reader, _) = cache_on(&bucket);
    assert_eq!(answer(reader.get(&key(1))), Some(Bytes::from_static(b"\"root\"")));
    let extract = reader.partition("extract_graph");
    assert_eq!(answer(extract.get(&key(2))), Some(Bytes::from_static(b"{\"pretty\":true}")), "made one line");
    assert_eq!(answer(extract.get(&key(4))), Some(Bytes::from_static(b"#f32le:AACAPw==")), "the segment's, later");
    assert_eq!(answer(extract.get(&key(5))), Some(Bytes::from_static(b"[5]")));
    assert!(answer(extract.get(&key(6))).is_none());
    assert_eq!(answer(extract.get(&key(1))), Some(Bytes::from_static(b"\"root\"")), "through the fallback");
    assert!(answer(extract.get(&key(3))).is_none());
}

#[test]
fn a_batch_that_failed_to_write_is_written_at_a_later_flush_and_a_later_answer_still_wins() {
    use crate::storage::object::testing::OutageProxy;
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let proxy = OutageProxy::start(moto.port);
    let at = moto.location_through(&proxy, "requeued", "p/cache");
    let writer = SegmentAnswers::flushed_every(Arc::new(at.clone()), Duration::from_secs(3600));
    let query = writer.partition("query");
    query.put(&key(1), Bytes::from_static(b"\"older\""));
    proxy.fail_at("PUT /requeued/p/cache/query/segments/", false, Duration::from_millis(1500));
    writer.flush();
    assert_eq!(proxy.outages(), 1);
    query.put(&key(1), Bytes::from_static(b"\"newer\""));
    // Written at a flush once the outage is over.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while at.list("query").map_or(true, |l| l.is_empty()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        writer.flush();
    }
    let reader =
        SegmentAnswers::flushed_every(Arc::new(moto.location("requeued", "p/cache")), Duration::from_secs(3600));
    assert_eq!(answer(reader.partition("query").get(&key(1))), Some(Bytes::from_static(b"\"newer\"")));
}
