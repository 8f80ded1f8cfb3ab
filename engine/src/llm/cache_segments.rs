//! The answer cache in segments, one implementation for a local folder and
//! an object store (reached through the location's [`Store`]). One file or
//! object per answer made a fresh index spend a fifth of its CPU creating
//! files (a folder) and a cached re-index read one file, or send one GET,
//! per answer: a million answers, a million requests. Here a partition's
//! answers are written together, one segment at a time
//! (`<partition>/segments/<writer>-<n>.answers`; the root's under
//! `segments/`): a run costs a file or a request per segment, not per answer.
//!
//! A segment's format: one line per answer, the 64 lowercase hex digits of
//! its key, a tab, the answer, a line break. The answer is its JSON written
//! compact (so with no raw line break or tab), or, for an embedding vector,
//! `#f32le:` then the base64 of its little-endian f32 values
//! ([`super::cache_vector`]); the caller that asks knows which it stored.
//! A line without its line break (the end of a file a crash tore), or
//! whose key does not read, is damaged: counted in one warning, not read,
//! and its request asked again.
//!
//! Writing. Each process is a writer with a name of its own (its start time
//! then a random part, so that names sort by when writers started) and
//! writes only its own segments, numbered, one at a time per partition: at
//! the end of each step ([`SegmentAnswers::flush`]), every [`FLUSH_INTERVAL`]
//! by a thread while answers wait, as soon as [`FLUSH_ANSWERS`] answers or
//! [`FLUSH_BYTES`] wait, and when the cache is dropped. A segment is
//! written whole ([`Store::put`]: a folder's is written under a temporary
//! name, synced, then renamed; an object store's is one PUT, visible whole
//! or not at all): a process killed loses the answers of its last
//! [`FLUSH_INTERVAL`] at most (the next run asks them again) and never
//! leaves a part of a segment a reader would read.
//!
//! Reading. A partition is listed once per process, when it is first asked
//! (one LIST of its `segments/`; a miss then makes no request), and its
//! segments are read a few at a time in name order, which is the order
//! their writers started in, then their own: a later answer to a key
//! replaces an earlier one. A process holds in memory the answers it read
//! and those it wrote; a bounded cache (a server's query answers) holds at
//! most its bound of them and reads an unloaded one again with one ranged
//! read of its line ([`super::cache_held`]).
//!
//! Folding, the contract: a segment is deleted only by the process that
//! wrote it; a reader never rewrites or deletes one. A writer with
//! [`FOLD_SEGMENTS`] segments of its own in a partition (a long-lived one,
//! a server, writes one per second it is asked) folds its small consecutive
//! ones into segments of up to [`FLUSH_BYTES`], at a flush: the folded
//! segment is written first, under a name that sorts where the last of its
//! run did, then the run is deleted, so that every answer is in one or the
//! other. A reader that finds a segment it listed gone lists again (twice at
//! most); a bounded reader whose unloaded answer's segment was folded since
//! asks that answer again.
//!
//! The one exception: a partition kept within a size
//! ([`SegmentAnswers::keep_at_most`], a bounded cache in a local folder,
//! which has no lifecycle rule to expire old segments) deletes its oldest
//! segments, whoever wrote them, before writing one that would not fit. Its
//! answers are then the most recently written (not read) ones; one in a
//! deleted segment is a miss, asked again, as when a reader finds it folded.
//!
//! A local cache folder (its segments, and the files of older versions) is
//! copied into a bucket by [`import_folder`]; in a folder, the files of
//! older versions are read by [`super::cache_folder`].

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::Bytes;

use super::cache_held::{hex_digit, slot, Held, Holding, Place};
use crate::storage::Store;

/// How long an answer waits in memory at most while a run goes on.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Answers of one partition that are written at once when that many wait.
pub(crate) const FLUSH_ANSWERS: usize = 2_000;
/// Bytes of answers of one partition written at once when that many wait
/// (a bounded cache: a quarter of its bound, if less); also the most bytes
/// a writer folds into one segment.
pub(crate) const FLUSH_BYTES: usize = 16 << 20;

