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
//! answer. The root, which holds the partitions' folders too, is listed one
//! level deep (one LIST with a delimiter), then its own segments: a miss
//! that falls back to it does not list every partition's segments.
//!
//! A segment is one PUT, which an object store makes visible whole or not at
//! all: a process killed loses the answers it had not written yet (at most
//! those of the last [`FLUSH_INTERVAL`]; the next run asks them again) and
//! never damages the cache. Segments are read in name order, which is the
//! order their writers started in, then their own order, and a later answer
//! to a key replaces an earlier one, as rewriting a file does locally. The
//! answers a process writes stay in its memory (they are what it reads
//! back), as do those of the segments it read; a bounded cache (a server's
//! query answers) holds at most its bound of them and reads the others
//! again, a line at a time ([`super::cache_held`]).
//!
//! A writer that lives long (a server answering queries) writes a segment
//! per second it is asked: a reader that finds [`FOLD_SEGMENTS`] or more in
//! a partition folds the small ones, consecutive, into segments of up to
//! [`FLUSH_BYTES`]. A bounded reader that finds a segment gone (folded by
//! another) lists the partition again, once for all its threads that find
//! that at the same time; a partition read is not waited on by its `get`s
//! (a miss of the root, which lists an old folder, waits for a listing
//! under way).
//!
//! One object per answer (`<partition>/ab/<key>.json`, written before
//! segments) is still read: one GET for each key the listing shows, only
//! when no segment has the key. The root's folders of them are each listed
//! when a key in them is first asked; a bounded root that also has
//! segments lists them all first (a segment's answer it forgot must not
//! give way to an older single one).
//!
//! A segment's format: one line per answer, the 64 hex digits of its key, a
//! tab, the answer's JSON (written compact, so with no raw line break).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::cache_held::{hex_digit, slot, Held, Holding, Place};
use crate::storage::object::{Conditional, Listed, ObjectLocation};

/// How long an answer waits in memory at most while a run goes on.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Answers of one partition that are written at once when that many wait.
pub const FLUSH_ANSWERS: usize = 2_000;
/// Bytes of answers of one partition written at once when that many wait
/// (a bounded cache: a quarter of its bound, if less).
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
/// are written under, each partition, and the answers held in memory.
struct Shared {
    root: ObjectLocation,
    /// This cache's writer name: start time then a random part, so that
    /// segments sort by when their writer started.
    writer: String,
    next_segment: AtomicU64,
    /// This process's segment numbers taken and not yet written (or given
    /// up): a listing may not show them yet, but they are not gone.
    writing: Mutex<BTreeSet<u64>>,
    partitions: Mutex<HashMap<String, Arc<Partition>>>,
    held: Mutex<Held>,
    /// [`FLUSH_BYTES`], or less for a bounded cache; also the most bytes of
    /// segments folded into one, and (bounded) read at once.
    segment_bytes: AtomicUsize,
    #[cfg(test)]
    hooks: Mutex<tests::Hooks>,
}

struct Partition {
    /// Its entries' number in [`Shared::held`].
    number: u32,
    at: ObjectLocation,
    /// The root holds the other partitions' folders: it is listed a level
    /// at a time (its own segments, then an old folder when a key in it is
    /// asked), not all the way down.
    holds_partitions: bool,
    /// Listings done (0: not listed yet; the first is made when first asked,
    /// and seen without taking `listing`, which is held while listing): a
    /// thread that found a segment gone lists again only if no other thread
    /// did since it looked.
    generation: AtomicU64,
    listing: Mutex<Listing>,
    unwritten: Mutex<Unwritten>,
}

#[derive(Default)]
struct Listing {
    /// Folders of answers of one object each not listed yet (the root's:
    /// each is listed when a key in it is first asked).
    unlisted: BTreeSet<String>,
}

/// Answers of this process not written yet, in the order they came.
#[derive(Default)]
struct Unwritten {
    answers: Vec<(String, Bytes)>,
    bytes: usize,
}

/// An answer found: where (for messages) and its JSON.
pub(super) struct Found {
    pub name: String,
    pub bytes: Bytes,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
            writing: Mutex::default(),
            partitions: Mutex::default(),
            held: Mutex::default(),
            segment_bytes: AtomicUsize::new(FLUSH_BYTES),
            #[cfg(test)]
            hooks: Mutex::default(),
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

