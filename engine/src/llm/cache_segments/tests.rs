use super::*;
use crate::storage::counting::CountingStore;
use std::sync::mpsc;

/// Code a test runs at a point of the cache's own (each taken once).
pub(super) type Hook = Box<dyn FnOnce() + Send>;

/// Code a test runs at a point of the cache's own, each time.
pub(super) type SharedHook = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
pub(super) struct Hooks {
    /// In [`Shared::write_segment`], its segment number taken, before its PUT.
    pub before_put: Option<Hook>,
    /// In [`Partition::try_read_listing`], after its LIST.
    pub after_list: Option<Hook>,
    /// In [`Partition::get`], a segment found gone, before listing again.
    pub before_relist: Option<SharedHook>,
}

/// How long a test waits for a step of another thread at most.
const STEP: Duration = Duration::from_secs(30);

fn key(n: u32) -> String {
    crate::llm::ResponseCache::key(&[&n.to_string()])
}

#[test]
fn segments_read_back_line_by_line_and_a_torn_line_is_counted_not_read() {
    let (a, b) = (key(1), key(2));
    let segment = Bytes::from(format!("{a}\t[1,2]\n{b}\t\"x\"\n{a}\t[3]\nnot a line\n{b}\t\"torn"));
    let mut answers = HashMap::new();
    assert_eq!(read_segment(&segment, &mut answers), 2, "the line without a key and the unterminated one");
    assert_eq!(answers[&a], Bytes::from_static(b"[3]"), "a later line replaces an earlier one");
    assert_eq!(answers[&b], Bytes::from_static(b"\"x\""));
    assert_eq!(read_segment(&Bytes::new(), &mut answers), 0);
}

/// A cache on `bucket` (of moto), counting its requests; written only
/// when flushed or full (its timer is an hour).
fn cache_on(bucket: &Arc<dyn object_store::ObjectStore>) -> (ObjectAnswers, Arc<CountingStore>) {
    let store = Arc::new(CountingStore::new(bucket.clone()));
    let at = ObjectLocation::new(store.clone(), "project/cache", "s3://bucket/project/cache").unwrap();
    (ObjectAnswers::flushed_every(at, Duration::from_secs(3600)), store)
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
    let counts = read.counts();
    // The partition listed and its two segments read; the miss also
    // lists the root (its fallback) one level deep: it names the one
    // partition's folder (listed all the way down, it named the
    // partition's two segments again: 4 listed).
    assert_eq!((counts.lists, counts.gets, counts.listed), (2, 2, 3), "{counts:?}");
    assert!(answer(reader.get(&key(1))).is_none(), "the root does not read a partition's answers");
}

