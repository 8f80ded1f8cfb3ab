//! The storage sections (`input_storage`, `output_storage`,
//! `update_output_storage`, `reporting`, `cache.storage`) in GraphRAG 3.3's
//! shape, and their typed form: a local folder or a prefix in a bucket.
//!
//! GraphRAG's keys for `type: blob` are kept as `graphrag init` writes them
//! (`connection_string` or `account_url`, `container_name`, `base_dir`); S3
//! (`bucket`, `endpoint_url`, `region`) and GCS (`bucket`) are graphrag-rs's.
//! Credentials never come from here except Azure's connection string (a
//! [`Secret`]): the rest is read from the environment as the cloud SDKs read it.

use serde::{Deserialize, Serialize};

use super::{s, Secret, Unused};

/// `type:` of a storage section, parsed once here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StorageType {
    /// A folder under the project root.
    #[default]
    File,
    /// Azure Blob Storage (GraphRAG's name).
    Blob,
    /// Amazon S3 or an S3-compatible server.
    S3,
    /// Google Cloud Storage.
    Gcs,
    /// GraphRAG's CosmosDB storage: not implemented here (an error in `check`).
    Cosmosdb,
}

impl StorageType {
    /// The word settings.yaml holds.
    pub fn name(self) -> &'static str {
        match self {
            StorageType::File => "file",
            StorageType::Blob => "blob",
            StorageType::S3 => "s3",
            StorageType::Gcs => "gcs",
            StorageType::Cosmosdb => "cosmosdb",
        }
    }
}

section!(
    /// One storage section. `base_dir` is a folder under the project root
    /// (`type: file`) or the prefix of every object in the bucket or container.
    StorageConfig {
    /// file | blob | s3 | gcs (cosmosdb: refused).
    #[serde(rename = "type")]
    kind: StorageType = StorageType::File,
    /// The folder, or the object-name prefix.
    base_dir: String = s("output"),
    /// Text encoding of files (UTF-8 only).
    encoding: Option<String> = None,
    /// blob: an Azure Storage connection string (`AccountName=…;AccountKey=…;` or
    /// `UseDevelopmentStorage=true`).
    connection_string: Option<Secret> = None,
    /// blob: the container.
    container_name: Option<String> = None,
    /// blob: `https://<account>.blob.core.windows.net` (credentials from the environment).
    account_url: Option<String> = None,
    /// Older GraphRAG name of account_url.
    storage_account_blob_url: Option<String> = None,
    /// cosmosdb only.
    database_name: Option<Unused> = None,
    /// s3, gcs: the bucket.
    bucket: Option<String> = None,
    /// s3: an S3-compatible server's URL (default: AWS, or AWS_ENDPOINT_URL).
    endpoint_url: Option<String> = None,
    /// s3: the region (default: AWS_REGION / AWS_DEFAULT_REGION, else us-east-1).
    region: Option<String> = None,
});

impl StorageConfig {
    pub(super) fn under(base_dir: &str) -> Self {
        StorageConfig { base_dir: s(base_dir), ..StorageConfig::default() }
    }