/// Segments of its own in a partition past which a writer folds them.
pub(crate) const FOLD_SEGMENTS: usize = 64;

/// Where a partition keeps its segments.
const SEGMENTS: &str = "segments";
const SEGMENT_SUFFIX: &str = ".answers";

/// Listings of a partition a reader makes at most when it finds segments
/// gone (folded by their writer since listed).
const LISTINGS: usize = 3;

/// One partition of a cache on an object store (`path` "": the root), and
/// the partition it falls back to (the root, for answers cached before
/// caches were partitioned).
#[derive(Clone)]
pub(super) struct SegmentAnswers {
    shared: Arc<Shared>,
    path: String,
    fallback: Option<String>,
}

/// What the partitions of one cache share.
struct Shared {
    root: Arc<dyn Store>,
    writer: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    partitions: HashMap<String, Arc<Partition>>,
    /// Each partition's answers not written yet, by its number.
    waiting: Vec<Waiting>,
    held: Held,
}

struct Partition {
    /// Its index in [`State::waiting`], and its entries' in [`State::held`].
    number: u32,
    at: Arc<dyn Store>,
    /// The most bytes its segments may take, if bounded (see
    /// [`SegmentAnswers::keep_at_most`]).
    stored_bound: OnceLock<u64>,
    /// Listed and read: once, when first asked (its gets wait for that).
    read: OnceLock<()>,
    /// This process's segments of it, held while one is written or folded:
    /// they are written one at a time, in the order their answers came.
    own: Mutex<OwnSegments>,
}

/// Answers of this process not written yet, in the order they came.
#[derive(Default)]
struct Waiting {
    answers: Vec<(String, Bytes)>,
    bytes: usize,
}

impl Waiting {
    /// Adds an answer; whether a segment's worth wait now ([`FLUSH_ANSWERS`],
    /// or `max_bytes`).
    fn add(&mut self, key: &str, answer: Bytes, max_bytes: usize) -> bool {
        self.bytes += answer.len();
        self.answers.push((key.to_string(), answer));
        self.answers.len() >= FLUSH_ANSWERS || self.bytes >= max_bytes
    }
}

#[derive(Default)]
struct OwnSegments {
    next: u64,
    /// Those written and not folded away, in name order.
    live: Vec<OwnSegment>,
}

/// One of this process's segments: its number and, for a segment that
/// folded a run ending at that number, how many times (see [`segment_name`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OwnSegment {
    number: u64,
    folds: u32,
    bytes: u64,
}

/// An answer found: where (for messages) and its JSON.
pub(super) struct Found {
    pub name: String,
    pub bytes: Bytes,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new writer's name: its start time then a random part.
fn writer_name() -> String {
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    let millis = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    format!("{millis:013}-{random:016x}")
}

impl SegmentAnswers {
    /// The root of the cache at `root`. Its answers are written every
    /// [`FLUSH_INTERVAL`] by a thread that ends once the cache is dropped
    /// (which writes what is left).
    pub fn new(root: Arc<dyn Store>) -> SegmentAnswers {
        SegmentAnswers::flushed_every(root, FLUSH_INTERVAL)
    }

    fn flushed_every(root: Arc<dyn Store>, interval: Duration) -> SegmentAnswers {
        let shared = Arc::new(Shared { root, writer: writer_name(), state: Mutex::default() });
        let weak = Arc::downgrade(&shared);
        let flusher = std::thread::Builder::new().name("cache-flush".into()).spawn(move || flush_every(weak, interval));
        if let Err(e) = flusher {
            tracing::warn!(
                "could not start the cache's writer thread ({e}): answers are written at the end of each step"
            );
        }
        SegmentAnswers { shared, path: String::new(), fallback: None }
    }

    /// The partition `name` under this one, falling back to this one.
    pub fn partition(&self, name: &str) -> SegmentAnswers {
        let path = if self.path.is_empty() { name.to_string() } else { format!("{}/{name}", self.path) };
        SegmentAnswers { shared: self.shared.clone(), path, fallback: Some(self.path.clone()) }
    }

