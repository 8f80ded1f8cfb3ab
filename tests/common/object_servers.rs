//! Real object-storage servers for tests, started on loopback: moto's
//! standalone S3 server (`pip install "moto[server]"`) and Azure's Azurite
//! (`npm install -g azurite`). Each runs on a free port in its own temporary
//! folder and is killed when dropped. A missing binary skips the test with a
//! message, except under CI (which installs both), where it fails.
//!
//! Used by engine/tests (through `#[path]`) and the workspace's tests; needs
//! the sha2, base64 and chrono crates (Azurite's container creation is
//! signed with its well-known development key).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
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
    pub port: u16,
    dir: tempfile::TempDir,
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

    /// Creates an S3 bucket on moto (unsigned: moto accepts it).
    pub fn create_bucket(&self, bucket: &str) {
        let request = format!("PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n");
        self.until_created(&format!("moto did not create bucket {bucket}"), || http(self.port, &request), &["200"]);
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
        http(self.port, &request)
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
        let mut server = ObjectServer { child, port, dir };
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

/// One request (head lines without the final blank line), its answer's text.
/// A connection refused or reset reads as an answer without a status line.
fn http(port: u16, head: &str) -> String {
    let mut answer = String::new();
    let sent = TcpStream::connect(("127.0.0.1", port)).and_then(|mut stream| {
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        stream.write_all(format!("{head}Connection: close\r\n\r\n").as_bytes())?;
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
