//! The answer cache on an object store, in segments. One object per answer
//! (the local folder's layout) made a cached re-index cost one GET per
//! answer, and a first index two (the partition's miss, then the root's):
//! a million answers, a million requests. Here answers are collected in
//! memory and written together, one segment object per partition
//! (`<partition>/segments/<writer>-<n>.answers`): at the end of each step
//! ([`ObjectAnswers::flush`]), every [`FLUSH_INTERVAL`] while answers come,
//! and as soon as [`FLUSH_ANSWERS`] answers or [`FLUSH_BYTES`] wait. A reader
//! lists a partition once, when it is first asked, and reads all its
//! segments, a few at a time: a run costs requests per segment, not per
//! answer.
//!
//! A segment is one PUT, which an object store makes visible whole or not at
//! all: a process killed loses the answers it had not written yet (at most
//! those of the last [`FLUSH_INTERVAL`]; the next run asks them again) and
//! never damages the cache. Segments are read in name order, which is the
//! order their writers started in, then their own order, and a later answer
//! to a key replaces an earlier one, as rewriting a file does locally. The
//! answers a process writes stay in its memory (they are what it reads
//! back), as do the segments it read.
//!
//! A writer that lives long (a server answering queries) writes a segment
//! per second it is asked: a reader that finds [`FOLD_SEGMENTS`] or more in
//! a partition folds the small ones, consecutive, into segments of up to
//! [`FLUSH_BYTES`].
//!
//! One object per answer (`<partition>/ab/<key>.json`, written before
//! segments) is still read: one GET for each key the listing shows, only
//! when no segment has the key.
//!
//! A segment's format: one line per answer, the 64 hex digits of its key, a
//! tab, the answer's JSON (written compact, so with no raw line break).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::storage::object::{Conditional, ObjectLocation};

/// How long an answer waits in memory at most while a run goes on.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Answers of one partition that are written at once when that many wait.
pub const FLUSH_ANSWERS: usize = 2_000;
/// Bytes of answers of one partition written at once when that many wait.
pub const FLUSH_BYTES: usize = 16 << 20;

/// Segments of a partition a reader folds into one (a long-lived writer,
/// a server's query answers, writes one per second it is asked).
pub const FOLD_SEGMENTS: usize = 64;

/// Where a partition keeps its segments.
const SEGMENTS: &str = "segments";
const SEGMENT_SUFFIX: &str = ".answers";

/// One partition of a cache on an object store (`path` "": the root), and
/// the partition it falls back to (the root, for answers cached before
/// caches were partitioned).
#[derive(Clone)]
pub(super) struct ObjectAnswers {
    shared: Arc<Shared>,
    path: String,
    fallback: Option<String>,
}

/// What the partitions of one cache share: the store, the name its segments
/// are written under, and each partition's answers.
struct Shared {
    root: ObjectLocation,
    /// This cache's writer name: start time then a random part, so that
    /// segments sort by when their writer started.
    writer: String,
    next_segment: AtomicU64,
    partitions: Mutex<HashMap<String, Arc<Partition>>>,
}

struct Partition {
    at: ObjectLocation,
    /// What the store held when the partition was first asked.
    stored: OnceLock<Stored>,
    /// Answers of this process: every one it wrote, and those not yet written.
    mine: Mutex<Mine>,
}

#[derive(Default)]
struct Stored {
    /// Answers in segments, by key.
    answers: HashMap<String, Bytes>,
    /// Keys with an object of their own (written before segments).
    singles: HashSet<String>,
}

#[derive(Default)]
struct Mine {
    answers: HashMap<String, Bytes>,
    unwritten: Vec<(String, Bytes)>,
    unwritten_bytes: usize,
}

/// An answer found: where (for messages) and its JSON.
pub(super) struct Found {
    pub name: String,
    pub bytes: Bytes,
}

impl ObjectAnswers {
    /// The root of the cache at `root`. Its answers are written every
    /// [`FLUSH_INTERVAL`] by a thread that ends once the cache is dropped
    /// (which writes what is left).
    pub fn new(root: ObjectLocation) -> ObjectAnswers {
        ObjectAnswers::flushed_every(root, FLUSH_INTERVAL)
    }