    /// Holds at most `max_bytes` of answers in memory, this cache's
    /// partitions together (see [`super::cache_held`]); set before its first
    /// answer.
    pub fn bound(&self, max_bytes: u64) {
        locked(&self.shared.held).bound(max_bytes);
        let quarter = usize::try_from(max_bytes / 4).unwrap_or(usize::MAX);
        self.shared.segment_bytes.store(quarter.clamp(1, FLUSH_BYTES), Ordering::Relaxed);
    }

    /// What the answers held in memory are counted as, for a bounded cache.
    #[cfg(test)]
    pub fn held_bytes(&self) -> u64 {
        locked(&self.shared.held).bytes()
    }

    /// The partition's prefix, for messages.
    pub fn url(&self) -> String {
        self.shared.partition(&self.path).at.url().to_string()
    }

    /// The answer to `key` of this partition, else of its fallback.
    pub fn get(&self, key: &str) -> Option<Found> {
        [Some(&self.path), self.fallback.as_ref()].into_iter().flatten().find_map(|path| {
            let partition = self.shared.partition(path);
            partition.get(&self.shared, key)
        })
    }

    /// Keeps `answer` under `key`: read back at once, written with the
    /// partition's next segment.
    pub fn put(&self, key: &str, answer: Bytes) {
        let partition = self.shared.partition(&self.path);
        let Some(slot) = slot(partition.number, key) else {
            tracing::warn!("not caching an answer under `{key}` in {}: not a cache key", partition.at.url());
            return;
        };
        locked(&self.shared.held).put_mine(slot, answer.clone());
        let full = {
            let mut unwritten = locked(&partition.unwritten);
            unwritten.bytes += answer.len();
            unwritten.answers.push((key.to_string(), answer));
            unwritten.answers.len() >= FLUSH_ANSWERS || unwritten.bytes >= self.shared.segment_bytes()
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
        let mut partitions = locked(&self.partitions);
        let number = partitions.len() as u32;
        let at = || if path.is_empty() { self.root.clone() } else { self.root.join(path) };
        partitions
            .entry(path.to_string())
            .or_insert_with(|| {
                Arc::new(Partition {
                    number,
                    at: at(),
                    holds_partitions: path.is_empty(),
                    generation: AtomicU64::new(0),
                    listing: Mutex::default(),
                    unwritten: Mutex::default(),
                })
            })
            .clone()
    }

    /// Whether `name` is a segment of this process numbered `first` or
    /// later (see [`segment_name`]; not a folded one).
    fn wrote_since(&self, name: &str, first: u64) -> bool {
        let number = name
            .strip_prefix(SEGMENTS)
            .and_then(|n| n.strip_prefix('/')?.strip_prefix(self.writer.as_str())?.strip_prefix('-'))
            .and_then(|n| n.strip_suffix(SEGMENT_SUFFIX))
            .and_then(|n| match n.split_once('-') {
                Some((number, clashes)) => clashes.parse::<u32>().ok().and(number.parse::<u64>().ok()),
                None => n.parse::<u64>().ok(),
            });
        number.is_some_and(|n| n >= first)
    }

    fn segment_bytes(&self) -> usize {
        self.segment_bytes.load(Ordering::Relaxed)
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        locked(&self.held)
    }

    fn flush(&self) {
        let partitions: Vec<Arc<Partition>> = locked(&self.partitions).values().cloned().collect();
        for partition in partitions {
            self.write_segment(&partition);
        }
    }

    /// The next segment number, counted as being written until it is.
    fn take_segment_number(&self) -> u64 {
        let mut writing = locked(&self.writing);
        let n = self.next_segment.fetch_add(1, Ordering::Relaxed);
        writing.insert(n);
        n
    }

    /// The first of this process's segment numbers that a listing starting
    /// now may not show: the lowest still being written, else the next.
    fn first_unlisted(&self) -> u64 {
        let writing = locked(&self.writing);
        writing.first().copied().unwrap_or_else(|| self.next_segment.load(Ordering::Relaxed))
    }

    /// Runs the test hook `pick` clones, if set.
    #[cfg(test)]
    fn run_shared_hook(&self, pick: impl FnOnce(&tests::Hooks) -> Option<tests::SharedHook>) {
        let hook = pick(&locked(&self.hooks));
        if let Some(hook) = hook {
            hook();
        }
    }

    /// Runs the test hook `pick` takes, if set.
    #[cfg(test)]
    fn run_hook(&self, pick: impl FnOnce(&mut tests::Hooks) -> Option<tests::Hook>) {
        let hook = pick(&mut locked(&self.hooks));
        if let Some(hook) = hook {
            hook();
        }
    }

    /// Writes the partition's waiting answers as its next segment. On a
    /// failure they wait for the next try (and are asked again if the
    /// process ends first).
    fn write_segment(&self, partition: &Partition) {
        let (waiting, n) = {
            let mut unwritten = locked(&partition.unwritten);
            if unwritten.answers.is_empty() {
                return;
            }
            unwritten.bytes = 0;
            // Numbered as the batch is taken: a batch taken later (a full
            // `put`'s while the flusher writes) sorts later, its answers last.
            (std::mem::take(&mut unwritten.answers), self.take_segment_number())
        };
        #[cfg(test)]
        self.run_hook(|hooks| hooks.before_put.take());
        let (segment, lines) = segment_of(waiting.iter().map(|(key, answer)| (key.as_str(), answer)));
        let mut clashes = 0;
        let written = loop {
            let name = segment_name(&self.writer, n, clashes);
            match partition.at.put_if(&name, segment.clone(), None) {
                Ok(Conditional::Written) => break Ok(name),
                // Taken (by a writer of the same name): the same number, told
                // apart, so that it still sorts before this process's later
                // segments (a new number would sort after them).
                Ok(Conditional::Lost) => clashes += 1,
                Err(e) => break Err(e),
            }
        };
        match written {
            Ok(name) => {
                let name: Arc<str> = Arc::from(name);
                let mut held = self.held();
                for ((key, answer), line) in waiting.iter().zip(lines) {
                    let place = Place::Segment { name: name.clone(), start: line.start, len: line.end - line.start };
                    if let Some(slot) = slot(partition.number, key) {
                        held.written(slot, answer, place);
                    }
                }
                // Only now: a relisting that missed the segment must not forget what it placed there.
                locked(&self.writing).remove(&n);
            }
            Err(e) => {
                locked(&self.writing).remove(&n);
                tracing::warn!(
                    "could not write {} cached answer(s) to {}: {e:#}; trying again at the next flush",
                    waiting.len(),
                    partition.at.url()
                );
                // Written again under a later number: not the answers a later
                // batch (already written, or waiting) replaced.
                let waiting: Vec<(String, Bytes)> = {
                    let held = self.held();
                    let pending = |key: &str, answer: &Bytes| {
                        slot(partition.number, key).is_some_and(|slot| held.unwritten(&slot, answer))
                    };
                    waiting.into_iter().filter(|(key, answer)| pending(key, answer)).collect()
                };
                let mut unwritten = locked(&partition.unwritten);
                unwritten.bytes += waiting.iter().map(|(_, a)| a.len()).sum::<usize>();
                let newer = std::mem::replace(&mut unwritten.answers, waiting);
                unwritten.answers.extend(newer);
            }
        }
    }
}

/// The name of this process's segment `n` (`clashes`: names of it found
/// taken by a writer of the same name). A clash's name sorts after segment
/// `n - 1`'s and before `n`'s.
fn segment_name(writer: &str, n: u64, clashes: u32) -> String {
    match clashes {
        0 => format!("{SEGMENTS}/{writer}-{n:08}{SEGMENT_SUFFIX}"),
        _ => format!("{SEGMENTS}/{writer}-{n:08}-{clashes}{SEGMENT_SUFFIX}"),
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.flush();
    }
}

/// What one listing of a partition shows.
#[derive(Default)]
struct Shown {
    /// Segments, in name order, and their sizes.
    segments: Vec<String>,
    sizes: Vec<u64>,
    /// Keys with an object of their own (written before segments).
    singles: Vec<String>,
}

impl Shown {
    fn of(listed: Vec<Listed>) -> Shown {
        let mut shown = Shown::default();
        for listed in listed {
            match listed.key.split('/').collect::<Vec<_>>()[..] {
                [SEGMENTS, name] if name.ends_with(SEGMENT_SUFFIX) => {
                    shown.segments.push(listed.key.clone());
                    shown.sizes.push(listed.size);
                }
                [dir, file] => {
                    if let Some(key) = file.strip_suffix(".json").filter(|k| is_key(k) && k.starts_with(dir)) {
                        shown.singles.push(key.to_string());
                    }
                }
                _ => {}
            }
        }
        shown
    }
}

impl Partition {
    fn get(&self, shared: &Shared, key: &str) -> Option<Found> {
        let slot = slot(self.number, key)?;
        self.read_listing(shared, None);
        // Tries: after listing the key's old folder, after listing again
        // what another reader folded away.
        for _ in 0..3 {
            let seen = self.generation.load(Ordering::Acquire);
            let holding = shared.held().find(&slot);
            match holding {
                Holding::Loaded { answer, mine, place } => {
                    return Some(Found { name: self.name_of(key, mine, place.as_ref()), bytes: answer });
                }
                Holding::Unloaded(place) => match self.read_again(key, &place) {
                    Ok(Some(answer)) => {
                        shared.held().reloaded(slot, &place, answer.clone());
                        return Some(Found { name: self.name_of(key, false, Some(&place)), bytes: answer });
                    }
                    Ok(None) if matches!(place, Place::Segment { .. }) => {
                        #[cfg(test)]
                        shared.run_shared_hook(|hooks| hooks.before_relist.clone());
                        self.read_listing(shared, Some(seen));
                    }
                    Ok(None) => return None,
                    Err(e) => {
                        tracing::warn!("cache entry {key}: {e:#}; its request is sent again");
                        return None;
                    }
                },
                Holding::Absent if self.list_folder_of(shared, key) => {}
                Holding::Absent => return None,
            }
        }
        None
    }

