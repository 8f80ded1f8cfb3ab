"""An `Index` over a project whose index lives in an S3 bucket (moto's real
S3 server on loopback): it answers from the published version and follows a
new one that `update_index` publishes."""

import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

import graphrag_rs
from conftest import make_project, passage


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def moto_endpoint(monkeypatch):
    binary = shutil.which("moto_server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail('moto_server not found: python3 -m pip install "moto[server]"')
        pytest.skip('moto_server not found (python3 -m pip install "moto[server]")')
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=2).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("moto_server did not start within 60 s")
            time.sleep(0.1)
    # Credentials as the AWS SDKs read them (moto accepts any).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    request = urllib.request.Request(endpoint + "/python-index", method="PUT")
    urllib.request.urlopen(request, timeout=10).close()
    yield endpoint
    proc.terminate()
    proc.wait()


def test_index_on_a_bucket_follows_its_published_versions(mock_url, moto_endpoint, tmp_path):
    root = make_project(tmp_path / "p", mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 3000)})
    with open(root / "settings.yaml", "a") as f:
        f.write(
            "output_storage:\n  type: s3\n  bucket: python-index\n  base_dir: index\n"
            f"  endpoint_url: {moto_endpoint}\n  region: us-east-1\n"
        )
    graphrag_rs.build_index(root, method="fast")
    # Nothing of the index in the project's output folder: it is in the bucket.
    assert not (root / "output" / "documents.parquet").exists()

    index = graphrag_rs.Index(root)
    first = index.version
    assert first.endswith("#1"), first
    hits = index.query("Who is Marley?", method="basic", context_only=True)
    assert "MARLEY" in hits.context_text.upper()

    (root / "input" / "stave3.txt").write_text(passage("Awaking in the middle", 3000), encoding="utf-8")
    graphrag_rs.update_index(root)
    # The open Index notices the new manifest before its next question.
    hits = index.query("Which berries were gleaming on the walls?", method="basic", context_only=True)
    assert index.version.endswith("#2"), index.version
    assert "berries" in hits.context_text
    assert len(graphrag_rs.load_tables(root)["documents"]) == 2


def _put(endpoint: str, key: str, body: bytes) -> None:
    request = urllib.request.Request(
        f"{endpoint}/python-index/{key}",
        data=body,
        method="PUT",
        headers={"Content-Type": "application/octet-stream"},
    )
    urllib.request.urlopen(request, timeout=10).close()


def _bucket_root(moto_endpoint, mock_url, tmp_path, monkeypatch, prefix: str) -> str:
    """A project that exists only in the bucket under `prefix` (its settings.yaml and
    one document), with the endpoint as the AWS SDKs read it and the working copy in
    this test's cache; its URL."""
    local = make_project(tmp_path / "p", mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 3000)})
    _put(moto_endpoint, f"{prefix}/settings.yaml", (local / "settings.yaml").read_bytes())
    _put(moto_endpoint, f"{prefix}/input/stave1.txt", (local / "input" / "stave1.txt").read_bytes())
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return f"s3://python-index/{prefix}"


def test_a_project_root_in_a_bucket_is_indexed_and_queried(mock_url, moto_endpoint, tmp_path, monkeypatch):
    root = _bucket_root(moto_endpoint, mock_url, tmp_path, monkeypatch, "team/carol")

    report = graphrag_rs.build_index(root, method="fast")
    assert report["documents"] == 1, report
    index = graphrag_rs.Index(root)
    assert index.version.endswith("#1"), index.version
    hits = index.query("Who is Marley?", method="basic", context_only=True)
    assert "MARLEY" in hits.context_text.upper()
    assert len(graphrag_rs.load_tables(root)["documents"]) == 1

    with pytest.raises(graphrag_rs.GraphragError, match="s3://python-index/nothing-here has no settings.yaml"):
        graphrag_rs.build_index("s3://python-index/nothing-here")

    # init writes the scaffold into the bucket, once.
    assert graphrag_rs.init("s3://python-index/fresh") == "s3://python-index/fresh"
    with pytest.raises(graphrag_rs.GraphragError, match="s3://python-index/fresh/settings.yaml already exists"):
        graphrag_rs.init("s3://python-index/fresh")


def _exists(endpoint: str, key: str) -> bool:
    """Whether the bucket has the object `key` (a signed request: moto refuses anonymous reads)."""
    boto3 = pytest.importorskip("boto3")  # moto's own dependency
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    listed = s3.list_objects_v2(Bucket="python-index", Prefix=key)
    return any(o["Key"] == key for o in listed.get("Contents", []))


def test_insert_and_delete_document_write_a_bucket_input(mock_url, moto_endpoint, tmp_path, monkeypatch):
    # A project root in the bucket: its input is the bucket's `input/` prefix.
    root = _bucket_root(moto_endpoint, mock_url, tmp_path, monkeypatch, "docs/carol")
    monkeypatch.chdir(tmp_path)
    graphrag_rs.build_index(root, method="fast")
    index = graphrag_rs.Index(root)

    name = index.insert(passage("Awaking in the middle", 3000), "stave3.txt")
    assert _exists(moto_endpoint, "docs/carol/input/stave3.txt"), "the document is written to the bucket's input"
    assert not (tmp_path / "s3:").exists(), "nothing is written to a local folder named after the URL"
    hits = index.query("Which berries were gleaming on the walls?", method="basic", context_only=True)
    assert "berries" in hits.context_text
    assert sorted(graphrag_rs.load_tables(root)["documents"]["title"]) == ["stave1.txt", "stave3.txt"]
    with pytest.raises(graphrag_rs.GraphragError, match="stave3.txt exists already in s3://python-index/docs/carol/input"):
        index.insert("Another text.", "stave3.txt")

    index.delete_document(name)
    assert not _exists(moto_endpoint, "docs/carol/input/stave3.txt"), "the document is deleted from the bucket"
    assert list(graphrag_rs.load_tables(root)["documents"]["title"]) == ["stave1.txt"]
    with pytest.raises(graphrag_rs.GraphragError, match="no document 'stave3.txt' in s3://python-index/docs/carol/input"):
        index.delete_document(name)


def test_a_missing_project_in_a_bucket_is_told_to_init_it(moto_endpoint, tmp_path, monkeypatch):
    """The advice names the Python call with the root's URL (issue #47 item 11)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(graphrag_rs.GraphragError) as missing:
        graphrag_rs.Index("s3://python-index/nobody/here")
    message = str(missing.value)
    assert "run `init(\"s3://python-index/nobody/here\")`" in message, message
    assert "graphrag-rs init" not in message, message