    fn flushed_every(root: ObjectLocation, interval: Duration) -> ObjectAnswers {
        let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let millis = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let shared = Arc::new(Shared {
            root,
            writer: format!("{millis:013}-{random:016x}"),
            next_segment: AtomicU64::new(0),
            partitions: Mutex::default(),
        });
        let weak = Arc::downgrade(&shared);
        let flusher = std::thread::Builder::new().name("cache-flush".into()).spawn(move || flush_every(weak, interval));
        if let Err(e) = flusher {
            tracing::warn!(
                "could not start the cache's writer thread ({e}): answers are written at the end of each step"
            );
        }
        ObjectAnswers { shared, path: String::new(), fallback: None }
    }

    /// The partition `name` under this one, falling back to this one.
    pub fn partition(&self, name: &str) -> ObjectAnswers {
        let path = if self.path.is_empty() { name.to_string() } else { format!("{}/{name}", self.path) };
        ObjectAnswers { shared: self.shared.clone(), path, fallback: Some(self.path.clone()) }
    }

    /// The partition's prefix, for messages.
    pub fn url(&self) -> String {
        self.shared.partition(&self.path).at.url().to_string()
    }

    /// The answer to `key` of this partition, else of its fallback.
    pub fn get(&self, key: &str) -> Option<Found> {
        [Some(&self.path), self.fallback.as_ref()].into_iter().flatten().find_map(|path| {
            let partition = self.shared.partition(path);
            partition.get(key)
        })
    }

    /// Keeps `answer` under `key`: read back at once, written with the
    /// partition's next segment.
    pub fn put(&self, key: &str, answer: Bytes) {
        let partition = self.shared.partition(&self.path);
        let full = {
            let mut mine = partition.mine.lock().unwrap_or_else(|e| e.into_inner());
            mine.answers.insert(key.to_string(), answer.clone());
            mine.unwritten_bytes += answer.len();
            mine.unwritten.push((key.to_string(), answer));
            mine.unwritten.len() >= FLUSH_ANSWERS || mine.unwritten_bytes >= FLUSH_BYTES
        };
        if full {
            self.shared.write_segment(&partition);
        }
    }

    /// Writes every partition's waiting answers now.
    pub fn flush(&self) {
        self.shared.flush();
    }
}

/// Writes `shared`'s answers every `interval` until it is dropped.
fn flush_every(shared: Weak<Shared>, interval: Duration) {
    loop {
        std::thread::sleep(interval);
        match shared.upgrade() {
            Some(shared) => shared.flush(),
            None => return,
        }
    }
}

impl Shared {
    fn partition(&self, path: &str) -> Arc<Partition> {
        let mut partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        let at = || if path.is_empty() { self.root.clone() } else { self.root.join(path) };
        partitions
            .entry(path.to_string())
            .or_insert_with(|| Arc::new(Partition { at: at(), stored: OnceLock::new(), mine: Mutex::default() }))
            .clone()
    }

    fn flush(&self) {
        let partitions: Vec<Arc<Partition>> =
            self.partitions.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for partition in partitions {
            self.write_segment(&partition);
        }
    }