    fn name_of(&self, key: &str, mine: bool, place: Option<&Place>) -> String {
        match place {
            _ if mine => format!("{} (this run's answer {key})", self.at.url()),
            Some(Place::Single) => format!("{}/{}", self.at.url(), super::cache::entry_key(key)),
            _ => format!("{}/{SEGMENTS} (answer {key})", self.at.url()),
        }
    }

    /// The answer to `key` at `place`, read again (None: no longer there).
    fn read_again(&self, key: &str, place: &Place) -> anyhow::Result<Option<Bytes>> {
        match place {
            Place::Single => self.at.get(&super::cache::entry_key(key)),
            Place::Segment { name, start, len } => {
                // With its line break: a line cut short reads as gone.
                let line = self.at.get_range(name, *start..start + len + 1)?;
                // A segment is written once under a name, but a folded one can be
                // written again (by a slow reader, after a later fold deleted it),
                // its lines elsewhere: the line must be the key's, whole.
                Ok(line
                    .filter(|l| {
                        l.len() as u64 == len + 1
                            && l.ends_with(b"\n")
                            && l.starts_with(key.as_bytes())
                            && l.get(key.len()) == Some(&b'\t')
                    })
                    .map(|l| l.slice(key.len() + 1..l.len() - 1)))
            }
        }
    }

