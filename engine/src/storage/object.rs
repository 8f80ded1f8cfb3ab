//! A [`super::Location`]'s objects in an object store (S3, Azure Blob, GCS
//! through the `object_store` crate): a prefix of a bucket or container.
//!
//! The engine is synchronous (steps run on threads, verbs `block_on` the
//! LLM layer's runtime), so this is too: each call is spawned on one small
//! runtime of this module's own and its answer waited for over a channel.
//! That works from any thread — a worker of another tokio runtime included,
//! where `block_on` would panic — and keeps object_store's types inside this
//! file. Every request is bounded by the store's client options (timeouts,
//! retries), which the connector sets.

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use anyhow::{anyhow, Context};
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

/// A prefix of an object store.
#[derive(Clone)]
pub struct ObjectLocation {
    store: Arc<dyn ObjectStore>,
    prefix: Key,
    /// `s3://bucket/prefix` or the like, for messages (no credentials).
    url: String,
}

impl std::fmt::Debug for ObjectLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectLocation({})", self.url)
    }
}

/// An object's contents with the version a conditional write must name.
pub(crate) struct Versioned {
    pub bytes: Bytes,
    pub version: UpdateVersion,
}

/// How a conditional write ended.
pub(crate) enum Conditional {
    Written,
    /// Someone else wrote (or created) the object first.
    Lost,
}

/// One listed object: its key under the location and its size and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The object's name under the location's prefix, `/`-separated.
    pub key: String,
    /// Bytes.
    pub size: u64,
    /// When it was last written.
    pub modified: SystemTime,
}

/// What one LIST with a delimiter shows: the objects and folders directly
/// under a prefix.
struct Level {
    objects: Vec<Listed>,
    folders: Vec<String>,
}

/// Runs `fut` on this module's runtime and waits for its answer.
pub(crate) fn run<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> anyhow::Result<T> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    let runtime = RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("object-store")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| anyhow!("starting the object store client's runtime: {e}"))?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().map_err(|_| anyhow!("an object store request ended without an answer (it panicked)"))
}

