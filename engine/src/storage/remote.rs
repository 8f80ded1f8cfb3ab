//! Connecting to a bucket or container: a typed storage setting (or a
//! `s3://` / `az://` / `gs://` URL) becomes an `Arc<dyn ObjectStore>` and
//! the prefix of every object under it, checked with one cheap request.
//!
//! Credentials come from the environment as the cloud SDKs read them
//! (`AWS_*`, `AZURE_STORAGE_*`, `GOOGLE_APPLICATION_CREDENTIALS` or
//! `GOOGLE_SERVICE_ACCOUNT`), or from a blob section's `connection_string`;
//! none of them is ever put in a message, a log line or a cache. A GCS
//! emulator is named as object_store names it: `gcs_base_url` (with
//! `disable_oauth`) in the service-account key, or GOOGLE_BASE_URL. Every request has a connect and a total timeout and
//! a bounded number of retries, so an endpoint that is down is named within
//! seconds, not minutes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::client::{HttpClient, HttpConnector, HttpError, HttpErrorKind};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path;
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, ObjectStore, RetryConfig};

use crate::settings::{AzureAccount, RemoteService, RemoteStorage, Secret};

/// Time to open a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for a whole request, body included (tables are read and written
/// whole; a 64 MiB Parquet file at 10 MB/s fits).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Retries of a failed request (5xx, connection reset, timeout), with
/// exponential backoff from 100 ms, all within `RETRY_TIMEOUT`.
const MAX_RETRIES: usize = 4;
const RETRY_TIMEOUT: Duration = Duration::from_secs(20);
/// The first request's bound: a missing bucket, a refused credential or an
/// endpoint that does not answer is reported within this.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connected bucket or container and the prefix under which this storage's
/// objects live.
#[derive(Clone)]
pub struct RemoteStore {
    /// The bucket or container, with this crate's timeouts, retries and TLS.
    pub store: Arc<dyn ObjectStore>,
    /// Where the storage's objects live in it (empty: at its root).
    pub prefix: Path,
    /// The setting it came from (`output_storage`, `--root`), for messages.
    pub setting: String,
    /// The bucket or container, for messages (no secrets).
    pub what: String,
    endpoint: String,
}

impl fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemoteStore({}: {} at {})", self.setting, self.what, self.endpoint)
    }
}

/// Why a bucket or container cannot be used. Each names the setting and the
/// cause; none carries a credential.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The bucket or container does not exist.
    #[error("{setting}: {what} does not exist (create it, or correct the name)")]
    NoSuchBucket {
        /// The setting it came from (`output_storage`, `--root`).
        setting: String,
        /// The bucket or container.
        what: String,
    },
    /// The credentials were refused.
    #[error("{setting}: access to {what} was denied: check the credentials ({cause})")]
    AccessDenied {
        /// The setting it came from (`output_storage`, `--root`).
        setting: String,
        /// The bucket or container.
        what: String,
        /// What the server or the client library said.
        cause: String,
    },
    /// No connection to the endpoint, or no answer in time.
    #[error("{setting}: the storage endpoint {endpoint} cannot be reached ({cause})")]
    EndpointDown {
        /// The setting it came from (`output_storage`, `--root`).
        setting: String,
        /// The URL requests go to.
        endpoint: String,
        /// What the server or the client library said.
        cause: String,
    },
    /// The store cannot be built from the settings and environment (before
    /// any request).
    #[error("{setting}: {message}")]
    Settings {
        /// The setting it came from (`output_storage`, `--root`).
        setting: String,
        /// What is wrong, and what to set.
        message: String,
    },
    /// Any other failed request.
    #[error("{setting}: {what}: {cause}")]
    Other {
        /// The setting it came from (`output_storage`, `--root`).
        setting: String,
        /// The bucket or container.
        what: String,
        /// What the server or the client library said.
        cause: String,
    },
}

/// Builds the store for `remote` and makes one LIST under its prefix, so
/// that what is wrong is said now, naming `setting`.
pub async fn connect(setting: &str, remote: &RemoteStorage) -> Result<RemoteStore, RemoteError> {
    let store = open(setting, remote)?;
    store.probe().await?;
    Ok(store)
}