#[test]
fn answers_of_one_object_each_still_read_and_later_segments_replace_earlier_answers() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("older");
    let (first, _) = cache_on(&bucket);
    let (old, replaced) = (key(1), key(2));
    let single = |k: &str| format!("summarize/{}", crate::llm::cache::entry_key(k));
    first.shared.root.put(&single(&old), Bytes::from_static(b"\"single\"")).unwrap();
    first.partition("summarize").put(&replaced, Bytes::from_static(b"1"));
    first.flush();
    let (second, _) = cache_on(&bucket);
    second.partition("summarize").put(&replaced, Bytes::from_static(b"2"));
    drop(second); // dropping the cache writes what it holds
    let (reader, read) = cache_on(&bucket);
    let summarize = reader.partition("summarize");
    assert_eq!(answer(summarize.get(&old)), Some(Bytes::from_static(b"\"single\"")));
    assert_eq!(answer(summarize.get(&replaced)), Some(Bytes::from_static(b"2")), "the later writer's answer");
    assert_eq!(read.counts().gets, 3, "two segments, and the one single answer asked for");
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
fn many_segments_are_folded_into_one_keeping_the_later_answers() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("folded");
    let (writer, _) = cache_on(&bucket);
    for n in 0..FOLD_SEGMENTS as u32 {
        writer.put(&key(n), Bytes::from(format!("[{n}]")));
        writer.flush();
    }
    writer.put(&key(0), Bytes::from_static(b"[\"again\"]"));
    drop(writer);
    let segments = |store: &Arc<CountingStore>| {
        let at = ObjectLocation::new(store.clone(), "project/cache", "s3://folded").unwrap();
        at.list("").unwrap().into_iter().filter(|o| o.key.ends_with(SEGMENT_SUFFIX)).count()
    };
    let (folder, folder_store) = cache_on(&bucket);
    assert_eq!(segments(&folder_store), FOLD_SEGMENTS + 1);
    assert_eq!(answer(folder.get(&key(5))), Some(Bytes::from_static(b"[5]")));
    assert_eq!(segments(&folder_store), 1, "folded");
    let (reader, read) = cache_on(&bucket);
    for n in 1..FOLD_SEGMENTS as u32 {
        assert_eq!(answer(reader.get(&key(n))), Some(Bytes::from(format!("[{n}]"))));
    }
    assert_eq!(answer(reader.get(&key(0))), Some(Bytes::from_static(b"[\"again\"]")), "the later answer");
    assert_eq!(read.counts().gets, 1);
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
fn segments_are_read_in_runs_of_at_most_the_limit_and_fold_groups_whole() {
    assert_eq!(read_groups(&[5, 5, 5], &[], u64::MAX), [(0..3, false)]);
    assert_eq!(read_groups(&[5, 5, 5], &[], 10), [(0..2, false), (2..3, false)]);
    assert_eq!(read_groups(&[20, 5], &[], 10), [(0..1, false), (1..2, false)], "one too large: alone");
    let folds = [1..3, 4..6];
    let groups = read_groups(&[1, 1, 1, 1, 1, 1, 1], &folds, 10);
    assert_eq!(groups, [(0..1, false), (1..3, true), (3..4, false), (4..6, true), (6..7, false)]);
    assert!(read_groups(&[], &[], 10).is_empty());
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
fn the_root_is_listed_a_level_at_a_time_and_an_old_folder_only_when_a_key_in_it_is_asked() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("levels");
    let (writer, _) = cache_on(&bucket);
    for partition in ["extract_graph", "summarize"] {
        for n in 0..20 {
            writer.partition(partition).put(&key(n), Bytes::from_static(b"1"));
            if n % 10 == 9 {
                writer.flush();
            }
        }
    }
    let old = key(100);
    writer.shared.root.put(&crate::llm::cache::entry_key(&old), Bytes::from_static(b"\"old\"")).unwrap();
    drop(writer);
    let (reader, read) = cache_on(&bucket);
    let query = reader.partition("query");
    let other_folder = (200..).map(key).find(|k| k[..2] != old[..2]).unwrap();
    assert!(answer(query.get(&other_folder)).is_none());
    let counts = read.counts();
    // The query partition (empty), then the root's top: the two
    // partitions' folders and the old answer's, not their 4 segments.
    assert_eq!((counts.lists, counts.listed, counts.gets), (2, 3, 0), "{counts:?}");
    assert_eq!(answer(query.get(&old)), Some(Bytes::from_static(b"\"old\"")), "read through the fallback");
    let counts = read.counts();
    assert_eq!((counts.lists, counts.gets), (3, 1), "its folder listed, then the answer read: {counts:?}");
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

/// A bounded server (at `budget`, room for the entries and a few answers)
/// that read `FOLD_SEGMENTS - 1` segments of one answer each, the first
/// ones unloaded; then one segment more was written and another reader
/// folded them all.
fn read_by_a_bounded_server_then_folded(
    bucket: &Arc<dyn object_store::ObjectStore>,
    budget: u64,
) -> (ObjectAnswers, Arc<CountingStore>) {
    let (writer, _) = cache_on(bucket);
    let query = writer.partition("query");
    let mut write = |n: u32| {
        query.put(&key(n), long_answer(n));
        writer.flush();
    };
    (0..FOLD_SEGMENTS as u32 - 1).for_each(&mut write);
    let (server, requests) = cache_on(bucket);
    server.bound(budget);
    let served = server.partition("query");
    assert_eq!(answer(served.get(&key(FOLD_SEGMENTS as u32 - 2))), Some(long_answer(FOLD_SEGMENTS as u32 - 2)));
    write(FOLD_SEGMENTS as u32 - 1);
    let (folder, _) = cache_on(bucket);
    assert!(answer(folder.partition("query").get(&key(0))).is_some(), "read, so folded");
    (server, requests)
}

#[test]
fn a_bounded_reader_lists_again_when_another_reader_folded_the_segment_of_an_answer_it_unloaded() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("refolded");
    let budget = 20 << 10;
    let (server, _) = read_by_a_bounded_server_then_folded(&bucket, budget);
    let served = server.partition("query");
    for n in 0..FOLD_SEGMENTS as u32 - 1 {
        assert_eq!(answer(served.get(&key(n))), Some(long_answer(n)), "answer {n} after the fold");
    }
    assert!(server.held_bytes() <= budget);
}