    /// Holds at most `max_bytes` of answers in memory, this cache's
    /// partitions together (see [`super::cache_held`]); set before its first
    /// answer.
    pub fn bound(&self, max_bytes: u64) {
        self.shared.state().held.bound(max_bytes);
    }

    /// Keeps this partition's segments within `max_bytes` of storage (a
    /// folder's: it has no lifecycle rule): before a segment is written, the
    /// oldest are deleted, whoever wrote them, until it fits.
    pub(crate) fn keep_at_most(&self, max_bytes: u64) {
        let _ = self.shared.partition(&self.path).stored_bound.set(max_bytes);
    }

    /// What the answers held in memory are counted as, for a bounded cache.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> u64 {
        self.shared.state().held.bytes()
    }

    /// The answer to `key` of this partition, else of its fallback.
    pub fn get(&self, key: &str) -> Option<Found> {
        [Some(&self.path), self.fallback.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|path| self.shared.partition(path).get(&self.shared, key))
    }

    /// Keeps `answer` under `key`: read back at once, written with the
    /// partition's next segment.
    pub fn put(&self, key: &str, answer: Bytes) {
        let partition = self.shared.partition(&self.path);
        let Some(slot) = slot(partition.number, key) else {
            tracing::warn!("not caching an answer under `{key}` in {}: not a cache key", partition.at.describe());
            return;
        };
        let full = {
            let mut state = self.shared.state();
            state.held.put_mine(slot, answer.clone());
            let limit = state.segment_bytes();
            state.waiting[partition.number as usize].add(key, answer, limit)
        };
        if full {
            self.shared.write_segment(&partition, &mut locked(&partition.own));
        }
    }

    /// Writes every partition's waiting answers now, and folds this
    /// process's segments of a partition that has [`FOLD_SEGMENTS`] of them.
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

impl State {
    /// The most bytes of answers written, folded or read at once:
    /// [`FLUSH_BYTES`], bounded a quarter of the bound if less.
    fn segment_bytes(&self) -> usize {
        let quarter = |max: u64| usize::try_from(max / 4).unwrap_or(usize::MAX).clamp(1, FLUSH_BYTES);
        self.held.max_bytes().map_or(FLUSH_BYTES, quarter)
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        locked(&self.state)
    }

    fn partition(&self, path: &str) -> Arc<Partition> {
        let mut state = self.state();
        if let Some(partition) = state.partitions.get(path) {
            return partition.clone();
        }
        let number = state.waiting.len() as u32;
        let at = if path.is_empty() { self.root.clone() } else { self.root.join(path) };
        let partition = Arc::new(Partition {
            number,
            at,
            stored_bound: OnceLock::new(),
            read: OnceLock::new(),
            own: Mutex::default(),
        });
        state.waiting.push(Waiting::default());
        state.partitions.insert(path.to_string(), partition.clone());
        partition
    }

    fn flush(&self) {
        let partitions: Vec<Arc<Partition>> = self.state().partitions.values().cloned().collect();
        for partition in partitions {
            let mut own = locked(&partition.own);
            self.write_segment(&partition, &mut own);
            if own.live.len() >= FOLD_SEGMENTS {
                self.fold(&partition, &mut own);
            }
        }
    }