/// Builds the store without any request (credentials and endpoint are
/// resolved; nothing is checked against the server).
pub fn open(setting: &str, remote: &RemoteStorage) -> Result<RemoteStore, RemoteError> {
    let settings_error = |message: String| RemoteError::Settings { setting: setting.to_string(), message };
    // The three builders share these settings but no trait: timeouts, retries,
    // the shared-TLS client, and a build error that names the setting.
    macro_rules! build {
        ($builder:expr, $endpoint:expr) => {
            $builder
                .with_client_options(client_options(&$endpoint))
                .with_retry(retry_config())
                .with_http_connector(SharedTlsConnector)
                .build()
                .map(|store| Arc::new(store) as Arc<dyn ObjectStore>)
                .map_err(|e| settings_error(format!("cannot use {}: {e}", remote.describe())))?
        };
    }
    let (store, endpoint) = match &remote.service {
        RemoteService::S3 { bucket, endpoint_url, region } => {
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            // The setting's endpoint over the environment's (AWS_ENDPOINT_URL_S3, which
            // object_store prefers to AWS_ENDPOINT_URL, included).
            if let Some(url) = endpoint_url {
                builder = builder.with_endpoint(url).with_config(AmazonS3ConfigKey::S3Endpoint, url);
            }
            if let Some(region) = region {
                builder = builder.with_region(region);
            }
            let endpoint = builder
                .get_config_value(&AmazonS3ConfigKey::S3Endpoint)
                .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::Endpoint))
                .unwrap_or_else(|| "https://s3.amazonaws.com".to_string());
            (build!(builder, endpoint), endpoint)
        }
        RemoteService::AzureBlob { container, account } => {
            let builder = azure_builder(setting, account)?;
            let endpoint = builder
                .get_config_value(&AzureConfigKey::Endpoint)
                .or_else(|| {
                    let account = builder.get_config_value(&AzureConfigKey::AccountName)?;
                    Some(format!("https://{account}.blob.core.windows.net"))
                })
                .unwrap_or_else(|| "http://127.0.0.1:10000 (Azurite)".to_string());
            (build!(builder.with_container_name(container), endpoint), endpoint)
        }
        RemoteService::Gcs { bucket } => {
            let builder = GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket);
            let endpoint = gcs_endpoint(&builder);
            (build!(builder, endpoint), endpoint)
        }
    };
    Ok(RemoteStore {
        store,
        prefix: Path::from(remote.prefix.as_str()),
        setting: setting.to_string(),
        what: remote.describe(),
        endpoint,
    })
}

impl RemoteStore {
    /// The endpoint's URL (no credentials).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One LIST (at most one page, one level) under the prefix, bounded by
    /// `PROBE_TIMEOUT`: the bucket exists, the credentials are accepted, the
    /// endpoint answers.
    pub async fn probe(&self) -> Result<(), RemoteError> {
        let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
        match tokio::time::timeout(PROBE_TIMEOUT, self.store.list_with_delimiter(prefix)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.classify_probe(e)),
            Err(_) => Err(RemoteError::EndpointDown {
                setting: self.setting.clone(),
                endpoint: self.endpoint.clone(),
                cause: format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
            }),
        }
    }

    /// The typed error for any failed request on this store. A `NotFound`
    /// of one object is not a missing bucket: callers that expect absent
    /// objects match `object_store::Error::NotFound` before calling this.
    pub fn classify(&self, err: object_store::Error) -> RemoteError {
        self.classify_as(err, false)
    }

    fn classify_probe(&self, err: object_store::Error) -> RemoteError {
        self.classify_as(err, true)
    }

    fn classify_as(&self, err: object_store::Error, listing: bool) -> RemoteError {
        let setting = self.setting.clone();
        let what = self.what.clone();
        let cause = short_cause(&err);
        match kind_of(&err, listing) {
            Failure::EndpointDown => RemoteError::EndpointDown { setting, endpoint: self.endpoint.clone(), cause },
            Failure::NoSuchBucket => RemoteError::NoSuchBucket { setting, what },
            Failure::AccessDenied => RemoteError::AccessDenied { setting, what, cause },
            Failure::Other => RemoteError::Other { setting, what, cause },
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Failure {
    EndpointDown,
    NoSuchBucket,
    AccessDenied,
    Other,
}

/// The error codes the three services answer with, for the failures that are
/// not told apart by object_store's variants (a failed LIST is `Generic`).
const NO_SUCH_BUCKET_CODES: [&str; 3] = ["NoSuchBucket", "ContainerNotFound", "The specified bucket does not exist"];
const ACCESS_DENIED_CODES: [&str; 8] = [
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AuthenticationFailed",
    "AuthorizationFailure",
    "InvalidAuthenticationInfo",
    "403 Forbidden",
    "401 Unauthorized",
];

fn kind_of(err: &object_store::Error, listing: bool) -> Failure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(http) = e.downcast_ref::<HttpError>() {
            if matches!(http.kind(), HttpErrorKind::Connect | HttpErrorKind::Timeout) {
                return Failure::EndpointDown;
            }
        }
        source = e.source();
    }
    let text = err.to_string();
    match err {
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
            Failure::AccessDenied
        }
        _ if NO_SUCH_BUCKET_CODES.iter().any(|c| text.contains(c)) => Failure::NoSuchBucket,
        _ if ACCESS_DENIED_CODES.iter().any(|c| text.contains(c)) => Failure::AccessDenied,
        object_store::Error::NotFound { .. } if listing => Failure::NoSuchBucket,
        _ if listing && text.contains("404 Not Found") => Failure::NoSuchBucket,
        _ => Failure::Other,
    }
}