    /// Lists the partition and reads its segments, once (`again_since`:
    /// once more, a segment read before being gone, unless another thread
    /// listed again since the listing generation given). When it cannot be
    /// read, a warning: its answers are then asked again.
    fn read_listing(&self, shared: &Shared, again_since: Option<u64>) {
        let read = || self.generation.load(Ordering::Acquire) != 0;
        if again_since.is_none() && read() {
            return;
        }
        let mut listing = locked(&self.listing);
        let done = match again_since {
            None => read(),
            Some(seen) => self.generation.load(Ordering::Acquire) != seen,
        };
        if done {
            return;
        }
        if let Err(e) = self.try_read_listing(shared, &mut listing, again_since.is_some()) {
            tracing::warn!(
                "could not read the cached answers of {}: {e:#}; their requests are sent again",
                self.at.url()
            );
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn try_read_listing(&self, shared: &Shared, listing: &mut Listing, again: bool) -> anyhow::Result<()> {
        let mut listing_again = false;
        loop {
            // This process's segments from here on may not be in the listing, but are not gone.
            let first_unlisted = shared.first_unlisted();
            let (shown, old_folders) = self.list()?;
            #[cfg(test)]
            shared.run_hook(|hooks| hooks.after_list.take());
            if !again && !listing_again {
                // Listed again, the folders listed since are not listed twice (none is written now).
                listing.unlisted = old_folders;
                // Bounded, an answer of a segment can be forgotten: a folder listed
                // later would then give an older answer of its key. Listed first
                // (at most 256 LISTs, once), the segments' answers replace them.
                if self.holds_partitions && !shown.segments.is_empty() && shared.held().max_bytes().is_some() {
                    for folder in std::mem::take(&mut listing.unlisted) {
                        self.hold_folder(shared, &folder);
                    }
                }
            }
            if again {
                let live: HashSet<&str> = shown.segments.iter().map(String::as_str).collect();
                let gone = |name: &str| !live.contains(name) && !shared.wrote_since(name, first_unlisted);
                shared.held().forget_segments(self.number, gone);
            }
            {
                let mut held = shared.held();
                for key in &shown.singles {
                    held.stored(slot(self.number, key).expect("a listed key"), Place::Single, None);
                }
            }
            if self.read_segments(shared, &shown, listing_again)? || listing_again {
                return Ok(());
            }
            // Folded by another reader since listed: its folded segment holds them.
            listing_again = true;
        }
    }

    /// The partition's segments and single answers; the root: its segments,
    /// and its folders of single answers, unlisted.
    fn list(&self) -> anyhow::Result<(Shown, BTreeSet<String>)> {
        if !self.holds_partitions {
            return Ok((Shown::of(self.at.list("")?), BTreeSet::new()));
        }
        // Two LISTs: one with a delimiter names `segments/` but not what is
        // in it, and one without would list every partition's segments.
        let folders = self.at.folders("")?;
        let segments = match folders.iter().any(|f| f == SEGMENTS) {
            true => self.at.list(SEGMENTS)?,
            false => Vec::new(),
        };
        let old_folders = folders.into_iter().filter(|f| f.len() == 2 && is_hex(f)).collect();
        Ok((Shown::of(segments), old_folders))
    }

    /// Lists the old folder of `key` if it is not listed yet; whether it was.
    fn list_folder_of(&self, shared: &Shared, key: &str) -> bool {
        // Only the root has old folders: a partition's miss need not wait
        // for a listing under way.
        if !self.holds_partitions {
            return false;
        }
        let mut listing = locked(&self.listing);
        if !listing.unlisted.remove(&key[..2]) {
            return false;
        }
        self.hold_folder(shared, &key[..2])
    }

    /// [`Self::try_hold_folder`]; whether it held them. A failure is a
    /// warning and loses that folder's answers only (their requests are sent
    /// again): the folder is not listed again, where a later listing could
    /// bring back an answer older than a segment's.
    fn hold_folder(&self, shared: &Shared, folder: &str) -> bool {
        match self.try_hold_folder(shared, folder) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("could not list the cached answers of {}: {e:#}", self.at.url());
                false
            }
        }
    }

