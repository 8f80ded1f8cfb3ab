#!/usr/bin/env python3
"""Sharded indexing on a real Ray cluster (issues #35, #46), end to end.

Starts a Ray cluster on loopback (a head node and a second node process on
this machine, in a temporary folder) and the project's mock LLM server, then:
  1. indexes eight documents of the example with the standard method once
     with `graphrag-rs index` (the reference);
  2. for N = 1, 2, 4: `python -m graphrag_rs.ray index --shards N` on a fresh
     project (document shards, the graph phase up to each model stage with
     N model shards at each, N embed shards, the merge; N = 2 through `ray
     job submit` when the dashboard's job server is installed: `pip install
     "ray[default]"`); every published file must equal the reference's byte
     for byte, and the mock must have answered the same model calls (but
     each process's start-up check);
  3. kills (SIGKILL) the worker process of a shard mid-run: Ray retries the
     task, the result equals the reference and no answered call is asked
     again (at most the one request in flight at the kill);
  4. reruns the driver on a finished project: no shard runs again;
  5. a shard that fails for good fails the run, named with its documents;
  6. when moto's S3 server is installed (`pip install "moto[server]"`): the
     project in a bucket (`--root s3://ray/carol`, its settings and documents
     only there), N = 2 through the driver, each node and the driver with a
     working copy of its own (as on machines that share no folder); the
     published version must equal a local `graphrag-rs index` byte for byte;
  7. with a wheel of the package (GRAPHRAG_RS_WHEEL) and a bare Python with
     Ray alone (BARE_PYTHON: a venv where only `ray[default]` is installed):
     a second cluster whose head has no CPU for tasks and whose worker node
     is started from the bare venv, with no Rust toolchain on its PATH and
     no checkout on its Python path; `ray job submit` with the wheel in the
     job's runtime_env (the two commands of docs/cluster.md) indexes the
     eight documents with N = 2, every task on the bare node, equal to the
     reference; then (SCALE_MB, default 2; 0 skips it) a standard index of a
     SCALE_MB corpus (scripts/make_scale_corpus.py, SHARED for its sources)
     against the mock at 200 ms a call, 4 concurrent requests per process,
     N = 1, 2, 4: byte-identical across N, the model calls per stage in
     shards and serial (≤ 10 % serial), and each N's wall time beside the
     bound Σ over map phases of (the most calls of one shard) · t / C.

Run with a Python that has `ray` and `graphrag_rs` installed, from the
repository, after `cargo build` (the graphrag-rs and graphrag-mock-llm
binaries):  PYTHON=/path/to/venv/bin/python; $PYTHON scripts/ray_shards_test.py
(with GRAPHRAG_RS_WHEEL=target/wheels/graphrag_rs-….whl BARE_PYTHON=/path/to/bare-venv/bin/python
for 7). It stops its clusters and mock servers however it ends.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ElementTree
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAROL = (REPO / "examples/christmas-carol/a_christmas_carol.txt").read_text(encoding="utf-8")
BIN = Path(os.environ.get("GRAPHRAG_RS", REPO / "target/debug/graphrag-rs"))
MOCK = Path(os.environ.get("GRAPHRAG_MOCK_LLM", REPO / "target/debug/graphrag-mock-llm"))
RAY = Path(sys.executable).parent / "ray"
FIXED_MTIME = 1_767_225_600
# `ray job submit` needs the dashboard's job server (`pip install "ray[default]"`); with plain `ray`
# the N = 2 run goes through the driver directly.
JOBS = importlib.util.find_spec("aiohttp") is not None and importlib.util.find_spec("ray.dashboard") is not None
# For section 7 only: the drivers of 1-6 use the package installed beside Ray.
WHEEL = os.environ.pop("GRAPHRAG_RS_WHEEL", None)


def docs() -> dict[str, str]:
    at = CAROL.index("MARLEY'S GHOST")
    out = {}
    for i in range(8):
        out[f"part{i}.txt"] = CAROL[at : at + 3000]
        at += 3000
    return out


def start_mock(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([str(MOCK), "--port", "0", *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on "), line
    return proc, line[len("listening on ") :]


def stats(url: str) -> dict:
    with urllib.request.urlopen(url.rstrip("/") + "/stats", timeout=10) as r:
        return json.load(r)


def chat_calls(url: str) -> int:
    """The chat calls the mock answered, but the start-up checks (one per process)."""
    s = stats(url)
    return s["chat_requests"] - s["by_kind"].get("connection_check", 0)


def project(root: Path, url: str, documents: dict[str, str] | None = None, concurrency: int = 1) -> Path:
    subprocess.run([str(BIN), "-q", "init", "--root", str(root)], check=True)
    model = lambda name: (  # noqa: E731
        f"    model: {name}\n    api_base: {url}\n    api_key: sk-test\n"
        f"    retry_base_delay: 0.001\n    max_retry_wait: 0.05\n    concurrent_requests: {concurrency}\n"
    )
    (root / "settings.yaml").write_text(
        "completion_models:\n  default_completion_model:\n"
        + model("mock-gpt")
        + "embedding_models:\n  default_embedding_model:\n"
        + model("mock-embed")
        + "chunking:\n  size: 300\n  overlap: 30\n"
    )
    for name, body in (documents or docs()).items():
        path = root / "input" / name
        path.write_text(body, encoding="utf-8")
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))
    return root


def published(root: Path) -> dict[str, bytes]:
    return published_files(root / "output")


def published_files(output: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(output.rglob("*")):
        rel = path.relative_to(output)
        if path.is_file() and not any(p.startswith(".") for p in rel.parts) and rel.name not in (
            "document_status.parquet",
            "stats.json",
        ):
            out[str(rel)] = path.read_bytes()
    assert "entities.parquet" in out, f"no index in {output}"
    return out


def same_index(root: Path, reference: Path, what: str) -> None:
    a, b = published(root), published(reference)
    assert sorted(a) == sorted(b), f"{what}: files {sorted(a)} vs {sorted(b)}"
    differ = [name for name in a if a[name] != b[name]]
    assert not differ, f"{what}: {differ} differ from the single run's"
    print(f"ok: {what}: {len(a)} published files byte-identical to a single `graphrag-rs index`", flush=True)


def s3(endpoint: str, method: str, key: str, body: bytes | None = None) -> bytes:
    """One unsigned request to moto (it checks no credentials unless asked to; an object
    is sent as bytes: moto reads a form-encoded body, urllib's default, as a form)."""
    headers = {"Content-Type": "application/octet-stream"} if body else {}
    request = urllib.request.Request(f"{endpoint}/{key}", data=body, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as r:
        return r.read()


def start_moto() -> tuple[subprocess.Popen, str] | None:
    """moto's S3 server on a free loopback port, or None where it is not installed."""
    if shutil.which("moto_server") is None:
        return None
    port = free_port()
    proc = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            s3(endpoint, "GET", "")
            return proc, endpoint
        except OSError:
            assert time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.2)


def bucket_project(endpoint: str, local: Path, bucket: str, prefix: str) -> None:
    """Uploads the local project's settings, prompts and documents to the bucket and
    gives the local files the objects' times (the documents' creation_date)."""
    s3(endpoint, "PUT", bucket, b"")
    s3(endpoint, "PUT", f"{bucket}/{prefix}/settings.yaml", (local / "settings.yaml").read_bytes())
    for folder in ("prompts", "input"):
        for path in sorted((local / folder).iterdir()):
            s3(endpoint, "PUT", f"{bucket}/{prefix}/{folder}/{path.name}", path.read_bytes())
    listing = ElementTree.fromstring(s3(endpoint, "GET", f"{bucket}?list-type=2&prefix={prefix}/input/"))
    ns = {"s3": listing.tag.split("}")[0].strip("{")}
    for item in listing.findall("s3:Contents", ns):
        name = item.find("s3:Key", ns).text.rsplit("/", 1)[1]
        when = datetime.fromisoformat(item.find("s3:LastModified", ns).text.replace("Z", "+00:00")).timestamp()
        os.utime(local / "input" / name, (when, when))


def bucket_index(url: str, env: dict) -> dict[str, bytes]:
    """The published version of the project at `url`, read through graphrag_rs (a reader's copy
    of the version the manifest names; moto answers an unsigned GET of an object with 403)."""
    read = "import sys; from graphrag_rs import _native; print(_native.index_dir(sys.argv[1]))"
    folder = subprocess.run([sys.executable, "-c", read, url], env=env, capture_output=True, text=True, check=True)
    return published_files(Path(folder.stdout.strip()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_nodes(address: str, count: int) -> None:
    """Until the cluster at `address` has `count` live nodes (at most 120 s)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        probe = subprocess.run([str(RAY), "status", "--address", address], capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.count(" node_") >= count:
            return
        time.sleep(1)
    raise AssertionError(f"the Ray cluster at {address} never had {count} nodes")


def driver(root: Path | str, shards: int, address: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "graphrag_rs.ray", "index", "--root", str(root), "--shards", str(shards),
         "--method", "standard", "--address", address],
        **popen,
    )


def shard_workers() -> list[int]:
    """Ray worker processes running a shard task (Ray names them `ray::_shard`)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [int(line.split(None, 1)[0]) for line in out.splitlines() if "ray::_shard" in line]


def stop_nodes(nodes: list[subprocess.Popen]) -> None:
    """Ends each `ray start --block` by its own process group, the last started first."""
    for node in reversed(nodes):
        os.killpg(node.pid, signal.SIGTERM)
        try:
            node.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()
    nodes.clear()


def submit(dashboard: int, wheel: str, python: str, root: Path, shards: int, *extra: str) -> tuple[str, float]:
    """`ray job submit` with the wheel in the job's runtime_env, as docs/cluster.md shows; the
    driver's output and the seconds the job took."""
    job = [str(RAY), "job", "submit", "--address", f"http://127.0.0.1:{dashboard}",
           "--runtime-env-json", json.dumps({"py_modules": [wheel]}), "--",
           python, "-m", "graphrag_rs.ray", "index", "--root", str(root), "--shards", str(shards),
           "--method", "standard", *extra]
    began = time.monotonic()
    done = subprocess.run(job, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - began
    assert done.returncode == 0 and "succeeded" in done.stdout, done.stdout + done.stderr
    return done.stdout, seconds


def latency_bound(out: str, seconds_per_call: float, concurrency: int) -> float:
    """Σ over the map phases (document shards, each model stage's wave, embed shards) of the most
    model calls one of its shards made, × t / C: no run of these shards can take less."""
    most: dict[str, int] = {}
    for line in map(str.strip, out.splitlines()):
        m = re.search(r"^(model shard \d+/\d+ of (.+?)|embed shard \d+/\d+|shard \d+/\d+):.* (\d+) model calls$", line)
        if m:
            phase = m.group(2) or m.group(1).split(" ")[0]
            most[phase] = max(most.get(phase, 0), int(m.group(3)))
    return sum(most.values()) * seconds_per_call / concurrency


def bare_node_checks(work: Path, url: str, reference: Path, single_calls: int, env: dict) -> None:
    """Section 7 of the module docs: a cluster whose nodes were started from a venv with Ray
    alone, the package shipped as a wheel through the job's runtime_env."""
    wheel, bare = WHEEL, os.environ.get("BARE_PYTHON")
    if not (wheel and bare and JOBS):
        print("skipped: the bare node (set GRAPHRAG_RS_WHEEL and BARE_PYTHON; needs ray[default])", flush=True)
        return
    wheel = str(Path(wheel).resolve())
    bare_bin = Path(bare).parent
    bare_env = {
        "PATH": f"{bare_bin}:/usr/bin:/bin",
        "HOME": str(work / "home-bare"),
        "LANG": "C.UTF-8",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONNOUSERSITE": "1",
    }
    assert shutil.which("cargo", path=bare_env["PATH"]) is None, "the bare nodes' PATH has a Rust toolchain"
    probe = subprocess.run([bare, "-c", "import graphrag_rs"], env=bare_env, cwd=str(work), capture_output=True)
    assert probe.returncode != 0, "graphrag_rs is importable in the bare venv"
    port, dashboard = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    log = open(work / "ray-bare-nodes.log", "w")
    nodes: list[subprocess.Popen] = []
    try:
        common = ["--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--block"]
        # The head runs the job's driver and no task (no CPU); every task goes to the worker node.
        head = [str(bare_bin / "ray"), "start", "--head", "--port", str(port), "--num-cpus", "0",
                "--temp-dir", str(work / "ray-bare"), "--include-dashboard", "true",
                "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard), *common]
        nodes.append(subprocess.Popen(head, env=bare_env, cwd=str(work), stdout=log, stderr=log, start_new_session=True))
        wait_for_nodes(address, 1)
        worker = [str(bare_bin / "ray"), "start", "--address", address, "--num-cpus", "2", *common]
        nodes.append(subprocess.Popen(worker, env=bare_env, cwd=str(work), stdout=log, stderr=log, start_new_session=True))
        wait_for_nodes(address, 2)
        print(f"bare ray cluster: head (no CPU) + worker node on {address}, both from {bare_bin.parent}", flush=True)

        root = project(work / "bare2", url)
        before = chat_calls(url)
        out, seconds = submit(dashboard, wheel, bare, root, 2)
        same_index(root, reference, "Ray, 2 shards on a bare node from the shipped wheel")
        assert chat_calls(url) - before == single_calls, "every model call once"
        print(f"ok: a node without Rust or the package ran every shard from the wheel ({seconds:.1f} s)", flush=True)

        mb = float(os.environ.get("SCALE_MB", "2"))
        if mb > 0:
            scale(work, dashboard, wheel, bare, mb, env)
    finally:
        stop_nodes(nodes)
        log.close()


def scale(work: Path, dashboard: int, wheel: str, bare: str, mb: float, env: dict) -> None:
    """A standard index of an `mb` MB corpus against the mock at 200 ms a call, C = 4 requests
    at once per process, N = 1, 2, 4: the same bytes, the serial share per stage, wall times."""
    t, c = 0.2, 4
    corpus = work / "scale-corpus"
    shared = os.environ.get("SHARED", str(REPO.parent / "shared"))
    subprocess.run([sys.executable, str(REPO / "scripts/make_scale_corpus.py"), str(mb), str(corpus),
                    "--shared", shared, "--doc-kb", "16"], check=True, stdout=subprocess.DEVNULL)
    documents = {p.name: p.read_text(encoding="utf-8") for p in sorted(corpus.iterdir())}
    size = sum(len(d.encode()) for d in documents.values())
    mock, url = start_mock("--latency-ms", "200")
    try:
        first: Path | None = None
        for n in (1, 2, 4):
            root = project(work / f"scale{n}", url, documents, concurrency=c)
            s0 = stats(url)
            # Fractional CPUs: the shards wait on the model, 8 at once on the worker's 2 CPUs.
            out, seconds = submit(dashboard, wheel, bare, root, n, "--num-cpus", "0.25")
            s1 = stats(url)
            chat = (s1["chat_requests"] - s0["chat_requests"]) - (
                s1["by_kind"].get("connection_check", 0) - s0["by_kind"].get("connection_check", 0))
            lines = [line for line in map(str.strip, out.splitlines()) if line.startswith("calls: ")]
            share = float(re.search(r"\(([\d.]+) %\)$", lines[-1]).group(1))
            print(f"scale {size / 1e6:.2f} MB, {len(documents)} documents, N = {n}: {seconds:.1f} s wall "
                  f"(bound {latency_bound(out, t, c):.1f} s = Σ phases max shard calls · {t} s / {c}); "
                  f"{chat} chat calls", flush=True)
            for line in lines:
                print(f"  {line}", flush=True)
            assert share <= 10, f"N = {n}: {share} % of the model calls serial"
            if first is None:
                first = root
            else:
                same_index(root, first, f"scale, N = {n} against N = 1")
    finally:
        mock.terminate()
        mock.wait()


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="ray-shards-"))
    port, dashboard = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    mock, url = start_mock()
    slow_mock, slow_url = start_mock("--latency-ms", "150")
    bad_mock, bad_url = start_mock("--fault", "400:every=2:chat")
    moto = start_moto()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    if moto is not None:
        # As the AWS SDKs read them, on every node; moto accepts any key.
        env.update(AWS_ENDPOINT_URL=moto[1], AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing-secret",
                   AWS_REGION="us-east-1")
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--disable-usage-stats", "--block"]
    # `ray start --block` stays in the foreground and stops its node's
    # processes when terminated: the nodes are ended by their own ids.
    nodes: list[subprocess.Popen] = []
    log = open(work / "ray-nodes.log", "w")
    try:
        head = [str(RAY), "start", "--head", "--port", str(port), "--temp-dir", str(work / "ray"), *common]
        head += ["--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard)] \
            if JOBS else ["--include-dashboard", "false"]
        # Each node checks a bucket project out into a working copy of its own (its user cache).
        node_env = lambda name: dict(env, XDG_CACHE_HOME=str(work / f"home-{name}"))  # noqa: E731
        nodes.append(subprocess.Popen(head, env=node_env("head"), stdout=log, stderr=log, start_new_session=True))
        wait_for_nodes(address, 1)
        second = [str(RAY), "start", "--address", address, *common]
        nodes.append(subprocess.Popen(second, env=node_env("second"), stdout=log, stderr=log, start_new_session=True))
        wait_for_nodes(address, 2)
        print(f"ray cluster: head + second node on {address}", flush=True)

        reference = project(work / "single", url)
        before = chat_calls(url)
        subprocess.run([str(BIN), "-q", "index", "--method", "standard", "--root", str(reference)], check=True)
        single_calls = chat_calls(url) - before

        for n in (1, 2, 4):
            root = project(work / f"ray{n}", url)
            before = chat_calls(url)
            if n == 2 and JOBS:
                # As a job on the cluster: the driver runs on the head node.
                job = [str(RAY), "job", "submit", "--address", f"http://127.0.0.1:{dashboard}", "--",
                       sys.executable, "-m", "graphrag_rs.ray", "index", "--root", str(root), "--shards", "2",
                       "--method", "standard"]
                submitted = subprocess.run(job, capture_output=True, text=True, timeout=600, env=env)
                assert submitted.returncode == 0, submitted.stdout + submitted.stderr
                assert "succeeded" in submitted.stdout, submitted.stdout
                print("ok: `ray job submit` ran the driver on the cluster", flush=True)
            else:
                assert driver(root, n, address).wait(timeout=600) == 0, f"the driver failed with {n} shards"
            calls = chat_calls(url) - before
            same_index(root, reference, f"Ray, {n} shards")
            assert calls == single_calls, f"{n} shards: {calls} chat calls, single run {single_calls}"
            print(f"ok: Ray, {n} shards: every model call made once ({calls} chat requests)", flush=True)

        # Rerun on a finished project: no shard runs again (only the merge).
        before = chat_calls(url)
        rerun = driver(work / "ray4", 4, address, stdout=subprocess.PIPE, text=True)
        out, _ = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, out
        assert out.count("(finished before)") == 4, out
        same_index(work / "ray4", reference, "Ray, driver rerun")
        print("ok: a rerun of the driver ran no shard again", flush=True)

        # A shard's worker killed mid-run (a slow mock keeps the shards busy).
        root = project(work / "killed", slow_url)
        before_slow = chat_calls(slow_url)
        proc = driver(root, 2, address)
        deadline = time.monotonic() + 300
        killed = None
        while killed is None:
            assert time.monotonic() < deadline, "no shard worker seen running"
            workers = shard_workers()
            if workers and chat_calls(slow_url) - before_slow >= 6:
                killed = workers[0]
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.05)
        print(f"killed shard worker {killed} (SIGKILL) after {chat_calls(slow_url) - before_slow} answers", flush=True)
        assert proc.wait(timeout=600) == 0, "the driver failed after a worker was killed"
        same_index(root, reference, "Ray, a shard worker killed and retried")
        calls = chat_calls(slow_url) - before_slow
        # The request in flight at the kill (answered, never cached) may be asked again.
        assert single_calls <= calls <= single_calls + 1, f"{calls} chat calls vs {single_calls}"
        print(f"ok: after the kill, {calls} chat requests: no cached answer asked again", flush=True)

        # A shard that fails for good (the model refuses its requests: 400s are not retried)
        # fails the run, naming the shard and its documents, and nothing is merged.
        failing = project(work / "failing", bad_url)
        proc = driver(failing, 2, address, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 1, out
        assert "shards failed; the index was not merged" in out and "its documents: part" in out, out
        assert not (failing / "output" / "entities.parquet").exists()
        print("ok: a failed shard fails the run, named with its documents", flush=True)

        if moto is None:
            print("skipped: the bucket project (moto_server is not installed)", flush=True)
        else:
            local = project(work / "bucket-twin", url)
            bucket_project(moto[1], local, "ray", "carol")
            subprocess.run([str(BIN), "-q", "index", "--method", "standard", "--root", str(local)], check=True)
            proc = driver("s3://ray/carol", 2, address, env=node_env("driver"))
            assert proc.wait(timeout=600) == 0, "the driver failed on the bucket project"
            got, want = bucket_index("s3://ray/carol", node_env("reader")), published(local)
            assert sorted(got) == sorted(want), f"bucket: files {sorted(got)} vs {sorted(want)}"
            differ = [name for name in got if got[name] != want[name]]
            assert not differ, f"bucket: {differ} differ from the local run's"
            print(f"ok: Ray, 2 shards of s3://ray/carol: {len(got)} published files byte-identical", flush=True)
        stop_nodes(nodes)
        bare_node_checks(work, url, reference, single_calls, env)
        print("all Ray shard checks passed", flush=True)
    finally:
        stop_nodes(nodes)
        log.close()
        for proc in (mock, slow_mock, bad_mock, *(moto[:1] if moto else ())):
            proc.terminate()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
