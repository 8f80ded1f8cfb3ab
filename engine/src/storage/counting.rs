//! Request counts of an object store: a decorator over the real store that
//! counts each request by kind and the bytes it moved (what an index, a
//! cached re-index or an update costs in GETs, PUTs and LISTs).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
    pub heads: u64,
    /// PUTs: single-request writes, and one per part of a multipart upload.
    pub puts: u64,
    /// LIST calls (a listing of more than one page makes more requests).
    pub lists: u64,
    /// Objects named by LIST answers.
    pub listed: u64,
    pub deletes: u64,
    pub copies: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
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
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore { inner, counters: Arc::default() }
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