    /// Writes the partition's waiting answers as its next segment. On a
    /// failure they wait for the next try (and are asked again if the
    /// process ends first).
    fn write_segment(&self, partition: &Partition) {
        let waiting = {
            let mut mine = partition.mine.lock().unwrap_or_else(|e| e.into_inner());
            mine.unwritten_bytes = 0;
            std::mem::take(&mut mine.unwritten)
        };
        if waiting.is_empty() {
            return;
        }
        let segment = segment_of(waiting.iter().map(|(key, answer)| (key.as_str(), answer)));
        let written = loop {
            let n = self.next_segment.fetch_add(1, Ordering::Relaxed);
            let name = format!("{SEGMENTS}/{}-{n:08}{SEGMENT_SUFFIX}", self.writer);
            match partition.at.put_if(&name, segment.clone(), None) {
                Ok(Conditional::Written) => break Ok(()),
                // Taken (by a writer of the same name: next number).
                Ok(Conditional::Lost) => continue,
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = written {
            tracing::warn!(
                "could not write {} cached answer(s) to {}: {e:#}; trying again at the next flush",
                waiting.len(),
                partition.at.url()
            );
            let mut mine = partition.mine.lock().unwrap_or_else(|e| e.into_inner());
            mine.unwritten_bytes += waiting.iter().map(|(_, a)| a.len()).sum::<usize>();
            let newer = std::mem::replace(&mut mine.unwritten, waiting);
            mine.unwritten.extend(newer);
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Partition {
    fn get(&self, key: &str) -> Option<Found> {
        if let Some(bytes) = self.mine.lock().unwrap_or_else(|e| e.into_inner()).answers.get(key) {
            return Some(Found { name: format!("{} (this run's answer {key})", self.at.url()), bytes: bytes.clone() });
        }
        let stored = self.stored.get_or_init(|| self.read_stored());
        if let Some(bytes) = stored.answers.get(key) {
            return Some(Found { name: format!("{}/{SEGMENTS} (answer {key})", self.at.url()), bytes: bytes.clone() });
        }
        if !stored.singles.contains(key) {
            return None;
        }
        let single = super::cache::entry_key(key);
        match self.at.get(&single) {
            Ok(found) => found.map(|bytes| Found { name: format!("{}/{single}", self.at.url()), bytes }),
            Err(e) => {
                tracing::warn!("cache entry {key}: {e:#}; its request is sent again");
                None
            }
        }
    }

    /// The partition's segments and single answers, as the store lists them
    /// now (nothing, with a warning, when it cannot be read: every answer is
    /// then asked again).
    fn read_stored(&self) -> Stored {
        match self.try_read_stored() {
            Ok(stored) => stored,
            Err(e) => {
                tracing::warn!(
                    "could not read the cached answers of {}: {e:#}; their requests are sent again",
                    self.at.url()
                );
                Stored::default()
            }
        }
    }

    fn try_read_stored(&self) -> anyhow::Result<Stored> {
        let mut listing_again = false;
        loop {
            let (mut names, mut sizes) = (Vec::new(), Vec::new());
            let mut stored = Stored::default();
            for listed in self.at.list("")? {
                match listed.key.split('/').collect::<Vec<_>>()[..] {
                    [SEGMENTS, name] if name.ends_with(SEGMENT_SUFFIX) => {
                        names.push(listed.key.clone());
                        sizes.push(listed.size);
                    }
                    [dir, file] => {
                        if let Some(key) = file.strip_suffix(".json").filter(|k| is_key(k) && k.starts_with(dir)) {
                            stored.singles.insert(key.to_string());
                        }
                    }
                    _ => {}
                }
            }
            // Listed in name order: later segments replace earlier answers.
            let segments = self.at.get_all(&names)?;
            if segments.iter().any(Option::is_none) && !listing_again {
                // Folded by another reader since listed: its folded segment holds them.
                listing_again = true;
                continue;
            }
            let damaged: usize = segments.iter().flatten().map(|s| read_segment(s, &mut stored.answers)).sum();
            if damaged > 0 {
                tracing::warn!(
                    "{damaged} damaged line(s) in the cache segments of {}: their requests are sent again",
                    self.at.url()
                );
            }
            if names.len() >= FOLD_SEGMENTS {
                for group in fold_groups(&sizes) {
                    self.fold(&names[group.clone()], &segments[group]);
                }
            }
            return Ok(stored);
        }
    }

    /// Replaces the segments `names` (consecutive in name order, read as
    /// `segments`) by one holding their answers: written first, then they
    /// are deleted, so a reader finds every answer in one or the other (one
    /// that listed before and finds a segment gone lists again). Its name
    /// sorts where the last folded one's did, so answers of the segments
    /// after it still replace its own.
    fn fold(&self, names: &[String], segments: &[Option<Bytes>]) {
        let Some(last) = names.last() else { return };
        let mut answers = HashMap::new();
        for segment in segments.iter().flatten() {
            read_segment(segment, &mut answers);
        }
        let name = format!("{}-folded{SEGMENT_SUFFIX}", last.trim_end_matches(SEGMENT_SUFFIX));
        let mut keys: Vec<&String> = answers.keys().collect();
        keys.sort();
        let segment = segment_of(keys.into_iter().map(|k| (k.as_str(), &answers[k])));
        let written = match self.at.put_if(&name, segment, None) {
            Ok(Conditional::Written) => names.iter().try_for_each(|old| self.at.delete(old)),
            // Folded by another reader at the same moment: it deletes them.
            Ok(Conditional::Lost) => Ok(()),
            Err(e) => Err(e),
        };
        match written {
            Ok(()) => tracing::info!("folded {} cache segments of {} into one", names.len(), self.at.url()),
            Err(e) => tracing::warn!("could not fold the cache segments of {}: {e:#}", self.at.url()),
        }
    }
}

/// The runs of consecutive segments (of these sizes, in name order) to fold
/// into one each: small ones, together at most [`FLUSH_BYTES`] (a reader
/// then reads a large cache in segments of about that size, not in one
/// object), two or more to a run.
fn fold_groups(sizes: &[u64]) -> Vec<std::ops::Range<usize>> {
    let limit = FLUSH_BYTES as u64;
    let mut groups = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, &size) in sizes.iter().enumerate() {
        if bytes + size > limit || size > limit / 2 {
            groups.push(start..i);
            (start, bytes) = if size > limit / 2 { (i + 1, 0) } else { (i, 0) };
        }
        if i >= start {
            bytes += size;
        }
    }
    groups.push(start..sizes.len());
    groups.retain(|g| g.len() >= 2);
    groups
}

/// A segment of `answers` (key, answer JSON).
fn segment_of<'a>(answers: impl Iterator<Item = (&'a str, &'a Bytes)>) -> Bytes {
    let mut segment = Vec::new();
    for (key, answer) in answers {
        segment.extend_from_slice(key.as_bytes());
        segment.push(b'\t');
        segment.extend_from_slice(answer);
        segment.push(b'\n');
    }
    Bytes::from(segment)
}

/// Adds a segment's answers to `answers`; returns how many lines do not read.
fn read_segment(segment: &Bytes, answers: &mut HashMap<String, Bytes>) -> usize {
    let mut damaged = 0;
    let mut start = 0;
    while start < segment.len() {
        let end = segment[start..].iter().position(|&b| b == b'\n').map_or(segment.len(), |i| start + i);
        let line = segment.slice(start..end);
        start = end + 1;
        match line.iter().position(|&b| b == b'\t') {
            Some(tab) if is_key(std::str::from_utf8(&line[..tab]).unwrap_or("")) && end < segment.len() => {
                let key = String::from_utf8_lossy(&line[..tab]).into_owned();
                answers.insert(key, line.slice(tab + 1..));
            }
            _ => damaged += 1,
        }
    }
    damaged
}

/// A cache key: 64 lowercase hex digits.
fn is_key(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::counting::CountingStore;

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
        // lists the root (its fallback), which holds no segment.
        assert_eq!((counts.lists, counts.gets), (2, 2), "{counts:?}");
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
        let mb = 1 << 20;
        assert_eq!(fold_groups(&[1, 2, 3]), vec![(0..3)]);
        assert_eq!(fold_groups(&[1]), Vec::<std::ops::Range<usize>>::new());
        // A large segment is left alone and splits the runs.
        assert_eq!(fold_groups(&[1, 1, 9 * mb, 1, 1, 1]), [0..2, 3..6]);
        // Runs close before they pass FLUSH_BYTES (16 MiB).
        assert_eq!(fold_groups(&[6 * mb, 6 * mb, 6 * mb, 6 * mb, 1]), [0..2, 2..5]);
        assert_eq!(fold_groups(&[1, 9 * mb, 1]), Vec::<std::ops::Range<usize>>::new());
    }

    #[test]
    fn keys_are_64_lowercase_hex_digits() {
        assert!(is_key(&key(7)));
        assert!(!is_key(&key(7).to_uppercase()));
        assert!(!is_key(&key(7)[1..]));
        assert!(!is_key("segments"));
    }
}
