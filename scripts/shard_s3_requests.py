#!/usr/bin/env python3
"""S3 requests of a sharded fast index against a plain one (docs/benchmarks.md, "Sharded indexing").

    python3 scripts/shard_s3_requests.py CORPUS_DIR [--bin target/debug/graphrag-rs]

Starts moto's S3 server and the project's mock model server on loopback, and between graphrag-rs
and moto an HTTP proxy that counts every request by kind (GET, HEAD, PUT, LIST, DELETE, COPY, and
multipart POSTs; a DeleteObjects POST is a DELETE) with the bytes of GET answers and PUT bodies: the whole process, opening and
publishing included (stats.json's `storage_requests` counts a run's steps only). The corpus is put
under input/ of the bucket; output and the model cache are in the bucket too. Then, one command at
a time, each on its own "machine" (a project folder; everything shared goes through the bucket):
a plain `index --method fast`, and the sharded run: `--shard 0/2`, `--shard 1/2`,
`--merge --phase graph`, `--shard 0/2 --phase embed`, `--shard 1/2 --phase embed`, `--merge`.
Prints one Markdown table row per command.
"""

import argparse
import http.client
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

BUCKET = "bench"
KEY_ID, SECRET = "testing", "testing"
KINDS = ["GET", "HEAD", "PUT", "LIST", "DELETE", "COPY", "POST"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, what, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not start on port {port} within {seconds} s")


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.requests = []
        self.n = {k: 0 for k in KINDS}
        self.bytes_read = self.bytes_written = self.not_found = 0

    def take(self):
        with self.lock:
            out = dict(self.n, bytes_read=self.bytes_read, bytes_written=self.bytes_written, not_found=self.not_found,
                       requests=self.requests)
            self.reset()
            return out


def kind_of(method, path, query, headers):
    q = urllib.parse.parse_qs(query, keep_blank_values=True)
    if method == "GET" and ("list-type" in q or path.strip("/").count("/") == 0):
        return "LIST"
    if method == "PUT" and "x-amz-copy-source" in {h.lower() for h in headers}:
        return "COPY"
    if method == "POST" and "delete" in q:
        return "DELETE"  # object_store deletes through DeleteObjects (here one key a request)
    return method


def proxy(target_port, counts):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def handle_one(self):
            length = int(self.headers.get("Content-Length") or 0)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    chunk = self.rfile.read(size + 2)[:size]
                    if size == 0:
                        break
                    body += chunk
            else:
                body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            conn = http.client.HTTPConnection("127.0.0.1", target_port, timeout=120)
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            path, _, query = self.path.partition("?")
            kind = kind_of(self.command, path, query, self.headers.keys())
            with counts.lock:
                counts.n[kind] += 1
                counts.requests.append(f"{kind} {urllib.parse.unquote(self.path)} {resp.status} {len(data)}/{len(body)}")
                counts.not_found += resp.status == 404
                if kind == "GET":
                    counts.bytes_read += len(data)
                if kind in ("PUT", "POST", "COPY"):
                    counts.bytes_written += len(body)
            self.send_response_only(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            if self.command == "HEAD":
                self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
                self.end_headers()
            else:
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = handle_one

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return port, server


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--bin", default="target/debug/graphrag-rs")
    ap.add_argument("--mock", default="target/debug/graphrag-mock-llm")
    ap.add_argument("--log", action="store_true", help="print each command's requests (to stderr)")
    args = ap.parse_args()
    binary, mock_bin = os.path.realpath(args.bin), os.path.realpath(args.mock)
    corpus = sorted(p for p in Path(args.corpus).iterdir() if p.is_file())
    work = Path(tempfile.mkdtemp(prefix="shard-s3-"))
    children = []
    try:
        moto_port, mock_port = free_port(), free_port()
        moto_log = open(work / "moto.log", "w")
        children.append(subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(moto_port)],
                                         stdout=moto_log, stderr=moto_log, cwd=work))
        children.append(subprocess.Popen([mock_bin, "--port", str(mock_port)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL))
        wait_for(moto_port, "moto_server")
        wait_for(mock_port, "graphrag-mock-llm")
        direct = http.client.HTTPConnection("127.0.0.1", moto_port)
        direct.request("PUT", f"/{BUCKET}")
        direct.getresponse().read()
        for prefix in ("plain", "sharded"):
            for doc in corpus:
                direct.request("PUT", f"/{BUCKET}/{prefix}/input/{doc.name}", body=doc.read_bytes())
                direct.getresponse().read()
        counts = Counts()
        proxy_port, server = proxy(moto_port, counts)
        endpoint = f"http://127.0.0.1:{proxy_port}"
        env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET, AWS_ENDPOINT_URL=endpoint)

        def machine(name, prefix):
            root = work / name
            subprocess.run([binary, "-q", "init", "--root", str(root)], check=True, stdout=subprocess.DEVNULL)
            s3 = lambda base, indent: (f"{indent}type: s3\n{indent}bucket: {BUCKET}\n{indent}base_dir: {prefix}/{base}\n"
                                       f"{indent}endpoint_url: {endpoint}\n{indent}region: us-east-1\n")
            model = lambda name: (f"    model: {name}\n    api_base: http://127.0.0.1:{mock_port}/v1\n"
                                  "    api_key: sk-test\n    concurrent_requests: 4\n")
            (root / "settings.yaml").write_text(
                f"completion_models:\n  default_completion_model:\n{model('mock-gpt')}"
                f"embedding_models:\n  default_embedding_model:\n{model('mock-embed')}"
                f"input_storage:\n{s3('input', '  ')}output_storage:\n{s3('output', '  ')}"
                f"cache:\n  type: json\n  storage:\n{s3('cache', '    ')}")
            return root

        def run(label, root, *extra):
            counts.take()
            start = time.time()
            cmd = [binary, "-q", "index", "--skip-validation", "--method", "fast", "--root", str(root), *extra]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{label} failed:\n{out.stdout}\n{out.stderr}")
            c = counts.take()
            if args.log:
                print(f"## {label}", *c["requests"], sep="\n", file=sys.stderr)
            del c["requests"]
            rows.append((label, c, time.time() - start))

        rows = []
        plain = machine("plain", "plain")
        a, b, c, d = (machine(m, "sharded") for m in "abcd")
        run("index (plain)", plain)
        run("--shard 0/2", a, "--shard", "0/2")
        run("--shard 1/2", b, "--shard", "1/2")
        run("--merge --phase graph", c, "--merge", "--phase", "graph")
        run("--shard 0/2 --phase embed", a, "--shard", "0/2", "--phase", "embed")
        run("--shard 1/2 --phase embed", b, "--shard", "1/2", "--phase", "embed")
        run("--merge", d, "--merge")
        server.shutdown()
        cols = ["GET", "HEAD", "PUT", "LIST", "DELETE", "COPY", "POST"]
        print("| command | " + " | ".join(cols) + " | 404s | MB read | MB written | wall s |")
        print("|---" * (len(cols) + 5) + "|")
        total = {k: 0 for k in cols + ["not_found", "bytes_read", "bytes_written"]}
        for label, c, wall in rows:
            if label != "index (plain)":
                for k in total:
                    total[k] += c[k]
            print(f"| {label} | " + " | ".join(str(c[k]) for k in cols) +
                  f" | {c['not_found']} | {c['bytes_read'] / 1e6:.2f} | {c['bytes_written'] / 1e6:.2f} | {wall:.1f} |")
        print("| sharded, all | " + " | ".join(str(total[k]) for k in cols) +
              f" | {total['not_found']} | {total['bytes_read'] / 1e6:.2f} | {total['bytes_written'] / 1e6:.2f} | |")
        print(json.dumps({label: c for label, c, _ in rows}), file=sys.stderr)
    finally:
        for child in children:
            child.terminate()
            child.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
