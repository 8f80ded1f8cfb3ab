"""An `Index` over a project whose index lives in an S3 bucket (moto's real
S3 server on loopback): it answers from the published version and follows a
new one that `update_index` publishes. Documents inserted and deleted through
Python go to the bucket's input, on S3 (moto) and Azure Blob (Azurite) alike."""

import base64
import email.utils
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import graphrag_rs
from conftest import make_project, passage


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(binary_name: str, install: str, args, ready, what: str):
    """Starts `binary_name` with `args(port)` on a free port and waits (60 s at
    most) until `ready(port)`: the process, and its port. A missing binary
    skips the test, or fails it under CI (which installs it: `install`)."""
    binary = shutil.which(binary_name)
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(f"{binary_name} not found: {install}")
        pytest.skip(f"{binary_name} not found ({install})")
    port = _free_port()
    proc = subprocess.Popen([binary, *args(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not ready(port):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"{what} did not start within 60 s")
        time.sleep(0.1)
    return proc, port


def _answers(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=2).close()
        return True
    except OSError:
        return False


@pytest.fixture
def moto_endpoint(monkeypatch):
    args = lambda port: ["-H", "127.0.0.1", "-p", str(port)]  # noqa: E731
    proc, port = _start("moto_server", 'python3 -m pip install "moto[server]"', args, _answers, "moto_server")
    endpoint = f"http://127.0.0.1:{port}"
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


# Azurite's development account (public, the same in every Azurite).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class Azurite:
    """Azurite's blob service on loopback, and requests to it signed with the
    development account's key (Azurite refuses anonymous ones)."""

    def __init__(self, port: int):
        self.port = port
        self.connection_string = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
        )

    def request(self, method: str, path: str, query: dict[str, str] | None = None, body: bytes = b"") -> int:
        """One request for `path` (container/blob), Shared Key signed; its status."""
        query = query or {}
        headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": "2021-08-06"}
        if method == "PUT" and "restype" not in query:
            headers["x-ms-blob-type"] = "BlockBlob"
        # urllib gives a body a form Content-Type unless told one; it is signed.
        length, content_type = (str(len(body)), "application/octet-stream") if body else ("", "")
        canonical_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
        resource = f"/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{path}" + "".join(
            f"\n{k}:{v}" for k, v in sorted(query.items())
        )
        to_sign = f"{method}\n\n\n{length}\n\n{content_type}\n\n\n\n\n\n\n{canonical_headers}{resource}"
        if body:
            headers["Content-Type"] = content_type
        key = base64.b64decode(AZURITE_KEY)
        signature = base64.b64encode(hmac.new(key, to_sign.encode(), hashlib.sha256).digest()).decode()
        headers["Authorization"] = f"SharedKey {AZURITE_ACCOUNT}:{signature}"
        url = f"http://127.0.0.1:{self.port}/{AZURITE_ACCOUNT}/{path}"
        if query:
            url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
        request = urllib.request.Request(url, data=body or None, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status
        except urllib.error.HTTPError as e:
            return e.code


@pytest.fixture
def azurite(tmp_path_factory):
    folder = tmp_path_factory.mktemp("azurite")
    args = lambda port: [  # noqa: E731
        "--blobHost", "127.0.0.1", "--blobPort", str(port), "--skipApiVersionCheck", "--silent",
        "--location", str(folder),
    ]
    # Ready once it creates the container (409: an earlier try's answer was lost).
    ready = lambda port: _create_container(Azurite(port)) in (201, 409)  # noqa: E731
    proc, port = _start("azurite-blob", "npm install -g azurite", args, ready, "Azurite")
    server = Azurite(port)
    yield server
    proc.terminate()
    proc.wait()


def _create_container(server: Azurite) -> int:
    """The status of creating the container `python-index`; 0 while nothing listens."""
    try:
        return server.request("PUT", "python-index", {"restype": "container"})
    except OSError:
        return 0


class Bucket:
    """The bucket a test's project root lives in: its URL scheme, how to write
    and look for an object, and the environment its clients read."""

    def __init__(self, scheme: str, put, exists):
        self.scheme, self.put, self.exists = scheme, put, exists

    def url(self, prefix: str) -> str:
        return f"{self.scheme}://python-index/{prefix}"


@pytest.fixture(params=["s3", "azure"])
def bucket(request, monkeypatch):
    if request.param == "s3":
        endpoint = request.getfixturevalue("moto_endpoint")
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        return Bucket("s3", lambda key, body: _put(endpoint, key, body), lambda key: _exists(endpoint, key))
    server = request.getfixturevalue("azurite")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", server.connection_string)

    def put(key: str, body: bytes) -> None:
        assert server.request("PUT", f"python-index/{key}", body=body) == 201

    return Bucket("az", put, lambda key: server.request("HEAD", f"python-index/{key}") == 200)


def test_insert_and_delete_document_write_a_bucket_input(mock_url, bucket, tmp_path, monkeypatch):
    # A project root in the bucket: its input is the bucket's `input/` prefix.
    local = make_project(tmp_path / "p", mock_url, {"stave1.txt": passage("MARLEY'S GHOST", 3000)})
    bucket.put("docs/carol/settings.yaml", (local / "settings.yaml").read_bytes())
    bucket.put("docs/carol/input/stave1.txt", (local / "input" / "stave1.txt").read_bytes())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = bucket.url("docs/carol")
    monkeypatch.chdir(tmp_path)
    graphrag_rs.build_index(root, method="fast")
    index = graphrag_rs.Index(root)

    name = index.insert(passage("Awaking in the middle", 3000), "stave3.txt")
    assert bucket.exists("docs/carol/input/stave3.txt"), "the document is written to the bucket's input"
    assert not (tmp_path / f"{bucket.scheme}:").exists(), "nothing is written to a local folder named after the URL"
    hits = index.query("Which berries were gleaming on the walls?", method="basic", context_only=True)
    assert "berries" in hits.context_text
    assert sorted(graphrag_rs.load_tables(root)["documents"]["title"]) == ["stave1.txt", "stave3.txt"]
    with pytest.raises(graphrag_rs.GraphragError, match=f"stave3.txt exists already in {root}/input"):
        index.insert("Another text.", "stave3.txt")

    index.delete_document(name)
    assert not bucket.exists("docs/carol/input/stave3.txt"), "the document is deleted from the bucket"
    assert list(graphrag_rs.load_tables(root)["documents"]["title"]) == ["stave1.txt"]
    with pytest.raises(graphrag_rs.GraphragError, match=f"no document 'stave3.txt' in {root}/input"):
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