#[test]
fn only_this_process_s_later_segments_count_as_written_since_a_listing() {
    let store = Arc::new(object_store::memory::InMemory::new());
    let at = ObjectLocation::new(store, "cache", "memory://cache").unwrap();
    let cache = ObjectAnswers::flushed_every(at, Duration::from_secs(3600));
    let (shared, writer) = (&cache.shared, &cache.shared.writer);
    assert!(shared.wrote_since(&format!("{SEGMENTS}/{writer}-00000003{SEGMENT_SUFFIX}"), 3));
    assert!(!shared.wrote_since(&format!("{SEGMENTS}/{writer}-00000002{SEGMENT_SUFFIX}"), 3));
    assert!(!shared.wrote_since(&format!("{SEGMENTS}/{writer}-00000009-folded{SEGMENT_SUFFIX}"), 3));
    assert!(shared.wrote_since(&segment_name(writer, 3, 1), 3), "a clash's name: its number");
    assert!(!shared.wrote_since(&segment_name(writer, 2, 12), 3));
    assert!(!shared.wrote_since(&format!("{SEGMENTS}/{writer}-00000009-1-folded{SEGMENT_SUFFIX}"), 3));
    assert!(!shared.wrote_since(&format!("{SEGMENTS}/0000000000000-0000000000000000-00000009{SEGMENT_SUFFIX}"), 3));
}

#[test]
fn keys_are_64_lowercase_hex_digits() {
    assert!(is_key(&key(7)));
    assert!(!is_key(&key(7).to_uppercase()));
    assert!(!is_key(&key(7)[1..]));
    assert!(!is_key("segments"));
}

#[test]
fn a_relisting_that_misses_a_segment_still_being_written_keeps_its_answers() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("writing");
    let (server, _) = cache_on(&bucket);
    server.bound(1 << 20);
    let query = server.partition("query");
    assert!(answer(query.get(&key(1))).is_none(), "listed: empty");
    query.put(&key(1), long_answer(1));
    // The flusher takes its segment number, then waits while a relisting
    // lists (not showing the segment yet); it writes the segment before
    // the relisting goes on to forget what is gone.
    let (numbered, wait_numbered) = mpsc::channel();
    let (put, wait_put) = mpsc::channel::<()>();
    let (written, wait_written) = mpsc::channel();
    locked(&server.shared.hooks).before_put = Some(Box::new(move || {
        numbered.send(()).unwrap();
        wait_put.recv_timeout(STEP).unwrap();
    }));
    std::thread::scope(|scope| {
        let shared = &server.shared;
        scope.spawn(move || {
            shared.flush();
            written.send(()).unwrap();
        });
        wait_numbered.recv_timeout(STEP).unwrap();
        locked(&shared.hooks).after_list = Some(Box::new(move || {
            put.send(()).unwrap();
            wait_written.recv_timeout(STEP).unwrap();
        }));
        let partition = shared.partition("query");
        partition.read_listing(shared, Some(partition.generation.load(Ordering::Acquire)));
    });
    let holding = server.shared.held().find(&slot(server.shared.partition("query").number, &key(1)).unwrap());
    assert!(matches!(holding, Holding::Loaded { .. }), "the answer written is still held");
    assert_eq!(answer(query.get(&key(1))), Some(long_answer(1)));
}

#[test]
fn a_clash_s_segment_name_sorts_between_the_numbers_around_it() {
    let writer = "0000000000001-00000000000000ab";
    let names = [segment_name(writer, 4, 0), segment_name(writer, 5, 1), segment_name(writer, 5, 0)];
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, names);
    assert!(segment_name(writer, 5, 2) < segment_name(writer, 6, 0));
}

#[test]
fn a_batch_taken_later_is_numbered_later_even_when_its_put_comes_first() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("numbered");
    let (writer, _) = cache_on(&bucket);
    let query = writer.partition("query");
    query.put(&key(1), Bytes::from_static(b"\"older\""));
    // The flusher takes the older answer, then waits while a newer one is
    // taken and written.
    let (taken, wait_taken) = mpsc::channel();
    let (go_on, wait_go_on) = mpsc::channel::<()>();
    locked(&writer.shared.hooks).before_put = Some(Box::new(move || {
        taken.send(()).unwrap();
        wait_go_on.recv_timeout(STEP).unwrap();
    }));
    std::thread::scope(|scope| {
        let shared = &writer.shared;
        scope.spawn(move || shared.flush());
        wait_taken.recv_timeout(STEP).unwrap();
        query.put(&key(1), Bytes::from_static(b"\"newer\""));
        writer.flush();
        go_on.send(()).unwrap();
    });
    let (reader, _) = cache_on(&bucket);
    assert_eq!(answer(reader.partition("query").get(&key(1))), Some(Bytes::from_static(b"\"newer\"")));
}