/// The first line of an error, bounded: servers' error bodies can be long.
/// (object_store redacts signed URLs and never prints credentials.)
fn short_cause(err: &object_store::Error) -> String {
    let text = err.to_string();
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > 300 {
        format!("{}…", line.chars().take(300).collect::<String>())
    } else {
        line.to_string()
    }
}

/// Where a GCS store sends its requests, as object_store decides it:
/// GOOGLE_BASE_URL, else the `gcs_base_url` of the service-account key it
/// reads (GOOGLE_SERVICE_ACCOUNT or GOOGLE_SERVICE_ACCOUNT_KEY: how an
/// emulator is named), else Google's. Its scheme decides whether plain HTTP
/// is allowed, so it must be the URL object_store will use. A key that cannot
/// be read is left to the builder, whose error names it.
fn gcs_endpoint(builder: &GoogleCloudStorageBuilder) -> String {
    #[derive(serde::Deserialize)]
    struct KeyEndpoint {
        gcs_base_url: Option<String>,
    }
    let key = builder.get_config_value(&GoogleConfigKey::ServiceAccountKey).or_else(|| {
        let path = builder.get_config_value(&GoogleConfigKey::ServiceAccount)?;
        std::fs::read_to_string(path).ok()
    });
    let from_key = key.and_then(|key| serde_json::from_str::<KeyEndpoint>(&key).ok()?.gcs_base_url);
    builder
        .get_config_value(&GoogleConfigKey::BaseUrl)
        .or(from_key)
        .unwrap_or_else(|| "https://storage.googleapis.com".to_string())
}

fn retry_config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: MAX_RETRIES,
        retry_timeout: RETRY_TIMEOUT,
    }
}

/// Timeouts, and plain HTTP only where the endpoint says so (a local S3
/// server or Azurite): a cloud endpoint stays https-only.
fn client_options(endpoint: &str) -> ClientOptions {
    ClientOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(REQUEST_TIMEOUT)
        .with_allow_http(endpoint.starts_with("http://"))
}

/// The Azure builder for one account: a connection string (the setting's or
/// AZURE_STORAGE_CONNECTION_STRING), an account URL, or the environment's
/// AZURE_STORAGE_ACCOUNT_NAME and credentials.
fn azure_builder(setting: &str, account: &AzureAccount) -> Result<MicrosoftAzureBuilder, RemoteError> {
    let settings_error = |message: String| RemoteError::Settings { setting: setting.to_string(), message };
    let from_env_string = std::env::var("AZURE_STORAGE_CONNECTION_STRING").ok().map(|s| Secret::from(s.as_str()));
    match account {
        AzureAccount::ConnectionString(cs) => {
            let parsed =
                AzureConnection::parse(cs.expose()).map_err(|e| settings_error(format!("connection_string: {e}")))?;
            Ok(parsed.builder())
        }
        AzureAccount::FromEnvironment if from_env_string.is_some() => {
            let cs = from_env_string.unwrap_or_default();
            let parsed = AzureConnection::parse(cs.expose())
                .map_err(|e| settings_error(format!("AZURE_STORAGE_CONNECTION_STRING: {e}")))?;
            Ok(parsed.builder())
        }
        AzureAccount::FromEnvironment => {
            let builder = MicrosoftAzureBuilder::from_env();
            if builder.get_config_value(&AzureConfigKey::AccountName).is_none() {
                return Err(settings_error(
                    "no storage account: set connection_string or account_url, or AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_NAME in the environment".to_string(),
                ));
            }
            Ok(builder)
        }
        AzureAccount::AccountUrl(url) => {
            let mut builder = MicrosoftAzureBuilder::from_env().with_endpoint(url.clone());
            // https://<account>.blob.core.windows.net names its account; another
            // endpoint (a proxy, Azurite) takes AZURE_STORAGE_ACCOUNT_NAME.
            let host = url.split("://").nth(1).unwrap_or("").split(['/', ':']).next().unwrap_or("");
            if let Some((account, _)) = host.split_once(".blob.") {
                builder = builder.with_account(account);
            }
            if builder.get_config_value(&AzureConfigKey::AccountName).is_none() {
                return Err(settings_error(format!(
                    "account_url `{url}` does not name a storage account (https://<account>.blob.core.windows.net): set AZURE_STORAGE_ACCOUNT_NAME"
                )));
            }
            Ok(builder)
        }
    }
}