impl ObjectLocation {
    /// The objects of `store` under `prefix`; `url` names them in messages.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, url: impl Into<String>) -> anyhow::Result<ObjectLocation> {
        let prefix = Key::parse(prefix).with_context(|| format!("`{prefix}` is not an object key prefix"))?;
        Ok(ObjectLocation { store, prefix, url: url.into() })
    }

    /// The objects of `store` under the key `prefix`.
    pub(crate) fn at(store: Arc<dyn ObjectStore>, prefix: Key, url: String) -> ObjectLocation {
        ObjectLocation { store, prefix, url }
    }

    /// `s3://bucket/prefix` (or `az://`, `gs://`), for messages.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The location `sub` (a `/`-separated key prefix) under this one.
    pub fn join(&self, sub: &str) -> ObjectLocation {
        let mut prefix = self.prefix.clone();
        for part in sub.split('/').filter(|p| !p.is_empty()) {
            prefix = prefix.join(part);
        }
        ObjectLocation { store: self.store.clone(), prefix, url: format!("{}/{sub}", self.url.trim_end_matches('/')) }
    }

    fn key(&self, rel: &str) -> Key {
        rel.split('/').filter(|p| !p.is_empty()).fold(self.prefix.clone(), |k, part| k.join(part))
    }

    fn name(&self, rel: &str) -> String {
        format!("{}/{rel}", self.url.trim_end_matches('/'))
    }

    /// The object `rel`, or `None` when there is none.
    pub fn get(&self, rel: &str) -> anyhow::Result<Option<Bytes>> {
        Ok(self.get_versioned(rel)?.map(|v| v.bytes))
    }

    /// The objects `rels` (same order; `None` for one that is gone), a few
    /// requests at a time.
    pub(crate) fn get_all(&self, rels: &[String]) -> anyhow::Result<Vec<Option<Bytes>>> {
        /// Requests in flight at once.
        const CONCURRENT_GETS: usize = 16;
        let store = self.store.clone();
        let keys: Vec<Key> = rels.iter().map(|rel| self.key(rel)).collect();
        let got = run(async move {
            futures_util::stream::iter(keys.into_iter().map(|key| {
                let store = store.clone();
                async move {
                    match store.get(&key).await {
                        Ok(found) => found.bytes().await.map(Some),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            }))
            .buffered(CONCURRENT_GETS)
            .try_collect::<Vec<_>>()
            .await
        })?;
        got.with_context(|| format!("reading {} objects under {}", rels.len(), self.url))
    }

    /// The bytes `range` of the object `rel`, or `None` when there is no
    /// such object (one ranged GET).
    pub(crate) fn get_range(&self, rel: &str, range: std::ops::Range<u64>) -> anyhow::Result<Option<Bytes>> {
        let (store, key) = (self.store.clone(), self.key(rel));
        let got = run(async move {
            match store.get_range(&key, range).await {
                Ok(bytes) => Ok(Some(bytes)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        got.with_context(|| format!("reading part of {}", self.name(rel)))
    }

    pub(crate) fn get_versioned(&self, rel: &str) -> anyhow::Result<Option<Versioned>> {
        let (store, key) = (self.store.clone(), self.key(rel));
        let got = run(async move {
            match store.get(&key).await {
                Ok(found) => {
                    let version =
                        UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
                    found.bytes().await.map(|bytes| Some(Versioned { bytes, version }))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        got.with_context(|| format!("reading {}", self.name(rel)))
    }

    /// Writes the object `rel` whole (a reader sees the old or the new one).
    pub fn put(&self, rel: &str, bytes: Bytes) -> anyhow::Result<()> {
        let (store, key) = (self.store.clone(), self.key(rel));
        run(async move { store.put(&key, PutPayload::from(bytes)).await })?
            .map(|_| ())
            .with_context(|| format!("writing {}", self.name(rel)))
    }

    /// Writes `rel` only if it is still at `expected` (`None`: only if it
    /// does not exist): the store's conditional put.
    pub(crate) fn put_if(
        &self,
        rel: &str,
        bytes: Bytes,
        expected: Option<UpdateVersion>,
    ) -> anyhow::Result<Conditional> {
        let (store, key) = (self.store.clone(), self.key(rel));
        let mode = expected.map_or(PutMode::Create, PutMode::Update);
        let opts = PutOptions { mode, ..PutOptions::default() };
        let result = run(async move { store.put_opts(&key, PutPayload::from(bytes), opts).await })?;
        match result {
            Ok(_) => Ok(Conditional::Written),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(Conditional::Lost)
            }
            Err(e) => Err(e).with_context(|| format!("writing {} conditionally", self.name(rel))),
        }
    }

    /// Every object under `sub` (`""`: the whole location), sorted by key.
    pub fn list(&self, sub: &str) -> anyhow::Result<Vec<Listed>> {
        let (store, base, prefix) = (self.store.clone(), self.prefix.clone(), self.key(sub));
        let listed = run(async move {
            let metas: Vec<object_store::ObjectMeta> = store.list(Some(&prefix)).try_collect().await?;
            Ok::<_, object_store::Error>(under(&base, metas))
        })?;
        let mut listed = listed.with_context(|| format!("listing {}", self.name(sub)))?;
        listed.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(listed)
    }

    /// The objects directly under `sub` (`""`: the top of the location), not
    /// those further down, sorted by key (one LIST with a delimiter).
    pub(crate) fn list_level(&self, sub: &str) -> anyhow::Result<Vec<Listed>> {
        Ok(self.level(sub)?.objects)
    }

    /// The names of the folders directly under `sub` (`""`: the top of the
    /// location), sorted (one LIST with a delimiter).
    pub(crate) fn folders(&self, sub: &str) -> anyhow::Result<Vec<String>> {
        Ok(self.level(sub)?.folders)
    }

    /// What is directly under `sub`, each part sorted: one LIST with a delimiter.
    fn level(&self, sub: &str) -> anyhow::Result<Level> {
        let (store, base, prefix) = (self.store.clone(), self.prefix.clone(), self.key(sub));
        let listed = run(async move {
            let prefix = (!prefix.as_ref().is_empty()).then_some(prefix);
            let found = store.list_with_delimiter(prefix.as_ref()).await?;
            let folders = found.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_string)).collect();
            Ok::<_, object_store::Error>(Level { objects: under(&base, found.objects), folders })
        })?;
        let mut level = listed.with_context(|| format!("listing {}", self.name(sub)))?;
        level.objects.sort_by(|a, b| a.key.cmp(&b.key));
        level.folders.sort();
        Ok(level)
    }

    /// Whether the object `rel` exists (one HEAD: nothing is downloaded).
    pub fn exists(&self, rel: &str) -> anyhow::Result<bool> {
        let (store, key) = (self.store.clone(), self.key(rel));
        match run(async move { store.head(&key).await })? {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e).with_context(|| format!("looking for {}", self.name(rel))),
        }
    }

    /// Deletes `rel` (nothing when it is already gone).
    pub fn delete(&self, rel: &str) -> anyhow::Result<()> {
        let (store, key) = (self.store.clone(), self.key(rel));
        match run(async move { store.delete(&key).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting {}", self.name(rel))),
        }
    }

    /// Copies the local file `path` to the object `rel`.
    pub fn upload(&self, path: &Path, rel: &str) -> anyhow::Result<()> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        self.put(rel, Bytes::from(bytes))
    }

    /// Copies the object `rel` to the local file `path` (atomically); false
    /// when there is no such object.
    pub(crate) fn download(&self, rel: &str, path: &Path) -> anyhow::Result<bool> {
        let Some(bytes) = self.get(rel)? else { return Ok(false) };
        crate::store::atomic_write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
        Ok(true)
    }
}

/// Listed objects by their keys relative to `base`.
fn under(base: &Key, metas: Vec<object_store::ObjectMeta>) -> Vec<Listed> {
    metas
        .into_iter()
        .filter_map(|m| {
            let rel: Vec<String> = m.location.prefix_match(base)?.map(|p| p.as_ref().to_string()).collect();
            Some(Listed { key: rel.join("/"), size: m.size, modified: m.last_modified.into() })
        })
        .collect()
}

/// The real object-storage servers the workspace's tests start (moto, Azurite, fake-gcs-server).
#[cfg(test)]
#[path = "../../../tests/common/object_servers.rs"]
#[allow(dead_code)] // Azurite's starter and some helpers serve other test crates only
pub(crate) mod object_servers;

/// Object stores on moto's S3 server for the tests of this crate.
#[cfg(test)]
pub(crate) mod testing {
    use object_store::aws::{AmazonS3Builder, S3ConditionalPut};

    use super::object_servers::{ObjectServer, MOTO_KEY_ID, MOTO_SECRET};
    use super::*;

    /// moto on a free loopback port, or None (skipped) where it is not
    /// installed outside CI.
    pub fn moto() -> Option<ObjectServer> {
        super::object_servers::moto(&[])
    }

    impl ObjectServer {
        /// A new bucket `name` on this moto server, as an object store.
        pub fn bucket(&self, name: &str) -> Arc<dyn ObjectStore> {
            self.create_bucket(name);
            Arc::new(s3_builder(&self.endpoint(), name).build().unwrap())
        }

        pub fn location(&self, bucket: &str, prefix: &str) -> ObjectLocation {
            ObjectLocation::new(self.bucket(bucket), prefix, format!("s3://{bucket}/{prefix}")).unwrap()
        }

        /// The bucket `bucket` (made if new) of this moto server reached
        /// through `proxy`, by a client that retries a failed request once
        /// only: an outage the proxy makes outlasts the client's own
        /// retries, as a longer one does those of a real store's client.
        pub fn location_through(&self, proxy: &OutageProxy, bucket: &str, prefix: &str) -> ObjectLocation {
            self.create_bucket(bucket);
            let store = s3_builder(&format!("http://127.0.0.1:{}", proxy.port), bucket)
                .with_retry(retry_once())
                .build()
                .unwrap();
            ObjectLocation::new(Arc::new(store), prefix, format!("s3://{bucket}/{prefix}")).unwrap()
        }
    }

    /// A client that retries a failed request once only: an outage a
    /// proxy makes outlasts the client's own retries, as a longer one does
    /// those of a real store's client.
    fn retry_once() -> object_store::RetryConfig {
        object_store::RetryConfig {
            backoff: object_store::BackoffConfig::default(),
            max_retries: 1,
            retry_timeout: std::time::Duration::from_secs(1),
        }
    }

    /// Which object store a [`TestStore`] is.
    #[derive(Clone, Copy, Debug)]
    pub enum Kind {
        S3,
        Azure,
        Gcs,
    }

    /// One of the object store servers the tests run on (moto, Azurite,
    /// fake-gcs-server), as the locations a test reaches it by.
    pub struct TestStore {
        pub kind: Kind,
        pub server: ObjectServer,
    }

    /// Every object store server installed here (under CI: all three, or
    /// the test fails).
    pub fn every_store() -> Vec<TestStore> {
        let servers = [
            (Kind::S3, moto()),
            (Kind::Azure, super::object_servers::azurite()),
            (Kind::Gcs, super::object_servers::gcs()),
        ];
        servers.into_iter().filter_map(|(kind, server)| Some(TestStore { kind, server: server? })).collect()
    }

    impl TestStore {
        /// The prefix `prefix` of the bucket (container) `bucket`, made if new.
        pub fn location(&self, bucket: &str, prefix: &str) -> ObjectLocation {
            self.location_at(self.server.port, bucket, prefix, object_store::RetryConfig::default())
        }

        /// [`TestStore::location`] reached through `proxy`, by a client
        /// that retries a failed request once only.
        pub fn location_through(&self, proxy: &OutageProxy, bucket: &str, prefix: &str) -> ObjectLocation {
            self.location_at(proxy.port, bucket, prefix, retry_once())
        }

        /// The first line of the request that uploads `key` of `bucket`,
        /// up to the key (what [`OutageProxy::fail_at`] matches).
        pub fn upload_line(&self, bucket: &str, key: &str) -> String {
            match self.kind {
                Kind::S3 => format!("PUT /{bucket}/{key}"),
                // object_store's GCS client encodes every byte of the key but letters and digits.
                Kind::Gcs => {
                    let encoded: String = key
                        .bytes()
                        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
                        .collect();
                    format!("PUT /{bucket}/{encoded}")
                }
                Kind::Azure => format!("PUT /{}/{bucket}/{key}", super::object_servers::AZURITE_ACCOUNT),
            }
        }

        fn location_at(
            &self,
            port: u16,
            bucket: &str,
            prefix: &str,
            retry: object_store::RetryConfig,
        ) -> ObjectLocation {
            let endpoint = format!("http://127.0.0.1:{port}");
            let options = object_store::ClientOptions::new().with_allow_http(true);
            let (store, url): (Arc<dyn ObjectStore>, String) = match self.kind {
                Kind::S3 => {
                    self.server.create_bucket(bucket);
                    (
                        Arc::new(s3_builder(&endpoint, bucket).with_retry(retry).build().unwrap()),
                        format!("s3://{bucket}"),
                    )
                }
                Kind::Azure => {
                    use super::object_servers::{AZURITE_ACCOUNT, AZURITE_KEY};
                    self.server.create_container(bucket);
                    let store = object_store::azure::MicrosoftAzureBuilder::new()
                        .with_account(AZURITE_ACCOUNT)
                        .with_access_key(AZURITE_KEY)
                        .with_container_name(bucket)
                        .with_endpoint(format!("{endpoint}/{AZURITE_ACCOUNT}"))
                        .with_client_options(options)
                        .with_retry(retry)
                        .with_http_connector(crate::storage::remote::SharedTlsConnector)
                        .build()
                        .unwrap();
                    (Arc::new(store), format!("az://{bucket}"))
                }
                Kind::Gcs => {
                    self.server.create_bucket(bucket);
                    // As object_store's own tests reach fake-gcs-server (see gcs()).
                    let key = serde_json::json!({
                        "gcs_base_url": endpoint, "disable_oauth": true,
                        "client_email": "", "private_key": "", "private_key_id": "",
                    });
                    let store = object_store::gcp::GoogleCloudStorageBuilder::new()
                        .with_service_account_key(key.to_string())
                        .with_bucket_name(bucket)
                        .with_client_options(options)
                        .with_retry(retry)
                        .with_http_connector(crate::storage::remote::SharedTlsConnector)
                        .build()
                        .unwrap();
                    (Arc::new(store), format!("gs://{bucket}"))
                }
            };
            ObjectLocation::new(store, prefix, format!("{url}/{prefix}")).unwrap()
        }
    }

    fn s3_builder(endpoint: &str, bucket: &str) -> AmazonS3Builder {
        AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id(MOTO_KEY_ID)
            .with_secret_access_key(MOTO_SECRET)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_http_connector(crate::storage::remote::SharedTlsConnector)
    }

    /// A TCP proxy on loopback in front of a server that a test makes fail
    /// like a store's outage: at the request it is told (the first line of
    /// the request contains a text), its connection is cut — before the
    /// request reaches the server, or after, losing the answer — and for
    /// the outage's length after that every connection is cut, new ones as
    /// soon as accepted.
    pub struct OutageProxy {
        pub port: u16,
        shared: Arc<ProxyState>,
    }

    /// An outage the proxy is to start.
    struct Planned {
        request: String,
        /// Whether the request reaches the server (its answer is lost).
        reaches_server: bool,
        outage: std::time::Duration,
    }

    struct ProxyState {
        upstream: u16,
        planned: std::sync::Mutex<Option<Planned>>,
        /// Outages started so far.
        started: std::sync::atomic::AtomicUsize,
        down_until: std::sync::Mutex<Option<std::time::Instant>>,
        /// Both ends of every connection proxied, to cut when an outage starts.
        open: std::sync::Mutex<Vec<std::net::TcpStream>>,
        stopped: std::sync::atomic::AtomicBool,
    }

    impl ProxyState {
        fn down(&self) -> bool {
            self.down_until.lock().unwrap().is_some_and(|until| std::time::Instant::now() < until)
        }

        fn start_outage(&self, outage: std::time::Duration) {
            *self.down_until.lock().unwrap() = Some(std::time::Instant::now() + outage);
            self.started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            for stream in self.open.lock().unwrap().drain(..) {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }

        /// The planned outage, taken, when `chunk` begins the request it names.
        fn outage_at(&self, chunk: &[u8]) -> Option<Planned> {
            let mut planned = self.planned.lock().unwrap();
            let first_line = chunk.split(|b| *b == b'\n').next().unwrap_or(chunk);
            let at = planned.as_ref().is_some_and(|p| String::from_utf8_lossy(first_line).contains(&p.request));
            if at {
                planned.take()
            } else {
                None
            }
        }
    }

    impl OutageProxy {
        /// A proxy to the server on loopback port `upstream`.
        pub fn start(upstream: u16) -> OutageProxy {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let shared = Arc::new(ProxyState {
                upstream,
                planned: Default::default(),
                started: Default::default(),
                down_until: Default::default(),
                open: Default::default(),
                stopped: Default::default(),
            });
            let state = shared.clone();
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if state.stopped.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    if state.down() {
                        let _ = client.shutdown(std::net::Shutdown::Both);
                        continue;
                    }
                    let state = state.clone();
                    std::thread::spawn(move || relay(state, client));
                }
            });
            OutageProxy { port, shared }
        }

        /// Plans an outage of `outage` at the next request whose first line
        /// contains `request`; `reaches_server`: that request is carried out
        /// and only its answer lost.
        pub fn fail_at(&self, request: &str, reaches_server: bool, outage: std::time::Duration) {
            *self.shared.planned.lock().unwrap() =
                Some(Planned { request: request.to_string(), reaches_server, outage });
        }

        /// How many planned outages have started.
        pub fn outages(&self) -> usize {
            self.shared.started.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl Drop for OutageProxy {
        fn drop(&mut self) {
            self.shared.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        }
    }

    /// Carries one connection both ways until either end closes or an
    /// outage cuts it.
    fn relay(state: Arc<ProxyState>, client: std::net::TcpStream) {
        use std::io::{Read, Write};
        let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", state.upstream)) else { return };
        let cut = |a: &std::net::TcpStream, b: &std::net::TcpStream| {
            let _ = a.shutdown(std::net::Shutdown::Both);
            let _ = b.shutdown(std::net::Shutdown::Both);
        };
        {
            let mut open = state.open.lock().unwrap();
            open.extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
        }
        // Set when the request whose answer is to be lost went through.
        let answer_lost = Arc::new(std::sync::Mutex::new(None::<std::time::Duration>));
        let answers = {
            let (state, answer_lost) = (state.clone(), answer_lost.clone());
            let (mut from, mut to) = (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = from.read(&mut buf).unwrap_or(0);
                    if let Some(outage) = answer_lost.lock().unwrap().take() {
                        state.start_outage(outage);
                        cut(&from, &to);
                        return;
                    }
                    if n == 0 || state.down() || to.write_all(&buf[..n]).is_err() {
                        cut(&from, &to);
                        return;
                    }
                }
            })
        };
        let (mut from, mut to) = (client, server);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = from.read(&mut buf).unwrap_or(0);
            if n == 0 || state.down() {
                cut(&from, &to);
                break;
            }
            if let Some(planned) = state.outage_at(&buf[..n]) {
                if !planned.reaches_server {
                    state.start_outage(planned.outage);
                    cut(&from, &to);
                    break;
                }
                *answer_lost.lock().unwrap() = Some(planned.outage);
            }
            if to.write_all(&buf[..n]).is_err() {
                cut(&from, &to);
                break;
            }
        }
        let _ = answers.join();
    }
}

#[cfg(test)]
mod tests {
    use super::testing::moto;
    use super::*;

    #[test]
    fn objects_round_trip_list_and_conditional_writes_on_moto() {
        let Some(moto) = moto() else { return };
        let loc = moto.location("round-trip", "project/output");
        assert!(loc.get("a.json").unwrap().is_none());
        loc.put("a.json", Bytes::from_static(b"one")).unwrap();
        loc.put("v-1/t.parquet", Bytes::from_static(b"table")).unwrap();
        assert_eq!(loc.get("a.json").unwrap().unwrap(), Bytes::from_static(b"one"));
        let keys: Vec<String> = loc.list("").unwrap().into_iter().map(|l| l.key).collect();
        assert_eq!(keys, ["a.json", "v-1/t.parquet"]);
        assert_eq!(loc.join("v-1").list("").unwrap()[0].key, "t.parquet");
        assert_eq!(loc.folders("").unwrap(), ["v-1"], "folders only, not the objects beside them");
        assert_eq!(loc.get_range("v-1/t.parquet", 1..3).unwrap().unwrap(), Bytes::from_static(b"ab"));
        assert!(loc.get_range("v-2/t.parquet", 1..3).unwrap().is_none());
        // Create only once; update only from the version read.
        assert!(matches!(loc.put_if("m", Bytes::from_static(b"1"), None).unwrap(), Conditional::Written));
        assert!(matches!(loc.put_if("m", Bytes::from_static(b"2"), None).unwrap(), Conditional::Lost));
        let first = loc.get_versioned("m").unwrap().unwrap();
        let stale = first.version.clone();
        assert!(matches!(
            loc.put_if("m", Bytes::from_static(b"2"), Some(first.version)).unwrap(),
            Conditional::Written
        ));
        assert!(matches!(loc.put_if("m", Bytes::from_static(b"3"), Some(stale)).unwrap(), Conditional::Lost));
        assert_eq!(loc.get("m").unwrap().unwrap(), Bytes::from_static(b"2"));
        loc.delete("a.json").unwrap();
        loc.delete("a.json").unwrap();
        assert!(loc.get("a.json").unwrap().is_none());
        let dir = tempfile::tempdir().unwrap();
        assert!(loc.download("v-1/t.parquet", &dir.path().join("t.parquet")).unwrap());
        assert!(!loc.download("nothing", &dir.path().join("n")).unwrap());
        assert_eq!(std::fs::read(dir.path().join("t.parquet")).unwrap(), b"table");
    }
}