#[test]
fn threads_that_find_segments_gone_at_once_list_the_partition_again_once() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("relisted");
    let (server, requests) = read_by_a_bounded_server_then_folded(&bucket, 20 << 10);
    let served = server.partition("query");
    // Every thread finds its answer's segment gone before any lists again.
    const THREADS: usize = 4;
    let arrived = Arc::new((Mutex::new(0), std::sync::Condvar::new()));
    let at_relist = arrived.clone();
    locked(&server.shared.hooks).before_relist = Some(Arc::new(move || {
        let (count, all) = &*at_relist;
        *locked(count) += 1;
        all.notify_all();
        let waited = all.wait_timeout_while(locked(count), STEP, |n| *n < THREADS);
        assert!(*waited.unwrap().0 >= THREADS, "a thread did not find its segment gone");
    }));
    let lists = requests.counts().lists;
    std::thread::scope(|scope| {
        for n in 0..THREADS as u32 {
            let served = &served;
            scope.spawn(move || assert_eq!(answer(served.get(&key(n))), Some(long_answer(n)), "answer {n}"));
        }
    });
    assert_eq!(*locked(&arrived.0), THREADS);
    assert_eq!(requests.counts().lists - lists, 1, "listed again once");
}

#[test]
fn a_get_of_a_partition_read_hit_or_miss_does_not_wait_for_a_listing_under_way() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("nowait");
    let (writer, _) = cache_on(&bucket);
    writer.partition("query").put(&key(1), Bytes::from_static(b"1"));
    drop(writer);
    let (server, _) = cache_on(&bucket);
    let query = server.partition("query");
    assert!(answer(query.get(&key(1))).is_some());
    let partition = server.shared.partition("query");
    let (found, wait_found) = mpsc::channel();
    std::thread::scope(|scope| {
        // As a relisting by another thread holds it.
        let listing = locked(&partition.listing);
        scope.spawn(|| found.send(answer(query.get(&key(1)))).unwrap());
        let got = wait_found.recv_timeout(STEP);
        // Nor a miss (only the root has old folders to list on a miss).
        scope.spawn(|| found.send(answer(query.get(&key(2)))).unwrap());
        let missed = wait_found.recv_timeout(STEP);
        drop(listing);
        assert_eq!(got, Ok(Some(Bytes::from_static(b"1"))));
        assert_eq!(missed, Ok(None));
    });
}

#[test]
fn a_line_read_again_must_be_whole_where_its_segment_was_written_again_otherwise() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("rewritten");
    let (cache, _) = cache_on(&bucket);
    let partition = cache.shared.partition("query");
    let (k, name) = (key(1), format!("{SEGMENTS}/x-folded{SEGMENT_SUFFIX}"));
    partition.at.put(&name, Bytes::from(format!("{k}\t[1]\n{k}\t[2]\n"))).unwrap();
    let place = |start, len| Place::Segment { name: Arc::from(name.as_str()), start, len };
    let second = (k.len() as u64 + 5, k.len() as u64 + 4);
    assert_eq!(partition.read_again(&k, &place(second.0, second.1)).unwrap(), Some(Bytes::from_static(b"[2]")));
    // Written again, its lines longer: the key's line at the place, cut short.
    partition.at.put(&name, Bytes::from(format!("{k}\t[1000]\n"))).unwrap();
    assert_eq!(partition.read_again(&k, &place(0, second.1)).unwrap(), None, "not the cut line");
    // Or shorter: the place runs past its end.
    partition.at.put(&name, Bytes::from(format!("{k}\t1\n"))).unwrap();
    assert_eq!(partition.read_again(&k, &place(0, second.1)).unwrap(), None, "not read past the end");
}

#[test]
fn a_bounded_root_does_not_serve_an_older_single_answer_once_its_segment_s_answer_is_forgotten() {
    let Some(moto) = crate::storage::object::testing::moto() else { return };
    let bucket = moto.bucket("rootsingles");
    let (writer, _) = cache_on(&bucket);
    let k = key(0);
    writer.shared.root.put(&crate::llm::cache::entry_key(&k), Bytes::from_static(b"\"older\"")).unwrap();
    writer.put(&k, Bytes::from_static(b"\"newer\""));
    for n in 1..300 {
        writer.put(&key(n), long_answer(n));
    }
    drop(writer);
    // Room for about 100 entries: the first of the segment's, k's, is forgotten.
    let budget = 20 << 10;
    let (server, _) = cache_on(&bucket);
    server.bound(budget);
    assert_eq!(answer(server.get(&key(299))), Some(long_answer(299)));
    let slot = slot(server.shared.partition("").number, &k).unwrap();
    assert!(matches!(server.shared.held().find(&slot), Holding::Absent), "forgotten");
    assert_ne!(answer(server.get(&k)), Some(Bytes::from_static(b"\"older\"")));
}
