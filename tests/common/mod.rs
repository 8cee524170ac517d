//! Helpers shared by the dataset tests: a synthetic dataset + lock, and a tiny HTTP/1.1 file
//! server on 127.0.0.1 that supports `Range` and can cut transfers.
#![allow(dead_code)]

use harness_data::lock::{generate, DatasetMeta, Lock};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub const NAME: &str = "toy";
/// Size of the big file: several read buffers, so a cut lands mid-transfer.
pub const BIG: usize = 300_000;

/// Deterministic pseudo-random bytes.
pub fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A mirror root holding dataset `toy` (`SOURCE.txt`, `big.bin`, `sub/small.txt`) and the lock
/// that pins it.
pub fn synthetic() -> (tempfile::TempDir, Lock) {
    let root = tempfile::tempdir().unwrap();
    let d = root.path().join(NAME);
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("SOURCE.txt"), "toy dataset for tests\n").unwrap();
    std::fs::write(d.join("big.bin"), bytes(BIG, 7)).unwrap();
    std::fs::write(d.join("sub/small.txt"), "a\tb\n".repeat(100)).unwrap();
    let meta = BTreeMap::from([(
        NAME.to_string(),
        DatasetMeta {
            version: "1".into(),
            licence: "CC0".into(),
            source: "synthetic".into(),
            format: "toy".into(),
        },
    )]);
    let lock = generate(root.path(), &meta, &mut |_| {}).unwrap();
    (root, lock)
}

/// A copy of the mirror `from` with one byte of `toy/<rel>` flipped.
pub fn corrupted_copy(from: &Path, rel: &str, at: usize) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    copy_tree(from, root.path());
    let p = root.path().join(NAME).join(rel);
    let mut b = std::fs::read(&p).unwrap();
    b[at] ^= 0x01;
    std::fs::write(&p, b).unwrap();
    root
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Every file name under `dir`, recursively, relative, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd {
            let e = e.unwrap();
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &format!("{name}/"), out);
            } else {
                out.push(name);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    out.sort();
    out
}

/// One request the server saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub path: String,
    pub range: Option<String>,
}

/// How the server misbehaves.
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// Cut the connection after this many body bytes on the first `cut_requests` requests
    /// for a file.
    pub cut_after: Option<usize>,
    pub cut_requests: usize,
    /// Answer every request with the whole file (200), ignoring `Range`.
    pub ignore_range: bool,
    /// Answer requests under `/mirror/` with `302 Found` and this `Location`, `{path}`
    /// replaced by the file's path (`/real/{path}` serves the file itself).
    pub redirect: Option<String>,
}

/// A tiny HTTP/1.1 server serving files under `root`, one connection at a time, every
/// response `Connection: close`. Stops (and joins its thread) when dropped.
pub struct Server {
    pub url: String,
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub behaviour: Arc<Mutex<Behaviour>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(root: &Path, behaviour: Behaviour) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let behaviour = Arc::new(Mutex::new(behaviour));
        let root = root.to_path_buf();
        let thread = {
            let (stop, seen, behaviour) = (stop.clone(), seen.clone(), behaviour.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let _ = serve(conn, &root, &seen, &behaviour);
                }
            })
        };
        Server {
            url: format!("http://{addr}/mirror"),
            addr,
            stop,
            seen,
            behaviour,
            thread: Some(thread),
        }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    mut conn: TcpStream,
    root: &Path,
    seen: &Mutex<Vec<Seen>>,
    behaviour: &Mutex<Behaviour>,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    let target = request_line.split_whitespace().nth(1).unwrap_or("/");
    let (rel, redirect) = match (
        target.strip_prefix("/mirror/"),
        target.strip_prefix("/real/"),
    ) {
        (Some(rel), _) => (rel, behaviour.lock().unwrap().redirect.clone()),
        (None, Some(rel)) => (rel, None),
        (None, None) => return respond(&mut conn, "404 Not Found", &[], b"", None),
    };
    if let Some(location) = redirect {
        let location = location.replace("{path}", rel);
        return respond(
            &mut conn,
            "302 Found",
            &[("Location", &location)],
            b"",
            None,
        );
    }
    let rel = percent_decode(rel);
    let earlier = {
        let mut s = seen.lock().unwrap();
        let earlier = s.iter().filter(|r| r.path == rel).count();
        s.push(Seen {
            path: rel.clone(),
            range: range.clone(),
        });
        earlier
    };
    let file: PathBuf = rel.split('/').fold(root.to_path_buf(), |p, c| p.join(c));
    let Ok(body) = std::fs::read(&file) else {
        return respond(&mut conn, "404 Not Found", &[], b"", None);
    };
    let b = behaviour.lock().unwrap().clone();
    let cut = b.cut_after.filter(|_| earlier < b.cut_requests);
    let start = match range.as_deref() {
        Some(r) if !b.ignore_range => r
            .strip_prefix("bytes=")
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|s| s.parse::<usize>().ok()),
        _ => None,
    };
    match start {
        Some(s) if s >= body.len() => {
            let cr = format!("bytes */{}", body.len());
            respond(
                &mut conn,
                "416 Range Not Satisfiable",
                &[("Content-Range", &cr)],
                b"",
                None,
            )
        }
        Some(s) => {
            let cr = format!("bytes {s}-{}/{}", body.len() - 1, body.len());
            respond(
                &mut conn,
                "206 Partial Content",
                &[("Content-Range", &cr)],
                &body[s..],
                cut,
            )
        }
        None => respond(&mut conn, "200 OK", &[], &body, cut),
    }
}

fn respond(
    conn: &mut TcpStream,
    status: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    cut_after: Option<usize>,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    let n = cut_after.map_or(body.len(), |c| c.min(body.len()));
    conn.write_all(&body[..n])?;
    conn.flush()?;
    conn.shutdown(Shutdown::Both)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
