//! Request counts of an object store: a decorator over the real store that
//! counts each request by kind and the bytes it moved (what an index, a
//! cached re-index or an update costs in GETs, PUTs and LISTs). The stores
//! [`super::Storage`] opens count into this process's counters of their
//! setting and location (`CountingStore::for_setting`), from which a run
//! reports its own in stats.json (`storage_requests`: [`RequestSnapshot`]).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
};
use serde::Serialize;

/// The counts so far (a snapshot; `stats.json`'s shape).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounts {
    /// GETs, whole or ranged (one per range when ranges are not coalesced).
    pub gets: u64,
    /// HEADs (an object's size and version, without its bytes).
    pub heads: u64,
    /// PUTs: single-request writes, and one per part of a multipart upload.
    pub puts: u64,
    /// LIST calls (a listing of more than one page makes more requests).
    pub lists: u64,
    /// Objects named by LIST answers.
    pub listed: u64,
    /// DELETEs.
    pub deletes: u64,
    /// Server-side copies; a rename counts as a copy and a delete.
    pub copies: u64,
    /// Bytes of GET answers' bodies.
    pub bytes_read: u64,
    /// Bytes of PUT bodies.
    pub bytes_written: u64,
}

impl RequestCounts {
    /// The requests made after `before` was taken (of the same counters).
    pub fn since(&self, before: &RequestCounts) -> RequestCounts {
        let d = |now: u64, then: u64| now.saturating_sub(then);
        RequestCounts {
            gets: d(self.gets, before.gets),
            heads: d(self.heads, before.heads),
            puts: d(self.puts, before.puts),
            lists: d(self.lists, before.lists),
            listed: d(self.listed, before.listed),
            deletes: d(self.deletes, before.deletes),
            copies: d(self.copies, before.copies),
            bytes_read: d(self.bytes_read, before.bytes_read),
            bytes_written: d(self.bytes_written, before.bytes_written),
        }
    }
}

/// Requests per storage setting (`input_storage`, `output_storage`,
/// `cache.storage`): a run's `storage_requests` in stats.json.
pub type RequestsBySetting = BTreeMap<String, RequestCounts>;

/// A store's counters: its setting and location (`s3://bucket/prefix`).
type CountersKey = (&'static str, String);

/// The counters of each setting and location a store was opened for in
/// this process (every store of one location counts into the same).
fn registry() -> &'static Mutex<BTreeMap<CountersKey, Arc<Counters>>> {
    static COUNTERS: OnceLock<Mutex<BTreeMap<CountersKey, Arc<Counters>>>> = OnceLock::new();
    COUNTERS.get_or_init(Mutex::default)
}

/// Every location's counts at one moment (the start of a run).
#[derive(Debug, Clone, Default)]
pub struct RequestSnapshot {
    counts: BTreeMap<CountersKey, RequestCounts>,
}

impl RequestSnapshot {
    /// The counts now.
    pub fn now() -> RequestSnapshot {
        let counters = registry().lock().unwrap_or_else(|e| e.into_inner());
        RequestSnapshot { counts: counters.iter().map(|(key, c)| (key.clone(), c.snapshot())).collect() }
    }

    /// The requests made since this snapshot to the locations `locations`
    /// (setting, location), by setting: those of a run to its own storages
    /// (a run beside it in the process on other locations is not counted;
    /// one on the same locations is). Settings without requests are left out.
    pub(crate) fn requests_since<'a>(
        &self,
        locations: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> RequestsBySetting {
        let now = RequestSnapshot::now();
        let mut by_setting = RequestsBySetting::new();
        for (setting, location) in locations {
            let Some((key, counts)) = now.counts.iter().find(|((s, l), _)| *s == setting && l == location) else {
                continue;
            };
            let since = self.counts.get(key).map_or(*counts, |before| counts.since(before));
            by_setting.insert(setting.to_string(), since);
        }
        by_setting
    }
}

/// The requests a run counts: to its storages' locations (setting,
/// location), since it began.
#[derive(Debug, Clone)]
pub struct RunRequests {
    /// Taken as the run began.
    pub since: RequestSnapshot,
    /// The run's storages: (setting, location), e.g. (`output_storage`, `s3://bucket/prefix`).
    pub locations: Vec<(&'static str, String)>,
}

impl RunRequests {
    /// The requests made since then to those locations, by setting.
    pub fn counts(&self) -> RequestsBySetting {
        self.since.requests_since(self.locations.iter().map(|(setting, location)| (*setting, location.as_str())))
    }
}

#[derive(Debug, Default)]
struct Counters {
    gets: AtomicU64,
    heads: AtomicU64,
    puts: AtomicU64,
    lists: AtomicU64,
    listed: AtomicU64,
    deletes: AtomicU64,
    copies: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    fn snapshot(&self) -> RequestCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RequestCounts {
            gets: get(&self.gets),
            heads: get(&self.heads),
            puts: get(&self.puts),
            lists: get(&self.lists),
            listed: get(&self.listed),
            deletes: get(&self.deletes),
            copies: get(&self.copies),
            bytes_read: get(&self.bytes_read),
            bytes_written: get(&self.bytes_written),
        }
    }
}

/// `inner`, counting every request made through it.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counters: Arc<Counters>,
}

