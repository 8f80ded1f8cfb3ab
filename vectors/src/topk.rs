//! Scored rows, their ordering, and bounded top-k selection.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A row index with its similarity to the query (higher is better).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scored {
    pub score: f32,
    pub index: u32,
}

/// NaN sorts below everything; -0.0 and +0.0 compare equal.
#[inline]
fn key(s: f32) -> f32 {
    if s.is_nan() {
        f32::NEG_INFINITY
    } else {
        s
    }
}

/// `Greater` when `a` ranks before `b`: higher score, then lower index.
#[inline]
pub(crate) fn cmp_rank(a: &Scored, b: &Scored) -> Ordering {
    match key(a.score).partial_cmp(&key(b.score)) {
        Some(Ordering::Equal) | None => b.index.cmp(&a.index),
        Some(o) => o,
    }
}

/// `true` when `a` ranks strictly before `b`.
#[inline]
pub(crate) fn better(a: &Scored, b: &Scored) -> bool {
    cmp_rank(a, b) == Ordering::Greater
}

/// Heap element whose maximum is the best-ranked entry.
#[derive(Clone, Copy)]
pub(crate) struct BestFirst(pub Scored);

impl PartialEq for BestFirst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for BestFirst {}
impl PartialOrd for BestFirst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for BestFirst {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_rank(&self.0, &other.0)
    }
}

/// Heap element whose maximum is the worst-ranked entry.
#[derive(Clone, Copy)]
pub(crate) struct WorstFirst(pub Scored);

impl PartialEq for WorstFirst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for WorstFirst {}
impl PartialOrd for WorstFirst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for WorstFirst {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_rank(&other.0, &self.0)
    }
}

/// Keeps the `k` best-ranked entries pushed so far (a bounded binary heap
/// with the worst kept entry on top), without sorting everything.
pub(crate) struct TopK {
    k: usize,
    heap: BinaryHeap<WorstFirst>,
}

impl TopK {
    pub fn new(k: usize) -> Self {
        TopK { k, heap: BinaryHeap::with_capacity(k.min(4096) + 1) }
    }

    #[inline]
    pub fn push(&mut self, s: Scored) {
        if self.heap.len() < self.k {
            self.heap.push(WorstFirst(s));
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if better(&s, &worst.0) {
                *worst = WorstFirst(s);
            }
        }
    }

    pub fn merge(mut self, other: TopK) -> TopK {
        let (mut big, small) = if self.heap.len() >= other.heap.len() {
            (std::mem::take(&mut self.heap), other.heap)
        } else {
            (other.heap, std::mem::take(&mut self.heap))
        };
        let mut out = TopK { k: self.k, heap: std::mem::take(&mut big) };
        for s in small {
            out.push(s.0);
        }
        out
    }

    /// Best first.
    pub fn into_sorted(self) -> Vec<Scored> {
        let mut v: Vec<Scored> = self.heap.into_iter().map(|w| w.0).collect();
        v.sort_by(|a, b| cmp_rank(b, a));
        v
    }
}