    /// Lists the old folder `folder` and holds the places of its answers
    /// (not of those a segment has).
    fn try_hold_folder(&self, shared: &Shared, folder: &str) -> anyhow::Result<()> {
        let listed = self.at.list(folder)?;
        let mut held = shared.held();
        for single in Shown::of(listed).singles {
            let slot = slot(self.number, &single).expect("a listed key");
            // An answer in a segment comes first.
            if !held.knows(&slot) {
                held.stored(slot, Place::Single, None);
            }
        }
        Ok(())
    }

    /// Reads the listed segments, a few at a time, folding runs of small
    /// ones when there are many; false when one is gone (and `skip_gone` is
    /// not set: the caller lists again).
    fn read_segments(&self, shared: &Shared, shown: &Shown, skip_gone: bool) -> anyhow::Result<bool> {
        let limit = shared.segment_bytes() as u64;
        let folds = match shown.segments.len() >= FOLD_SEGMENTS {
            true => fold_groups(&shown.sizes, limit),
            false => Vec::new(),
        };
        // Read a bound's worth at a time (a bounded cache must not hold all of them at once).
        let read_bytes = if shared.held().max_bytes().is_some() { limit } else { u64::MAX };
        let mut damaged = 0;
        for (range, fold) in read_groups(&shown.sizes, &folds, read_bytes) {
            let names = &shown.segments[range];
            let segments = self.at.get_all(names)?;
            if segments.iter().any(Option::is_none) && !skip_gone {
                return Ok(false);
            }
            // Listed in name order: later segments replace earlier answers.
            match fold.then(|| self.fold(names, &segments)).flatten() {
                Some((name, folded)) => damaged += self.hold_segment(shared, name, &folded),
                None => {
                    for (name, segment) in names.iter().zip(&segments) {
                        if let Some(segment) = segment {
                            damaged += self.hold_segment(shared, name.clone(), segment);
                        }
                    }
                }
            }
        }
        if damaged > 0 {
            tracing::warn!(
                "{damaged} damaged line(s) in the cache segments of {}: their requests are sent again",
                self.at.url()
            );
        }
        Ok(true)
    }