    /// The remote-storage keys that are set, by name (for `type: file`'s
    /// "ignored" warning and for keys of another backend).
    pub(super) fn remote_keys(&self) -> Vec<&'static str> {
        [
            ("connection_string", self.connection_string.is_some()),
            ("container_name", self.container_name.is_some()),
            ("account_url", self.account_url.is_some()),
            ("storage_account_blob_url", self.storage_account_blob_url.is_some()),
            ("database_name", self.database_name.is_some()),
            ("bucket", self.bucket.is_some()),
            ("endpoint_url", self.endpoint_url.is_some()),
            ("region", self.region.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }

    /// Where this storage lives. Errors name the key (relative to the
    /// section) that is missing, misplaced or malformed.
    pub fn target(&self) -> Result<StorageTarget, StorageKeyError> {
        let service = match self.kind {
            StorageType::File => return Ok(StorageTarget::Folder(self.base_dir.clone())),
            StorageType::Cosmosdb => {
                return Err(StorageKeyError::new(
                    "type",
                    "`cosmosdb` is not implemented in graphrag-rs; supported: file, blob, s3, gcs",
                ))
            }
            StorageType::Blob => {
                self.only_keys(&["connection_string", "container_name", "account_url", "storage_account_blob_url"])?;
                let container = required(&self.container_name, "container_name", "the blob container")?;
                let container = AZURE_CONTAINER.check(container, "container_name")?;
                let url = self.account_url.as_ref().or(self.storage_account_blob_url.as_ref());
                let account = match (&self.connection_string, url) {
                    (Some(_), Some(_)) => {
                        return Err(StorageKeyError::new(
                            "account_url",
                            "set connection_string or account_url, not both",
                        ))
                    }
                    (Some(cs), None) => {
                        if cs.is_empty() {
                            return Err(StorageKeyError::new("connection_string", "is empty"));
                        }
                        AzureAccount::ConnectionString(cs.clone())
                    }
                    (None, Some(url)) => AzureAccount::AccountUrl(http_url(url, "account_url")?),
                    (None, None) => AzureAccount::FromEnvironment,
                };
                RemoteService::AzureBlob { container, account }
            }
            StorageType::S3 => {
                self.only_keys(&["bucket", "endpoint_url", "region"])?;
                let bucket = S3_BUCKET.check(required(&self.bucket, "bucket", "the S3 bucket")?, "bucket")?;
                let endpoint_url = self.endpoint_url.as_deref().map(|u| http_url(u, "endpoint_url")).transpose()?;
                let region = self.region.as_deref().map(str::trim).filter(|r| !r.is_empty()).map(String::from);
                RemoteService::S3 { bucket, endpoint_url, region }
            }
            StorageType::Gcs => {
                self.only_keys(&["bucket"])?;
                let bucket = GCS_BUCKET.check(required(&self.bucket, "bucket", "the GCS bucket")?, "bucket")?;
                RemoteService::Gcs { bucket }
            }
        };
        Ok(StorageTarget::Remote(RemoteStorage { service, prefix: object_prefix(&self.base_dir) }))
    }

    /// A key of another backend set under this one is an error, not ignored.
    fn only_keys(&self, allowed: &[&str]) -> Result<(), StorageKeyError> {
        match self.remote_keys().into_iter().find(|k| !allowed.contains(k)) {
            None => Ok(()),
            Some(key) => Err(StorageKeyError::new(
                key,
                format!(
                    "is not a key of `type: {}` storage (its keys: base_dir, {})",
                    self.kind.name(),
                    allowed.join(", ")
                ),
            )),
        }
    }
}

/// In the working copy of a project whose root is in a bucket, the file
/// that names that root (its URL), written by `storage::root::checkout`:
/// [`super::load`] then keeps the settings' `file` storages in the bucket.
pub(crate) const REMOTE_ROOT_FILE: &str = ".graphrag-rs/root-url";

impl StorageConfig {
    /// A `file` section of a project whose root is the bucket prefix `root`:
    /// the same folder name under that prefix, on the same store (other
    /// types are left as they are). A `base_dir` that leaves the root is an
    /// error: a bucket has nothing above the root to point at.
    pub(crate) fn rebase(&mut self, root: &RemoteStorage) -> Result<(), StorageKeyError> {
        if self.kind != StorageType::File {
            return Ok(());
        }
        let dir = self.base_dir.trim();
        if dir.starts_with(['/', '\\']) || dir.split(['/', '\\']).any(|seg| seg == "..") {
            return Err(StorageKeyError::new(
                "base_dir",
                format!(
                    "`{dir}` is outside the project root {}: with a root in a bucket, base_dir is a folder under it",
                    root.url()
                ),
            ));
        }
        let prefix =
            [root.prefix.clone(), object_prefix(dir)].into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>();
        let base =
            StorageConfig { base_dir: prefix.join("/"), encoding: self.encoding.take(), ..StorageConfig::default() };
        *self = match &root.service {
            RemoteService::S3 { bucket, endpoint_url, region } => StorageConfig {
                kind: StorageType::S3,
                bucket: Some(bucket.clone()),
                endpoint_url: endpoint_url.clone(),
                region: region.clone(),
                ..base
            },
            RemoteService::AzureBlob { container, account } => {
                let (connection_string, account_url) = match account {
                    AzureAccount::ConnectionString(cs) => (Some(cs.clone()), None),
                    AzureAccount::AccountUrl(url) => (None, Some(url.clone())),
                    AzureAccount::FromEnvironment => (None, None),
                };
                StorageConfig {
                    kind: StorageType::Blob,
                    container_name: Some(container.clone()),
                    connection_string,
                    account_url,
                    ..base
                }
            }
            RemoteService::Gcs { bucket } => {
                StorageConfig { kind: StorageType::Gcs, bucket: Some(bucket.clone()), ..base }
            }
        };
        Ok(())
    }
}

fn required(value: &Option<String>, key: &'static str, what: &str) -> Result<String, StorageKeyError> {
    match value.as_deref().map(str::trim) {
        Some(v) if !v.is_empty() => Ok(v.to_string()),
        _ => Err(StorageKeyError::new(key, format!("is required: {what}"))),
    }
}

/// A service's rule for the names of its buckets or containers. A name it
/// refuses is an error here, naming the key and the rule: the service would
/// answer the first request with a raw error (Azure's, a cut 400).
struct NameRule {
    what: &'static str,
    rule: &'static str,
    valid: fn(&str) -> bool,
}

impl NameRule {
    fn check(&self, name: String, key: &'static str) -> Result<String, StorageKeyError> {
        if (self.valid)(&name) {
            return Ok(name);
        }
        Err(StorageKeyError::new(key, format!("`{name}` is not a valid {}: {}", self.what, self.rule)))
    }
}

const AZURE_CONTAINER: NameRule = NameRule {
    what: "blob container name",
    rule: "Azure's are 3-63 characters, lowercase letters, digits and single hyphens, beginning and ending with a letter or digit",
    valid: |name| {
        (3..=63).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !name.contains("--")
            && ends_alphanumeric(name)
    },
};

const S3_BUCKET: NameRule = NameRule {
    what: "S3 bucket name",
    rule: "S3's are 3-63 characters, lowercase letters, digits, dots and hyphens, beginning and ending with a letter or digit, without two dots in a row, not an IP address",
    valid: |name| {
        (3..=63).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && !name.contains("..")
            && ends_alphanumeric(name)
            && name.parse::<std::net::Ipv4Addr>().is_err()
    },
};

const GCS_BUCKET: NameRule = NameRule {
    what: "GCS bucket name",
    rule: "Google's are 3-63 characters (up to 222 with dots, at most 63 between two), lowercase letters, digits, hyphens, underscores and dots, beginning and ending with a letter or digit",
    valid: |name| {
        (3..=222).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
            && name.split('.').all(|part| (1..=63).contains(&part.len()))
            && ends_alphanumeric(name)
    },
};

/// Begins and ends with a lowercase letter or a digit.
fn ends_alphanumeric(name: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.starts_with(alphanumeric) && name.ends_with(alphanumeric)
}

fn http_url(url: &str, key: &'static str) -> Result<String, StorageKeyError> {
    let url = url.trim().trim_end_matches('/');
    let host = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    match host {
        Some(h) if !h.is_empty() => Ok(url.to_string()),
        _ => Err(StorageKeyError::new(key, format!("`{url}` is not an http:// or https:// URL"))),
    }
}

/// `base_dir` as an object-name prefix: no leading `./` or `/`, no empty or
/// `.` segments (a bucket has no folders, only names).
fn object_prefix(base_dir: &str) -> String {
    base_dir.split(['/', '\\']).filter(|seg| !seg.is_empty() && *seg != ".").collect::<Vec<_>>().join("/")
}

/// A storage key that is missing or wrong: `key` is relative to its section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageKeyError {
    /// The key within the section (`bucket`, `connection_string`, …).
    pub key: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl StorageKeyError {
    fn new(key: &'static str, message: impl Into<String>) -> Self {
        StorageKeyError { key, message: message.into() }
    }
}

/// A `--root`: a project folder, or a prefix in a bucket whose settings
/// file and folders live there too (`s3://bucket/prefix`, `az://`, `gs://`).
#[derive(Debug, Clone, PartialEq)]
pub enum ProjectRoot {
    /// A local folder, as given.
    Folder(std::path::PathBuf),
    /// A bucket or container prefix.
    Remote(RemoteStorage),
}

impl ProjectRoot {
    /// A storage URL when the text has a `scheme://`, else a folder path
    /// (as clap's `value_parser`).
    pub fn parse(text: &str) -> Result<ProjectRoot, String> {
        if text.contains("://") {
            RemoteStorage::parse_url(text).map(ProjectRoot::Remote)
        } else {
            Ok(ProjectRoot::Folder(text.into()))
        }
    }
}

/// A storage section, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum StorageTarget {
    /// A folder (`base_dir`, relative to the project root unless absolute).
    Folder(String),
    /// A prefix in a bucket or container (`type: s3`, `blob`, `gcs`).
    Remote(RemoteStorage),
}

