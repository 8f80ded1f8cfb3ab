//! The answers of an object store cache that a process holds in memory
//! ([`super::cache_segments`]), and, for a bounded cache (a server's query
//! answers, `query.cache_max_bytes`), the bound on them.
//!
//! Each answer known is an entry: its key, where it can be read again (its
//! line in a segment) and, while it is loaded, its bytes.
//! An unbounded cache (an index's) keeps every answer loaded. A bounded one
//! counts each entry at [`ENTRY_BYTES`] plus its loaded answer and, past the
//! bound, first unloads the least recently used answers (found again with
//! one ranged GET of their line), then, when the entries alone fill the
//! bound, forgets the least recently used entries: those are asked again,
//! as the answers a bounded folder deletes are. Answers not yet written
//! cannot be unloaded or forgotten: they are counted, and kept until their
//! segment is written.
//!
//! The bound is on what [`Held`] holds. While a partition is read, what is
//! being read comes on top, let go once read: a run of segments of up to a
//! quarter of the bound (see `read_runs` in [`super::cache_segments`]), or
//! one larger segment (a segment an index run wrote is up to 16 MiB); while
//! this process folds its own segments, the run being folded.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;

/// What one entry of a bounded cache is counted as, beyond its answer: its
/// key, its place, its tick and its rows in this module's maps, rounded up.
const ENTRY_BYTES: u64 = 192;

/// Where an answer can be read again: the line at `start`, of `len` bytes
/// (without its line break), of the segment `segment` (under the partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    pub segment: Arc<str>,
    pub start: u64,
    pub len: u64,
}

/// An entry's key: its partition's number and the cache key's 32 bytes.
pub(super) type Slot = (u32, [u8; 32]);

/// The slot of the cache key `key` (64 lowercase hex digits) in
/// `partition`; None when `key` is not a cache key (the one place that says
/// what one is).
pub(super) fn slot(partition: u32, key: &str) -> Option<Slot> {
    let hex = key.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, pair) in hex.chunks(2).enumerate() {
        bytes[i] = hex_digit(pair[0])? << 4 | hex_digit(pair[1])?;
    }
    Some((partition, bytes))
}

/// The value of a lowercase hex digit.
pub(super) fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

struct Entry {
    answer: Option<Bytes>,
    /// None while this process's answer is not written yet.
    place: Option<Place>,
    /// Written by this process (a stored answer read later does not replace it).
    mine: bool,
    tick: u64,
}

/// What [`Held::find`] found.
pub(super) enum Holding {
    Loaded { answer: Bytes, mine: bool },
    Unloaded(Place),
    Absent,
}

#[derive(Default)]
pub(super) struct Held {
    /// The bound, for a bounded cache.
    max_bytes: Option<u64>,
    entries: HashMap<Slot, Entry>,
    /// Bounded only: entries that can go (written ones) by last use, and
    /// those of them with their answer loaded.
    by_use: BTreeMap<u64, Slot>,
    loaded_by_use: BTreeMap<u64, Slot>,
    clock: u64,
    /// Bounded only: what the entries are counted as.
    bytes: u64,
}

impl Held {
    /// Holds at most `max_bytes` from now on (set before the first answer).
    pub fn bound(&mut self, max_bytes: u64) {
        self.max_bytes = Some(max_bytes);
    }