    /// Holds the answers of the segment `name`; returns its damaged lines.
    fn hold_segment(&self, shared: &Shared, name: String, segment: &Bytes) -> usize {
        let name: Arc<str> = Arc::from(name);
        let mut held = shared.held();
        segment_lines(segment, |key, line, answer| {
            let place = Place::Segment { name: name.clone(), start: line.start, len: line.end - line.start };
            held.stored(slot(self.number, key).expect("a checked key"), place, Some(answer));
        })
    }

    /// Replaces the segments `names` (consecutive in name order, read as
    /// `segments`) by one holding their answers: written first, then they
    /// are deleted, so a reader finds every answer in one or the other (one
    /// that listed before and finds a segment gone lists again). Its name
    /// sorts where the last folded one's did, so answers of the segments
    /// after it still replace its own. Returns it when this reader wrote it.
    fn fold(&self, names: &[String], segments: &[Option<Bytes>]) -> Option<(String, Bytes)> {
        let last = names.last()?;
        let mut answers = HashMap::new();
        for segment in segments.iter().flatten() {
            read_segment(segment, &mut answers);
        }
        let name = format!("{}-folded{SEGMENT_SUFFIX}", last.trim_end_matches(SEGMENT_SUFFIX));
        let mut keys: Vec<&String> = answers.keys().collect();
        keys.sort();
        let (segment, _) = segment_of(keys.into_iter().map(|k| (k.as_str(), &answers[k])));
        match self.at.put_if(&name, segment.clone(), None) {
            Ok(Conditional::Written) => {
                match names.iter().try_for_each(|old| self.at.delete(old)) {
                    Ok(()) => tracing::info!("folded {} cache segments of {} into one", names.len(), self.at.url()),
                    // Read twice by later readers, the later answers still last.
                    Err(e) => tracing::warn!("could not delete the cache segments folded in {name}: {e:#}"),
                }
                Some((name, segment))
            }
            // Folded by another reader at the same moment: it deletes them.
            Ok(Conditional::Lost) => None,
            Err(e) => {
                tracing::warn!("could not fold the cache segments of {}: {e:#}", self.at.url());
                None
            }
        }
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
/// order: each fold group whole (true: to fold), the others together up to
/// `limit` bytes (at least one a run).
fn read_groups(sizes: &[u64], folds: &[Range<usize>], limit: u64) -> Vec<(Range<usize>, bool)> {
    let mut groups = Vec::new();
    let mut start = 0;
    for fold in folds.iter().chain([&(sizes.len()..sizes.len())]) {
        let mut bytes = 0;
        for (i, &size) in sizes.iter().enumerate().take(fold.start).skip(start) {
            if bytes > 0 && bytes + size > limit {
                groups.push((start..i, false));
                start = i;
                bytes = 0;
            }
            bytes += size;
        }
        if start < fold.start {
            groups.push((start..fold.start, false));
        }
        if !fold.is_empty() {
            groups.push((fold.clone(), true));
        }
        start = fold.end;
    }
    groups
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
                Ok(key) if is_key(key) => each(key, line_start as u64..end as u64, line.slice(tab + 1..)),
                _ => damaged += 1,
            },
            _ => damaged += 1,
        }
    }
    damaged
}

/// Adds a segment's answers to `answers`; returns how many lines do not read.
fn read_segment(segment: &Bytes, answers: &mut HashMap<String, Bytes>) -> usize {
    segment_lines(segment, |key, _, answer| {
        answers.insert(key.to_string(), answer);
    })
}

/// Lowercase hex digits only.
fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| hex_digit(b).is_some())
}

/// A cache key: 64 lowercase hex digits.
fn is_key(s: &str) -> bool {
    slot(0, s).is_some()
}

#[cfg(test)]
mod tests;