/// A prefix in a bucket or container.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteStorage {
    /// The service and its bucket or container.
    pub service: RemoteService,
    /// Object-name prefix, `/`-separated, without leading or trailing `/` (may be empty).
    pub prefix: String,
}

/// An object storage service and where in it; what is not set comes from
/// the environment (AWS_*, AZURE_STORAGE_*, GOOGLE_*).
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteService {
    /// Amazon S3 or an S3-compatible server (`type: s3`).
    S3 {
        /// The bucket's name.
        bucket: String,
        /// An S3-compatible server's URL (MinIO, R2, …); else AWS's, or the
        /// environment's `AWS_ENDPOINT_URL`.
        endpoint_url: Option<String>,
        /// Else the environment's `AWS_REGION`.
        region: Option<String>,
    },
    /// Azure Blob Storage (`type: blob`).
    AzureBlob {
        /// The container's name (`container_name`).
        container: String,
        /// How the account is named and authenticated.
        account: AzureAccount,
    },
    /// Google Cloud Storage (`type: gcs`).
    Gcs {
        /// The bucket's name.
        bucket: String,
    },
}

/// How a blob container's account is named and authenticated.
#[derive(Debug, Clone, PartialEq)]
pub enum AzureAccount {
    /// `connection_string` (account, key or SAS, endpoint).
    ConnectionString(Secret),
    /// `account_url`; credentials from the environment (AZURE_STORAGE_ACCOUNT_KEY,
    /// a service principal, a managed identity).
    AccountUrl(String),
    /// Neither key: AZURE_STORAGE_CONNECTION_STRING, else AZURE_STORAGE_ACCOUNT_NAME
    /// with credentials from the environment.
    FromEnvironment,
}