/// An Azure Storage connection string's parts that matter for blobs.
#[derive(Default, PartialEq, Eq)]
struct AzureConnection {
    development: bool,
    account: Option<String>,
    key: Option<String>,
    sas: Option<String>,
    blob_endpoint: Option<String>,
    protocol: Option<String>,
    suffix: Option<String>,
}

impl fmt::Debug for AzureConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AzureConnection(account: {:?}, endpoint: {:?}, secrets hidden)", self.account, self.blob_endpoint)
    }
}

impl AzureConnection {
    /// `Key=Value;` pairs (keys as Azure's SDKs accept them, any case; values
    /// may contain `=`). Errors name keys, never values.
    fn parse(text: &str) -> Result<AzureConnection, String> {
        let mut c = AzureConnection::default();
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err("is not a list of Key=Value; pairs".to_string());
            };
            let value = value.trim().to_string();
            match key.trim().to_ascii_lowercase().as_str() {
                "usedevelopmentstorage" => c.development = value.eq_ignore_ascii_case("true"),
                "accountname" => c.account = Some(value),
                "accountkey" => c.key = Some(value),
                "sharedaccesssignature" => c.sas = Some(value),
                "blobendpoint" => c.blob_endpoint = Some(value.trim_end_matches('/').to_string()),
                "defaultendpointsprotocol" => c.protocol = Some(value),
                "endpointsuffix" => c.suffix = Some(value),
                // Other services' endpoints and the emulator's proxy do not apply to blobs.
                "queueendpoint" | "tableendpoint" | "fileendpoint" | "developmentstorageproxyuri" => {}
                other => return Err(format!("unknown key `{other}`")),
            }
        }
        if !c.development && c.account.is_none() {
            return Err("has no AccountName (nor UseDevelopmentStorage=true)".to_string());
        }
        if c.key.is_some() && c.sas.is_some() {
            return Err("has both AccountKey and SharedAccessSignature".to_string());
        }
        Ok(c)
    }

    fn endpoint(&self) -> Option<String> {
        if let Some(e) = &self.blob_endpoint {
            return Some(e.clone());
        }
        let account = self.account.as_ref()?;
        let protocol = self.protocol.as_deref().unwrap_or("https");
        let suffix = self.suffix.as_deref().unwrap_or("core.windows.net");
        Some(format!("{protocol}://{account}.blob.{suffix}"))
    }

    fn builder(&self) -> MicrosoftAzureBuilder {
        let mut builder = MicrosoftAzureBuilder::new();
        if self.development && self.blob_endpoint.is_none() {
            builder = builder.with_use_emulator(true);
        } else if let Some(endpoint) = self.endpoint() {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(account) = &self.account {
            builder = builder.with_account(account);
        }
        if let Some(key) = &self.key {
            builder = builder.with_access_key(key);
        }
        if let Some(sas) = &self.sas {
            builder = builder.with_config(AzureConfigKey::SasKey, sas);
        }
        builder
    }
}

/// object_store's HTTP client on the process's shared TLS configuration
/// (ring, the platform's roots read once, on the first TLS handshake; see
/// `crate::tls`), with the timeouts and scheme policy of the store's options.
#[derive(Debug)]
pub(crate) struct SharedTlsConnector;

