//! `graphrag-rs serve` out of file descriptors: more idle connections than
//! its limit allows must not make it spin (the accept loop pauses), and
//! once they close it answers again. The real binary runs as a child with
//! RLIMIT_NOFILE lowered; its CPU time is read from /proc.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The child's descriptor limit, and the idle connections opened against it.
const FD_LIMIT: libc::rlim_t = 64;
const FLOOD: usize = 100;

/// Kills the server when the test ends, passed or not.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// User + system CPU time of process `pid` so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses): utime and
    // stime are the 14th and 15th of the whole line.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Duration::from_secs_f64(ticks as f64 / per_second)
}

/// `GET /health`'s status, or `None` when no answer came within 2 s.
fn health(addr: SocketAddr) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    String::from_utf8_lossy(&head).split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn out_of_descriptors_the_server_pauses_instead_of_spinning_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    graphrag_project::init(dir.path(), &graphrag_project::InitOptions::default()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"));
    cmd.args(["serve", "--port", "0", "--root"]).arg(dir.path()).stdout(Stdio::piped()).stderr(Stdio::null());
    let limit = libc::rlimit { rlim_cur: FD_LIMIT, rlim_max: FD_LIMIT };
    // SAFETY: between fork and exec the closure only calls setrlimit, which
    // is async-signal-safe, on a value it owns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = Serving(cmd.spawn().unwrap());
    let pid = child.0.id();
    // "graphrag-rs serving DIR on http://ADDR"
    // (Kept open to the end: the server's next lines must not meet a closed pipe.)
    let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let addr: SocketAddr =
        first.trim().rsplit("http://").next().unwrap().parse().unwrap_or_else(|e| panic!("{first}: {e}"));
    assert_eq!(health(addr), Some(200), "it answers before the flood");

    let flood: Vec<TcpStream> = (0..FLOOD).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Let it accept until it runs out, then watch it for a second.
    std::thread::sleep(Duration::from_millis(500));
    let (cpu_before, t0) = (cpu_time(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_time(pid) - cpu_before;
    let window = t0.elapsed();
    assert!(
        used.as_secs_f64() < 0.25 * window.as_secs_f64(),
        "out of descriptors, the server used {used:?} of CPU in {window:?}: it spins"
    );

    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(20);
    while health(addr) != Some(200) {
        assert!(Instant::now() < deadline, "no /health answer 20 s after the idle connections closed");
        std::thread::sleep(Duration::from_millis(100));
    }
}