    pub(crate) fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }

    /// What the entries are counted as (0 for an unbounded cache).
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The entry of `slot`, now the most recently used.
    pub fn find(&mut self, slot: &Slot) -> Holding {
        self.touch(slot);
        match self.entries.get(slot) {
            Some(Entry { answer: Some(answer), mine, .. }) => Holding::Loaded { answer: answer.clone(), mine: *mine },
            Some(Entry { answer: None, place: Some(place), .. }) => Holding::Unloaded(place.clone()),
            _ => Holding::Absent,
        }
    }

    /// This process's answer to `slot`, kept until it is written.
    pub(crate) fn put_mine(&mut self, slot: Slot, answer: Bytes) {
        self.insert(slot, Entry { answer: Some(answer), place: None, mine: true, tick: 0 });
    }

    /// `answer` to `slot` was written at `place`: it can go once unused, if
    /// it is still the entry's answer.
    pub fn written(&mut self, slot: Slot, answer: &Bytes, place: Place) {
        let Some(entry) = self.entries.get_mut(&slot) else { return };
        if entry.place.is_some() || entry.answer.as_ref() != Some(answer) {
            return;
        }
        entry.place = Some(place);
        if self.max_bytes.is_some() {
            let tick = entry.tick;
            self.by_use.insert(tick, slot);
            self.loaded_by_use.insert(tick, slot);
            self.evict();
        }
    }

    /// An answer the store holds at `place` (loaded when `answer` is given),
    /// replacing what was read before unless this process wrote its own.
    pub(crate) fn stored(&mut self, slot: Slot, place: Place, answer: Option<Bytes>) {
        if self.entries.get(&slot).is_some_and(|e| e.mine) {
            return;
        }
        // A bounded cache copies the answer: a slice would hold its whole segment.
        let answer = match self.max_bytes {
            Some(_) => answer.map(|a| Bytes::copy_from_slice(&a)),
            None => answer,
        };
        self.insert(slot, Entry { answer, place: Some(place), mine: false, tick: 0 });
    }

    /// `answer`, read again from `place`, is loaded if the entry is still there.
    pub(crate) fn reloaded(&mut self, slot: Slot, place: &Place, answer: Bytes) {
        let Some(entry) = self.entries.get_mut(&slot) else { return };
        if entry.answer.is_some() || entry.place.as_ref() != Some(place) {
            return;
        }
        if self.max_bytes.is_none() {
            entry.answer = Some(answer);
            return;
        }
        self.bytes += answer.len() as u64;
        entry.answer = Some(Bytes::copy_from_slice(&answer));
        self.loaded_by_use.insert(entry.tick, slot);
        self.evict();
    }

    /// The entry of `slot`, if its place is in a segment `from` names, is
    /// now at `to` (its writer folded that segment into another).
    pub fn moved(&mut self, slot: &Slot, from: impl Fn(&str) -> bool, to: Place) {
        if let Some(entry) = self.entries.get_mut(slot).filter(|e| e.place.as_ref().is_some_and(|p| from(&p.segment))) {
            entry.place = Some(to);
        }
    }

    fn insert(&mut self, slot: Slot, mut entry: Entry) {
        self.remove(&slot);
        if self.max_bytes.is_none() {
            self.entries.insert(slot, entry);
            return;
        }
        self.clock += 1;
        entry.tick = self.clock;
        self.bytes += ENTRY_BYTES + entry.answer.as_ref().map_or(0, |a| a.len() as u64);
        if entry.place.is_some() {
            self.by_use.insert(entry.tick, slot);
            if entry.answer.is_some() {
                self.loaded_by_use.insert(entry.tick, slot);
            }
        }
        self.entries.insert(slot, entry);
        self.evict();
    }

    fn remove(&mut self, slot: &Slot) {
        let Some(entry) = self.entries.remove(slot) else { return };
        if self.max_bytes.is_some() {
            self.by_use.remove(&entry.tick);
            self.loaded_by_use.remove(&entry.tick);
            self.bytes -= ENTRY_BYTES + entry.answer.map_or(0, |a| a.len() as u64);
        }
    }

    fn touch(&mut self, slot: &Slot) {
        if self.max_bytes.is_none() {
            return;
        }
        let Some(entry) = self.entries.get_mut(slot) else { return };
        self.clock += 1;
        let (old, new) = (entry.tick, self.clock);
        entry.tick = new;
        if self.by_use.remove(&old).is_some() {
            self.by_use.insert(new, *slot);
        }
        if self.loaded_by_use.remove(&old).is_some() {
            self.loaded_by_use.insert(new, *slot);
        }
    }

    /// Unloads, then forgets, the least recently used written entries until
    /// the bound holds (or only unwritten answers are left).
    fn evict(&mut self) {
        let Some(max) = self.max_bytes else { return };
        while self.bytes > max {
            if let Some((_, slot)) = self.loaded_by_use.pop_first() {
                if let Some(answer) = self.entries.get_mut(&slot).and_then(|e| e.answer.take()) {
                    self.bytes -= answer.len() as u64;
                }
            } else if let Some((_, slot)) = self.by_use.pop_first() {
                self.remove(&slot);
            } else {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_of(n: u8) -> Slot {
        (0, [n; 32])
    }

    fn place(n: u64) -> Place {
        Place { segment: Arc::from("s"), start: n * 100, len: 100 }
    }

    fn loaded(held: &mut Held, n: u8) -> Option<Bytes> {
        match held.find(&slot_of(n)) {
            Holding::Loaded { answer, .. } => Some(answer),
            _ => None,
        }
    }

    #[test]
    fn keys_are_read_as_their_32_bytes() {
        let key = "00ff".repeat(16);
        assert_eq!(slot(3, &key), Some((3, [0, 255].repeat(16).try_into().unwrap())));
        assert_eq!(slot(0, &key.to_uppercase()), None);
        assert_eq!(slot(0, &key[1..]), None);
    }

    #[test]
    fn a_bounded_cache_unloads_the_least_recently_used_answers_then_forgets_entries() {
        let mut held = Held::default();
        held.bound(2 * ENTRY_BYTES + 150);
        held.stored(slot_of(1), place(1), Some(Bytes::from(vec![1; 100])));
        held.stored(slot_of(2), place(2), Some(Bytes::from(vec![2; 100])));
        assert!(held.bytes() <= 2 * ENTRY_BYTES + 150);
        assert!(loaded(&mut held, 1).is_none(), "the older answer was unloaded");
        assert!(matches!(held.find(&slot_of(1)), Holding::Unloaded(p) if p == place(1)), "but still found");
        held.reloaded(slot_of(1), &place(1), Bytes::from(vec![1; 100]));
        assert!(loaded(&mut held, 1).is_some() && loaded(&mut held, 2).is_none(), "2 is now the older");
        // 2 was looked at last: entries alone over the bound, 1 (the oldest) goes.
        held.stored(slot_of(3), place(3), None);
        assert!(matches!(held.find(&slot_of(2)), Holding::Unloaded(_)));
        assert!(matches!(held.find(&slot_of(1)), Holding::Absent));
        assert!(held.bytes() <= 2 * ENTRY_BYTES + 150);
    }

    #[test]
    fn unwritten_answers_stay_until_written_and_a_stored_one_does_not_replace_them() {
        let mut held = Held::default();
        held.bound(ENTRY_BYTES);
        let (one, two) = (Bytes::from(vec![1; 50]), Bytes::from(vec![2; 50]));
        held.put_mine(slot_of(1), one.clone());
        held.put_mine(slot_of(2), two.clone());
        assert_eq!(held.bytes(), 2 * ENTRY_BYTES + 100, "over the bound, but nothing written can go");
        held.stored(slot_of(1), place(9), Some(Bytes::from_static(b"other")));
        assert_eq!(loaded(&mut held, 1), Some(one.clone()), "this process's answer wins");
        held.written(slot_of(1), &Bytes::from_static(b"stale"), place(1));
        assert_eq!(held.bytes(), 2 * ENTRY_BYTES + 100, "written with another answer: still kept");
        held.written(slot_of(1), &one, place(1));
        held.written(slot_of(2), &two, place(2));
        assert!(held.bytes() <= ENTRY_BYTES);
    }

    #[test]
    fn an_unbounded_cache_keeps_everything_and_counts_nothing() {
        let mut held = Held::default();
        for n in 0..10 {
            held.stored(slot_of(n), place(n.into()), Some(Bytes::from(vec![n; 1000])));
        }
        assert_eq!(held.bytes(), 0);
        assert!((0..10).all(|n| loaded(&mut held, n).is_some()));
    }

    #[test]
    fn an_entry_moves_with_its_segment_only() {
        let mut held = Held::default();
        held.stored(slot_of(1), place(1), None);
        let folded = Place { segment: Arc::from("folded"), start: 0, len: 100 };
        held.moved(&slot_of(1), |segment| segment == "other", folded.clone());
        assert!(matches!(held.find(&slot_of(1)), Holding::Unloaded(p) if p == place(1)), "another segment's fold");
        held.moved(&slot_of(1), |segment| segment == "s", folded.clone());
        assert!(matches!(held.find(&slot_of(1)), Holding::Unloaded(p) if p == folded));
    }
}