impl RemoteStorage {
    /// `s3://bucket/prefix`, `az://container/prefix` (also `azure://`), or
    /// `gs://bucket/prefix` (a `--root` or any storage URL). Endpoints, regions
    /// and accounts then come from the environment.
    pub(crate) fn parse_url(url: &str) -> Result<RemoteStorage, String> {
        let (scheme, rest) =
            url.split_once("://").ok_or_else(|| format!("`{url}` is not a storage URL (s3://, az://, gs://)"))?;
        let (name, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if name.is_empty() || name.contains(['?', '#', '@', ':']) {
            return Err(format!("`{url}`: the bucket or container name is missing or not a plain name"));
        }
        let name = name.to_string();
        let service = match scheme.to_ascii_lowercase().as_str() {
            "s3" => RemoteService::S3 { bucket: name, endpoint_url: None, region: None },
            "az" | "azure" => RemoteService::AzureBlob { container: name, account: AzureAccount::FromEnvironment },
            "gs" => RemoteService::Gcs { bucket: name },
            other => return Err(format!("`{other}://` is not a storage scheme: use s3://, az:// or gs://")),
        };
        Ok(RemoteStorage { service, prefix: object_prefix(prefix) })
    }

    /// `s3://bucket/prefix`, `az://container/prefix` or `gs://bucket/prefix`
    /// (what `RemoteStorage::parse_url` reads; endpoints and accounts are
    /// not part of it).
    pub fn url(&self) -> String {
        let (scheme, name) = match &self.service {
            RemoteService::S3 { bucket, .. } => ("s3", bucket),
            RemoteService::AzureBlob { container, .. } => ("az", container),
            RemoteService::Gcs { bucket } => ("gs", bucket),
        };
        format!("{scheme}://{name}/{}", self.prefix).trim_end_matches('/').to_string()
    }

    /// The bucket or container, for messages (no secrets).
    pub fn describe(&self) -> String {
        let (kind, name) = match &self.service {
            RemoteService::S3 { bucket, .. } => ("S3 bucket", bucket),
            RemoteService::AzureBlob { container, .. } => ("blob container", container),
            RemoteService::Gcs { bucket } => ("GCS bucket", bucket),
        };
        if self.prefix.is_empty() {
            format!("{kind} `{name}`")
        } else {
            format!("{kind} `{name}` (prefix `{}`)", self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> StorageConfig {
        serde_yaml_ng::from_str(text).unwrap()
    }

    #[test]
    fn graphrag_init_blob_settings_are_a_container_with_a_connection_string() {
        let st = parse("type: blob\nconnection_string: DefaultEndpointsProtocol=https;AccountName=a;AccountKey=k\ncontainer_name: graphrag\nbase_dir: output\n");
        let StorageTarget::Remote(remote) = st.target().unwrap() else { panic!("remote") };
        assert_eq!(remote.prefix, "output");
        let RemoteService::AzureBlob { container, account: AzureAccount::ConnectionString(cs) } = &remote.service
        else {
            panic!("{remote:?}")
        };
        assert_eq!(container, "graphrag");
        assert!(cs.expose().contains("AccountKey=k"));
        assert!(!format!("{remote:?}").contains("AccountKey"), "the secret stays out of Debug");
    }

    #[test]
    fn each_backend_names_its_missing_or_foreign_key() {
        for (text, key) in [
            ("type: blob\nbase_dir: x\n", "container_name"),
            ("type: blob\ncontainer_name: docs\nconnection_string: a\naccount_url: https://a\n", "account_url"),
            ("type: blob\ncontainer_name: docs\naccount_url: ftp://a\n", "account_url"),
            ("type: blob\ncontainer_name: docs\nbucket: b\n", "bucket"),
            ("type: s3\nregion: eu-west-1\n", "bucket"),
            ("type: s3\nbucket: docs\ncontainer_name: c\n", "container_name"),
            ("type: s3\nbucket: docs\nendpoint_url: localhost:9000\n", "endpoint_url"),
            ("type: gcs\nbucket: docs\nregion: r\n", "region"),
            ("type: gcs\n", "bucket"),
            ("type: cosmosdb\n", "type"),
        ] {
            assert_eq!(parse(text).target().unwrap_err().key, key, "{text}");
        }
    }

    #[test]
    fn s3_and_gcs_settings_are_typed() {
        let st = parse(
            "type: s3\nbucket: runs\nbase_dir: ./runs//one/\nendpoint_url: http://127.0.0.1:9000/\nregion: eu-west-1\n",
        );
        let want = RemoteService::S3 {
            bucket: "runs".into(),
            endpoint_url: Some("http://127.0.0.1:9000".into()),
            region: Some("eu-west-1".into()),
        };
        assert_eq!(
            st.target().unwrap(),
            StorageTarget::Remote(RemoteStorage { service: want, prefix: "runs/one".into() })
        );
        let gcs = parse("type: gcs\nbucket: answers\nbase_dir: cache\n").target().unwrap();
        let want = RemoteStorage { service: RemoteService::Gcs { bucket: "answers".into() }, prefix: "cache".into() };
        assert_eq!(gcs, StorageTarget::Remote(want));
        assert_eq!(parse("base_dir: out\n").target().unwrap(), StorageTarget::Folder("out".into()));
    }

    /// A name the service refuses is one error naming the key and the rule,
    /// not the service's raw answer at the first request.
    #[test]
    fn bucket_and_container_names_follow_their_service_rule() {
        for (text, rule) in [
            ("type: blob\ncontainer_name: ab\n", "3-63 characters, lowercase letters, digits and single hyphens"),
            ("type: blob\ncontainer_name: Graphrag\n", "Azure's"),
            ("type: blob\ncontainer_name: graph--rag\n", "single hyphens"),
            ("type: blob\ncontainer_name: graphrag-\n", "ending with a letter or digit"),
            ("type: blob\ncontainer_name: graph_rag\n", "Azure's"),
            ("type: s3\nbucket: ab\n", "S3's are 3-63 characters"),
            ("type: s3\nbucket: my_bucket\n", "S3's"),
            ("type: s3\nbucket: my..bucket\n", "without two dots in a row"),
            ("type: s3\nbucket: 192.168.0.1\n", "not an IP address"),
            ("type: s3\nbucket: .bucket\n", "beginning"),
            ("type: gcs\nbucket: ab\n", "Google's are 3-63 characters"),
            ("type: gcs\nbucket: My-Bucket\n", "Google's"),
        ] {
            let err = parse(text).target().unwrap_err();
            let key = if text.contains("container_name") { "container_name" } else { "bucket" };
            assert_eq!(err.key, key, "{text}");
            assert!(err.message.contains(rule) && err.message.contains("is not a valid"), "{text}: {}", err.message);
        }
        let long = "a".repeat(64);
        assert!(parse(&format!("type: blob\ncontainer_name: {long}\n")).target().is_err());
        assert!(parse(&format!("type: s3\nbucket: {long}\n")).target().is_err());
        assert!(parse(&format!("type: gcs\nbucket: {long}\n")).target().is_err());
        for text in [
            "type: blob\ncontainer_name: abc\n",
            "type: blob\ncontainer_name: graph-rag-2\n",
            "type: s3\nbucket: my.bucket-1\n",
            "type: gcs\nbucket: my_bucket.example-1\n",
        ] {
            assert!(parse(text).target().is_ok(), "{text}");
        }
        let dotted = format!("type: gcs\nbucket: {long}.{}\n", "b".repeat(63));
        assert!(parse(&dotted).target().is_err(), "a part of 64 between dots");
        assert!(parse(&format!("type: gcs\nbucket: {}.{}\n", "a".repeat(63), "b".repeat(63))).target().is_ok());
    }

    #[test]
    fn storage_urls_parse_into_the_same_typed_value() {
        let s3 = RemoteStorage::parse_url("s3://bucket/a/b/").unwrap();
        assert_eq!(s3.service, RemoteService::S3 { bucket: "bucket".into(), endpoint_url: None, region: None });
        assert_eq!(s3.prefix, "a/b");
        let az = RemoteStorage::parse_url("az://c").unwrap();
        assert_eq!(
            az.service,
            RemoteService::AzureBlob { container: "c".into(), account: AzureAccount::FromEnvironment }
        );
        assert_eq!(az.prefix, "");
        assert!(matches!(RemoteStorage::parse_url("gs://g/p").unwrap().service, RemoteService::Gcs { .. }));
        for bad in ["/tmp/x", "ftp://h/p", "s3:///p", "s3://user@b/p"] {
            assert!(RemoteStorage::parse_url(bad).is_err(), "{bad}");
        }
        assert_eq!(ProjectRoot::parse("proj/x").unwrap(), ProjectRoot::Folder("proj/x".into()));
        assert_eq!(ProjectRoot::parse("s3://bucket/a/b/").unwrap(), ProjectRoot::Remote(s3));
        assert!(ProjectRoot::parse("http://host/p").is_err(), "a URL that is not storage is not a folder either");
    }

    proptest::proptest! {
        #[test]
        fn prefixes_never_have_empty_or_dot_segments(dir in "[a-z./\\\\]{0,24}") {
            let p = object_prefix(&dir);
            proptest::prop_assert!(!p.starts_with('/') && !p.ends_with('/'));
            proptest::prop_assert!(p.is_empty() || p.split('/').all(|seg| !seg.is_empty() && seg != "."));
        }

        #[test]
        fn any_s3_url_with_a_plain_bucket_parses(bucket in "[a-z0-9][a-z0-9.-]{2,20}", prefix in "[a-z0-9/]{0,20}") {
            let remote = RemoteStorage::parse_url(&format!("s3://{bucket}/{prefix}")).unwrap();
            let is_bucket = matches!(&remote.service, RemoteService::S3 { bucket: b, .. } if *b == bucket);
            proptest::prop_assert!(is_bucket);
            proptest::prop_assert_eq!(remote.prefix, object_prefix(&prefix));
        }
    }
}