impl HttpConnector for SharedTlsConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let duration =
            |key: ClientConfigKey| options.get_config_value(&key).and_then(|v| humantime::parse_duration(&v).ok());
        let allow_http = options.get_config_value(&ClientConfigKey::AllowHttp).is_some_and(|v| v == "true");
        let mut builder =
            reqwest::Client::builder().tls_backend_preconfigured(crate::tls::client_config()).https_only(!allow_http);
        if let Some(t) = duration(ClientConfigKey::ConnectTimeout) {
            builder = builder.connect_timeout(t);
        }
        if let Some(t) = duration(ClientConfigKey::Timeout) {
            builder = builder.timeout(t);
        }
        let client =
            builder.build().map_err(|e| object_store::Error::Generic { store: "HTTP client", source: Box::new(e) })?;
        Ok(HttpClient::new(client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings_name_account_endpoint_and_credential() {
        let azurite = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNO==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1/;";
        let c = AzureConnection::parse(azurite).unwrap();
        assert_eq!(c.account.as_deref(), Some("devstoreaccount1"));
        assert_eq!(c.key.as_deref(), Some("Eby8vdM02xNO=="), "values keep their `=`");
        assert_eq!(c.endpoint().as_deref(), Some("http://127.0.0.1:10000/devstoreaccount1"));
        let cloud =
            AzureConnection::parse("AccountName=acct;AccountKey=k;EndpointSuffix=core.chinacloudapi.cn").unwrap();
        assert_eq!(cloud.endpoint().as_deref(), Some("https://acct.blob.core.chinacloudapi.cn"));
        assert!(AzureConnection::parse("UseDevelopmentStorage=true").unwrap().development);
        assert!(!format!("{c:?}").contains("Eby8"), "Debug hides the key");
    }

    #[test]
    fn bad_connection_strings_name_the_problem_never_the_value() {
        for (text, want) in [
            ("AccountKey=sekrit", "no AccountName"),
            ("AccountName=a;sekrit", "Key=Value"),
            ("AccountName=a;Pasword=sekrit", "unknown key `pasword`"),
            ("AccountName=a;AccountKey=sekrit;SharedAccessSignature=sv=1", "both"),
        ] {
            let err = AzureConnection::parse(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
            assert!(!err.contains("sekrit"), "{err}");
        }
    }

    /// The store is built from the typed setting without a request (the
    /// requests are tested on fake-gcs-server: engine/tests/object_stores.rs).
    #[test]
    fn a_gcs_setting_builds_its_store_without_a_request() {
        let remote = RemoteStorage { service: RemoteService::Gcs { bucket: "b".into() }, prefix: "p/q".into() };
        let store = open("cache.storage", &remote).unwrap();
        assert_eq!(store.prefix.as_ref(), "p/q");
        let shown = format!("{store:?}");
        assert_eq!(
            shown,
            "RemoteStore(cache.storage: GCS bucket `b` (prefix `p/q`) at https://storage.googleapis.com)"
        );
    }

    /// An emulator's key (or GOOGLE_BASE_URL) names the endpoint, so that an
    /// `http://` one is allowed plain HTTP (it was refused as https-only).
    #[test]
    fn a_gcs_emulator_is_named_by_the_service_account_key() {
        let key = r#"{"gcs_base_url": "http://127.0.0.1:4443", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}"#;
        let builder = GoogleCloudStorageBuilder::new().with_service_account_key(key);
        assert_eq!(gcs_endpoint(&builder), "http://127.0.0.1:4443");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.json");
        std::fs::write(&path, key).unwrap();
        let builder = GoogleCloudStorageBuilder::new().with_service_account_path(path.to_str().unwrap());
        assert_eq!(gcs_endpoint(&builder), "http://127.0.0.1:4443");
        assert_eq!(
            gcs_endpoint(&builder.with_base_url("http://10.0.0.1:9000")),
            "http://10.0.0.1:9000",
            "base URL first"
        );
        let cloud = r#"{"client_email": "a@b", "private_key": "k", "private_key_id": "i"}"#;
        let builder = GoogleCloudStorageBuilder::new().with_service_account_key(cloud);
        assert_eq!(gcs_endpoint(&builder), "https://storage.googleapis.com");
    }

    #[test]
    fn list_failures_are_classified_from_the_service_answer() {
        let generic = |text: &str| object_store::Error::Generic { store: "S3", source: text.to_string().into() };
        let listing = |text: &str| kind_of(&generic(text), true);
        assert_eq!(
            listing("Server returned non-2xx status code: 404 Not Found: <Code>NoSuchBucket</Code>"),
            Failure::NoSuchBucket
        );
        assert_eq!(listing("status code: 404 Not Found: <Code>ContainerNotFound</Code>"), Failure::NoSuchBucket);
        assert_eq!(listing("status code: 403 Forbidden: <Code>InvalidAccessKeyId</Code>"), Failure::AccessDenied);
        assert_eq!(listing("status code: 500 Internal Server Error"), Failure::Other);
        let missing_object = object_store::Error::NotFound { path: "a".into(), source: "404".into() };
        assert_eq!(kind_of(&missing_object, false), Failure::Other, "a missing object is not a missing bucket");
    }
}
