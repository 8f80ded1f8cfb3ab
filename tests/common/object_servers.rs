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
    #[allow(dead_code)] // read by the root package's tests only
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
        let answer = http(self.port, &format!("PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"));
        assert!(answer.starts_with("HTTP/1.1 200"), "moto did not create bucket {bucket}: {answer}");
    }

    /// Creates a blob container on Azurite, signed with the development key.
    pub fn create_container(&self, container: &str) {
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
        let answer = http(self.port, &request);
        assert!(answer.starts_with("HTTP/1.1 201"), "Azurite did not create container {container}: {answer}");
    }
}

/// moto's S3 server, or `None` (skipped) where it is not installed outside CI.
/// `env`: extra environment of the server (e.g. `INITIAL_NO_AUTH_ACTION_COUNT=0`
/// to make it check credentials).
pub fn moto(env: &[(&str, &str)]) -> Option<ObjectServer> {
    let port = free_port();
    let mut command = Command::new("moto_server");
    command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    for (k, v) in env {
        command.env(k, v);
    }
    start(command, port, "moto_server", "python3 -m pip install \"moto[server]\"")
}

/// Azurite's blob service, or `None` (skipped) where it is not installed outside CI.
pub fn azurite() -> Option<ObjectServer> {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new("azurite-blob");
    command.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string(), "--skipApiVersionCheck", "--silent"]);
    command.arg("--location").arg(dir.path());
    start_in(command, port, "azurite-blob", "npm install -g azurite", dir)
}

fn start(command: Command, port: u16, name: &str, install: &str) -> Option<ObjectServer> {
    start_in(command, port, name, install, tempfile::tempdir().unwrap())
}

fn start_in(
    mut command: Command,
    port: u16,
    name: &str,
    install: &str,
    dir: tempfile::TempDir,
) -> Option<ObjectServer> {
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
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            let err = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("{name} exited ({status}) before it listened on port {port}: {err}");
        }
        assert!(start.elapsed() < READY_WITHIN, "{name} did not listen on port {port} within {READY_WITHIN:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(server)
}

/// A port that was free a moment ago (the server binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One request (head lines without the final blank line), its answer's text.
fn http(port: u16, head: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(format!("{head}Connection: close\r\n\r\n").as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
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