impl CountingStore {
    /// `inner`, counting into counters of its own (not the process's, which
    /// [`RequestSnapshot`] reads).
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore { inner, counters: Arc::default() }
    }

    /// `inner`, counting into this process's counters of the storage
    /// setting `setting` at `location` (see [`RequestSnapshot`]).
    pub(crate) fn for_setting(setting: &'static str, location: &str, inner: Arc<dyn ObjectStore>) -> Self {
        let mut counters = registry().lock().unwrap_or_else(|e| e.into_inner());
        let counters = counters.entry((setting, location.to_string())).or_default().clone();
        CountingStore { inner, counters }
    }

    /// The requests made so far.
    pub fn counts(&self) -> RequestCounts {
        self.counters.snapshot()
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        add(&self.counters.puts, 1);
        add(&self.counters.bytes_written, payload.content_length() as u64);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CountingUpload { inner: upload, counters: self.counters.clone() }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        add(if head { &self.counters.heads } else { &self.counters.gets }, 1);
        let result = self.inner.get_opts(location, options).await?;
        if !head {
            add(&self.counters.bytes_read, result.range.end - result.range.start);
        }
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        // The inner store coalesces close ranges into fewer requests; count
        // what it fetched, not what was asked (a fair upper bound: one each).
        add(&self.counters.gets, ranges.len() as u64);
        let parts = self.inner.get_ranges(location, ranges).await?;
        add(&self.counters.bytes_read, parts.iter().map(|b| b.len() as u64).sum());
        Ok(parts)
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        let counters = self.counters.clone();
        self.inner
            .delete_stream(locations)
            .inspect(move |deleted| {
                if deleted.is_ok() {
                    add(&counters.deletes, 1);
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        add(&self.counters.lists, 1);
        let counters = self.counters.clone();
        self.inner
            .list(prefix)
            .inspect(move |meta| {
                if meta.is_ok() {
                    add(&counters.listed, 1);
                }
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        add(&self.counters.lists, 1);
        let result = self.inner.list_with_delimiter(prefix).await?;
        add(&self.counters.listed, (result.objects.len() + result.common_prefixes.len()) as u64);
        Ok(result)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        add(&self.counters.copies, 1);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        // A rename is a copy and a delete on every object store.
        add(&self.counters.copies, 1);
        add(&self.counters.deletes, 1);
        self.inner.rename_opts(from, to, options).await
    }
}

#[derive(Debug)]
struct CountingUpload {
    inner: Box<dyn MultipartUpload>,
    counters: Arc<Counters>,
}

#[async_trait]
impl MultipartUpload for CountingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        add(&self.counters.puts, 1);
        add(&self.counters.bytes_written, data.content_length() as u64);
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutMode};

    use super::*;

    #[tokio::test]
    async fn every_request_kind_is_counted_with_its_bytes() {
        let store = CountingStore::new(Arc::new(InMemory::new()));
        let a = Path::from("v1/a.parquet");
        store.put(&a, PutPayload::from_static(b"hello")).await.unwrap();
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        assert!(store.put_opts(&a, PutPayload::from_static(b"again"), opts).await.is_err(), "Create over an object");
        assert_eq!(store.get(&a).await.unwrap().bytes().await.unwrap(), "hello");
        assert_eq!(store.get_range(&a, 1..3).await.unwrap(), "el");
        store.head(&a).await.unwrap();
        let listed: Vec<_> = store.list(Some(&Path::from("v1"))).collect().await;
        assert_eq!(listed.len(), 1);
        store.list_with_delimiter(None).await.unwrap();
        store.copy(&a, &Path::from("v2/a.parquet")).await.unwrap();
        store.delete(&a).await.unwrap();
        let counts = store.counts();
        let want = RequestCounts {
            gets: 2,
            heads: 1,
            puts: 2,
            lists: 2,
            listed: 2,
            deletes: 1,
            copies: 1,
            bytes_read: 7,
            bytes_written: 10,
        };
        assert_eq!(counts, want);
    }

    #[tokio::test]
    async fn stores_of_one_location_count_together_and_a_run_counts_its_own_locations_since_it_began() {
        let (setting, here, elsewhere) = ("counting_test_storage", "s3://here/p", "s3://elsewhere/p");
        let before = RequestSnapshot::now();
        let store = |location| CountingStore::for_setting(setting, location, Arc::new(InMemory::new()));
        let (one, two, other) = (store(here), store(here), store(elsewhere));
        one.put(&Path::from("a"), PutPayload::from_static(b"abc")).await.unwrap();
        two.put(&Path::from("b"), PutPayload::from_static(b"de")).await.unwrap();
        other.put(&Path::from("c"), PutPayload::from_static(b"f")).await.unwrap();
        let mid = RequestSnapshot::now();
        two.get(&Path::from("b")).await.unwrap().bytes().await.unwrap();
        let whole = before.requests_since([(setting, here)])[setting];
        assert_eq!((whole.puts, whole.gets, whole.bytes_written, whole.bytes_read), (2, 1, 5, 2));
        let after_mid = mid.requests_since([(setting, here)])[setting];
        assert_eq!((after_mid.puts, after_mid.gets), (0, 1));
        assert_eq!(one.counts(), two.counts(), "one location's counters");
        assert_eq!(before.requests_since([(setting, elsewhere)])[setting].puts, 1, "another location apart");
        assert!(before.requests_since([("no_such_setting", here)]).is_empty());
    }

    #[tokio::test]
    async fn multipart_parts_are_puts() {
        let store = CountingStore::new(Arc::new(InMemory::new()));
        let mut upload = store.put_multipart(&Path::from("big")).await.unwrap();
        upload.put_part(PutPayload::from_static(b"abc")).await.unwrap();
        upload.put_part(PutPayload::from_static(b"de")).await.unwrap();
        upload.complete().await.unwrap();
        assert_eq!((store.counts().puts, store.counts().bytes_written), (2, 5));
        assert_eq!(store.get(&Path::from("big")).await.unwrap().bytes().await.unwrap(), "abcde");
    }
}