    /// Writes the partition's waiting answers as its next segment (`own`:
    /// its segments, held). On a failure they wait for the next try, before
    /// those that came since (a later line replaces an earlier one), and are
    /// asked again if the process ends first.
    fn write_segment(&self, partition: &Partition, own: &mut OwnSegments) {
        let waiting = std::mem::take(&mut self.state().waiting[partition.number as usize]);
        if waiting.answers.is_empty() {
            return;
        }
        // A number is used once, even when its PUT failed (it may have been written).
        let segment = OwnSegment { number: own.next, folds: 0, bytes: 0 };
        own.next += 1;
        let name = segment_name(&self.writer, segment);
        let (bytes, lines) = segment_of(waiting.answers.iter().map(|(key, answer)| (key.as_str(), answer)));
        if let Some(&max_bytes) = partition.stored_bound.get() {
            self.make_room(partition, own, bytes.len() as u64, max_bytes);
        }
        match partition.at.put(&name, &bytes) {
            Ok(()) => {
                own.live.push(OwnSegment { bytes: bytes.len() as u64, ..segment });
                let name: Arc<str> = Arc::from(name);
                let mut state = self.state();
                for ((key, answer), line) in waiting.answers.iter().zip(lines) {
                    if let Some(slot) = slot(partition.number, key) {
                        state.held.written(slot, answer, place(&name, line));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(
                    "could not write {} cached answer(s) to {}: {e:#}; trying again at the next flush",
                    waiting.answers.len(),
                    partition.at.describe()
                );
                let mut state = self.state();
                let later = std::mem::replace(&mut state.waiting[partition.number as usize], waiting);
                let again = &mut state.waiting[partition.number as usize];
                again.bytes += later.bytes;
                again.answers.extend(later.answers);
            }
        }
    }

    /// Deletes the oldest segments of `partition` (`own`: this process's,
    /// held) until `incoming` more bytes fit in `max_bytes` (a segment larger
    /// than that is written alone, and goes before the next).
    fn make_room(&self, partition: &Partition, own: &mut OwnSegments, incoming: u64, max_bytes: u64) {
        let listed = match partition.segments() {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!("could not list the cache segments of {}: {e:#}", partition.at.describe());
                return;
            }
        };
        let mut total = incoming + listed.iter().map(|(_, size)| size).sum::<u64>();
        for (name, size) in listed {
            if total <= max_bytes {
                break;
            }
            match partition.at.delete(&name) {
                Ok(()) => {
                    total -= size;
                    own.live.retain(|&segment| segment_name(&self.writer, segment) != name);
                }
                Err(e) => tracing::warn!("could not delete an old cache segment: {e:#}"),
            }
        }
    }

    /// Folds runs of this process's small consecutive segments of
    /// `partition` (`own`, held), each into one; a failure is a warning,
    /// the run left as it was.
    fn fold(&self, partition: &Partition, own: &mut OwnSegments) {
        let limit = self.state().segment_bytes() as u64;
        let sizes: Vec<u64> = own.live.iter().map(|s| s.bytes).collect();
        // The last run first: the positions of those before it stay.
        for run in fold_groups(&sizes, limit).into_iter().rev() {
            match self.fold_run(partition, &own.live[run.clone()]) {
                Ok(folded) => {
                    own.live.drain(run.clone());
                    own.live.insert(run.start, folded);
                }
                Err(e) => tracing::warn!("could not fold cache segments of {}: {e:#}", partition.at.describe()),
            }
        }
    }

    /// Replaces the segments `run` by one holding their answers, the later
    /// of a key's: written first, then they are deleted (a reader that
    /// listed them and finds one gone lists again). Its name sorts where the
    /// run's last did, so segments before and after the run still come
    /// before and after its answers.
    fn fold_run(&self, partition: &Partition, run: &[OwnSegment]) -> anyhow::Result<OwnSegment> {
        let names: Vec<String> = run.iter().map(|&s| segment_name(&self.writer, s)).collect();
        let mut answers = BTreeMap::new();
        for (name, segment) in names.iter().zip(partition.at.get_all(&names)?) {
            let segment = segment.with_context(|| format!("{name} of this process is gone"))?;
            segment_lines(&segment, |key, _, answer| {
                answers.insert(key.to_string(), answer);
            });
        }
        let last = run.last().context("an empty run")?;
        let folded = OwnSegment { number: last.number, folds: last.folds + 1, bytes: 0 };
        let name = segment_name(&self.writer, folded);
        let (bytes, lines) = segment_of(answers.iter().map(|(key, answer)| (key.as_str(), answer)));
        partition.at.put(&name, &bytes)?;
        {
            let (name, mut state) = (Arc::from(name), self.state());
            for (key, line) in answers.keys().zip(lines) {
                if let Some(slot) = slot(partition.number, key) {
                    state.held.moved(&slot, |segment| names.iter().any(|n| n == segment), place(&name, line));
                }
            }
        }
        for name in &names {
            // Left, it is read twice: its answers are the folded segment's, or earlier.
            if let Err(e) = partition.at.delete(name) {
                tracing::warn!("could not delete a cache segment folded away: {e:#}");
            }
        }
        tracing::debug!("folded {} cache segments of {} into one", run.len(), partition.at.describe());
        Ok(OwnSegment { bytes: bytes.len() as u64, ..folded })
    }
}

/// The name of the segment `segment` of `writer`. One that folded a run
/// ending at its number sorts after the segment before that number and
/// before the segment of that number, and after an earlier fold of it.
fn segment_name(writer: &str, segment: OwnSegment) -> String {
    match segment.folds {
        0 => format!("{SEGMENTS}/{writer}-{:08}{SEGMENT_SUFFIX}", segment.number),
        folds => format!("{SEGMENTS}/{writer}-{:08}-{folds:04}{SEGMENT_SUFFIX}", segment.number),
    }
}

fn place(segment: &Arc<str>, line: Range<u64>) -> Place {
    Place { segment: segment.clone(), start: line.start, len: line.end - line.start }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Partition {
    fn get(&self, shared: &Shared, key: &str) -> Option<Found> {
        let slot = slot(self.number, key)?;
        self.read.get_or_init(|| {
            if let Err(e) = self.read_segments(shared) {
                tracing::warn!(
                    "could not read the cached answers of {}: {e:#}; their requests are sent again",
                    self.at.describe()
                );
            }
        });
        let holding = shared.state().held.find(&slot);
        match holding {
            Holding::Loaded { answer, mine } => Some(Found { name: self.name_of(key, mine), bytes: answer }),
            Holding::Unloaded(place) => match self.read_again(key, &place) {
                Ok(Some(answer)) => {
                    shared.state().held.reloaded(slot, &place, answer.clone());
                    Some(Found { name: self.name_of(key, false), bytes: answer })
                }
                // Folded by its writer since: asked again.
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!("cache entry {key}: {e:#}; its request is sent again");
                    None
                }
            },
            Holding::Absent => None,
        }
    }

    fn name_of(&self, key: &str, mine: bool) -> String {
        match mine {
            true => format!("{} (this run's answer {key})", self.at.describe()),
            false => format!("{}/{SEGMENTS} (answer {key})", self.at.describe()),
        }
    }

    /// The answer to `key` at `place`, read again (None: no longer there).
    fn read_again(&self, key: &str, place: &Place) -> anyhow::Result<Option<Bytes>> {
        // With its line break: a line cut short reads as gone.
        let line = self.at.get_range(&place.segment, place.start..place.start + place.len + 1)?;
        // Names are not written twice, but a line that is not the key's
        // whole one must not be served.
        let whole = |l: &Bytes| {
            l.len() as u64 == place.len + 1
                && l.ends_with(b"\n")
                && l.starts_with(key.as_bytes())
                && l.get(key.len()) == Some(&b'\t')
        };
        Ok(line.filter(whole).map(|l| l.slice(key.len() + 1..l.len() - 1)))
    }

    /// Lists the partition's segments and holds their answers, listing
    /// again when a segment listed is gone (folded by its writer, whose
    /// folded segment a listing then shows).
    fn read_segments(&self, shared: &Shared) -> anyhow::Result<()> {
        for listing in 1..=LISTINGS {
            if self.read_listed(shared, &self.segments()?, listing == LISTINGS)? {
                break;
            }
        }
        Ok(())
    }

    /// The partition's segments (name, size), in name order.
    fn segments(&self) -> anyhow::Result<Vec<(String, u64)>> {
        let listed = self.at.join(SEGMENTS).list()?;
        let segments = listed.into_iter().filter(|l| l.path.ends_with(SEGMENT_SUFFIX));
        Ok(segments.map(|l| (format!("{SEGMENTS}/{}", l.path), l.size)).collect())
    }

    /// Reads the segments listed (name, size; in name order), a few at a
    /// time, and holds their answers; false when one is gone (unless
    /// `skip_gone`).
    fn read_listed(&self, shared: &Shared, segments: &[(String, u64)], skip_gone: bool) -> anyhow::Result<bool> {
        // Bounded, a bound's worth at a time: it must not hold them all at once.
        let limit = {
            let state = shared.state();
            state.held.max_bytes().map_or(u64::MAX, |_| state.segment_bytes() as u64)
        };
        let sizes: Vec<u64> = segments.iter().map(|(_, size)| *size).collect();
        let mut damaged = 0;
        for run in read_runs(&sizes, limit) {
            let names: Vec<String> = segments[run].iter().map(|(name, _)| name.clone()).collect();
            let read = self.at.get_all(&names)?;
            if read.iter().any(Option::is_none) && !skip_gone {
                return Ok(false);
            }
            for (name, segment) in names.into_iter().zip(read) {
                let Some(segment) = segment else { continue };
                let (name, mut state) = (Arc::from(name), shared.state());
                damaged += segment_lines(&segment, |key, line, answer| {
                    state.held.stored(slot(self.number, key).expect("a checked key"), place(&name, line), Some(answer));
                });
            }
        }
        if damaged > 0 {
            tracing::warn!(
                "{damaged} damaged line(s) in the cache segments of {}: their requests are sent again",
                self.at.describe()
            );
        }
        Ok(true)
    }
}

/// The runs of consecutive segments (of these sizes, in name order) to fold
/// into one each: small ones, together at most `limit` bytes (a reader
/// then reads a large cache in segments of about that size, not in one
/// object), two or more to a run.
fn fold_groups(sizes: &[u64], limit: u64) -> Vec<Range<usize>> {
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

/// The runs of consecutive segments (of these sizes) to read at once, in
/// order: together up to `limit` bytes, at least one a run.
fn read_runs(sizes: &[u64], limit: u64) -> Vec<Range<usize>> {
    let (mut runs, mut start, mut bytes) = (Vec::new(), 0, 0);
    for (i, &size) in sizes.iter().enumerate() {
        if bytes > 0 && bytes + size > limit {
            runs.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < sizes.len() {
        runs.push(start..sizes.len());
    }
    runs
}

/// A segment of `answers` (key, answer JSON), and where each line of it is
/// (without its line break).
fn segment_of<'a>(answers: impl Iterator<Item = (&'a str, &'a Bytes)>) -> (Bytes, Vec<Range<u64>>) {
    let (mut segment, mut lines) = (Vec::new(), Vec::new());
    for (key, answer) in answers {
        let start = segment.len() as u64;
        segment.extend_from_slice(key.as_bytes());
        segment.push(b'\t');
        segment.extend_from_slice(answer);
        lines.push(start..segment.len() as u64);
        segment.push(b'\n');
    }
    (Bytes::from(segment), lines)
}

/// Calls `each` with the key, the place and the answer of each line of a
/// segment; returns how many lines do not read.
fn segment_lines(segment: &Bytes, mut each: impl FnMut(&str, Range<u64>, Bytes)) -> usize {
    let mut damaged = 0;
    let mut start = 0;
    while start < segment.len() {
        let end = segment[start..].iter().position(|&b| b == b'\n').map_or(segment.len(), |i| start + i);
        let line = segment.slice(start..end);
        let line_start = start;
        start = end + 1;
        match line.iter().position(|&b| b == b'\t') {
            Some(tab) if end < segment.len() => match std::str::from_utf8(&line[..tab]) {
                Ok(key) if slot(0, key).is_some() => each(key, line_start as u64..end as u64, line.slice(tab + 1..)),
                _ => damaged += 1,
            },
            _ => damaged += 1,
        }
    }
    damaged
}

/// What [`ResponseCache::import`](super::ResponseCache::import) copied.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Answers copied.
    pub answers: u64,
    /// Segment files written to the store.
    pub segments: u64,
    /// Files named as answers that are not JSON (not copied).
    pub skipped: u64,
}

/// Copies the answers of the local cache folder `dir` (its segments, and
/// the one file per answer of older versions,
/// `[<partition>/]<xx>/<key>.json`) into the cache at `to`, as segments of a
/// writer of its own (a partition's answers already there stay; where both
/// have a key, the copy's answer is the later; in the copy, a segment's
/// answer is later than an old file's). Folders of two hex digits hold old
/// files, `segments/` segments; any other folder is a partition.
pub(super) fn import_folder(dir: &Path, to: &dyn Store) -> anyhow::Result<Imported> {
    let (writer, mut imported) = (writer_name(), Imported::default());
    import_partition(dir, to, &writer, &mut imported)?;
    Ok(imported)
}

fn import_partition(dir: &Path, to: &dyn Store, writer: &str, imported: &mut Imported) -> anyhow::Result<()> {
    let mut batch = Waiting::default();
    for folder in sorted_entries(dir)?.into_iter().filter(|p| p.is_dir()) {
        let name = folder.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if name == SEGMENTS {
            import_segments(&folder, to, writer, imported, &mut batch)?;
            continue;
        }
        if !(name.len() == 2 && name.bytes().all(|b| hex_digit(b).is_some())) {
            import_partition(&folder, to.join(&name).as_ref(), writer, imported)?;
            continue;
        }
        for file in sorted_entries(&folder)? {
            let key = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            if !(slot(0, key).is_some() && key.starts_with(&name) && file.extension().is_some_and(|x| x == "json")) {
                continue;
            }
            let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let Some(answer) = one_line_json(bytes) else {
                imported.skipped += 1;
                continue;
            };
            if batch.add(key, answer.into(), FLUSH_BYTES) {
                imported.write(to, writer, &mut batch)?;
            }
        }
    }
    imported.write(to, writer, &mut batch)
}

/// Adds the answers of a folder cache's segments (`dir`, a partition's
/// `segments/`) to `batch`, in name order (a later line replaces an earlier
/// one in the copy too); a damaged line is skipped.
fn import_segments(
    dir: &Path,
    to: &dyn Store,
    writer: &str,
    imported: &mut Imported,
    batch: &mut Waiting,
) -> anyhow::Result<()> {
    for file in sorted_entries(dir)?.into_iter().filter(|p| p.to_string_lossy().ends_with(SEGMENT_SUFFIX)) {
        let segment = Bytes::from(std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?);
        let mut full = false;
        imported.skipped +=
            segment_lines(&segment, |key, _, answer| full |= batch.add(key, answer, FLUSH_BYTES)) as u64;
        if full {
            imported.write(to, writer, batch)?;
        }
    }
    Ok(())
}

impl Imported {
    /// Writes `batch` (if any) as a segment of `writer` at `to`.
    fn write(&mut self, to: &dyn Store, writer: &str, batch: &mut Waiting) -> anyhow::Result<()> {
        let batch = std::mem::take(batch);
        if batch.answers.is_empty() {
            return Ok(());
        }
        let (bytes, _) = segment_of(batch.answers.iter().map(|(key, answer)| (key.as_str(), answer)));
        to.put(&segment_name(writer, OwnSegment { number: self.segments, folds: 0, bytes: 0 }), &bytes)?;
        self.segments += 1;
        self.answers += batch.answers.len() as u64;
        Ok(())
    }
}

/// `bytes` if they are JSON, written again compact if they hold a line
/// break (a segment's line must not).
fn one_line_json(bytes: Vec<u8>) -> Option<Vec<u8>> {
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    match bytes.contains(&b'\n') {
        true => serde_json::to_vec(&value).ok(),
        false => Some(bytes),
    }
}

/// The paths in `dir`, sorted.
fn sorted_entries(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    let mut paths = entries.map(|e| e.map(|e| e.path())).collect::<Result<Vec<_>, _>>()?;
    paths.sort();
    Ok(paths)
}

#[cfg(test)]
mod tests;
