"""The documentation's Python runs and type-checks: docs/notebook.ipynb
executed by nbconvert against the mock server, docs/python_example.py
through `mypy --strict` with the package's stubs, and the settings.yaml
that `init` writes read the way GraphRAG's load_config reads it."""

import json
import os
import subprocess
import sys
from string import Template

import pytest

import graphrag_rs
from conftest import REPO


def test_the_notebook_executes_against_the_mock(mock_url, tmp_path):
    # (The kernel draws with matplotlib's inline backend, Agg-based: no display needed.)
    env = dict(os.environ, GRAPHRAG_NOTEBOOK_API_BASE=mock_url, GRAPHRAG_NOTEBOOK_ROOT=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         "--ExecutePreprocessor.timeout=300", "--output-dir", str(tmp_path), str(REPO / "docs" / "notebook.ipynb")],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    executed = json.loads((tmp_path / "notebook.ipynb").read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the graph plot is missing"
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("in_context" in "".join(h) for h in html), "no context DataFrame was shown"


def test_the_example_script_passes_mypy_strict(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path), str(REPO / "docs" / "python_example.py")],
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:]


def test_graphrag_load_config_can_read_the_settings_init_writes(tmp_path):
    """GraphRAG 3.3's load_config substitutes the whole file with
    string.Template (comments included) before parsing, and asks every
    model for an api_key."""
    yaml = pytest.importorskip("yaml")
    graphrag_rs.init(tmp_path)
    text = (tmp_path / "settings.yaml").read_text()
    data = yaml.safe_load(Template(text).substitute(dict(os.environ, GRAPHRAG_API_KEY="sk-test")))
    for kind in ("completion_models", "embedding_models"):
        for name, model in data[kind].items():
            assert model.get("api_key") == "sk-test", (kind, name, model)
