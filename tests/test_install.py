"""Installed as a user installs it: a fresh venv, ``pip install <the package>`` without extras, then the main job
(``graph-rma cora``) and the README's quick start, run from a folder outside the repository.

Marked ``install``: left out of ``make test`` (it builds a venv, about two minutes here), run by ``make test-install``
and once by ``.ci/run``. torch is installed first, exactly as the Makefile does, so that pip never pulls a CUDA build.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import PLANETOID, PYG, REPO, needs_cora

pytestmark = [pytest.mark.install, needs_cora]


def _run(cmd, cwd, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(OMP_NUM_THREADS="1", PYTHONNOUSERSITE="1")
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} -> {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _quick_start() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quick start") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("install")
    _run([sys.executable, "-m", "venv", str(root / "venv")], cwd=root)  # no --system-site-packages
    py = root / "venv" / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "torch==2.13.0"], cwd=root)  # as the Makefile does
    src = root / "src"  # a copy of what the build reads, so that the build never writes into the work tree
    shutil.copytree(REPO / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    _run([str(py), "-m", "pip", "install", "-q", str(src)], cwd=root)  # no extras
    return root


def test_plain_install_has_no_extras(venv):
    py = venv / "venv" / "bin" / "python"
    code = (
        "import importlib.util as u; print([m for m in ('matplotlib', 'pycocoevalcap', 'rouge_score', 'pytest')"
        " if u.find_spec(m)]); import graph_rma, scipy, networkx; print(graph_rma.__file__)"
    )
    out = _run([str(py), "-c", code], cwd=venv).stdout.splitlines()
    assert out[0] == "[]" and str(venv / "venv") in out[1]  # the installed copy, not the work tree


def test_version_and_cora_run_without_extras(venv):
    bin_ = venv / "venv" / "bin"
    version = _run(
        [str(bin_ / "python"), "-c", "import importlib.metadata as m; print(m.version('graph-rma'))"], cwd=venv
    ).stdout.strip()
    assert _run([str(bin_ / "graph-rma"), "--version"], cwd=venv).stdout == f"graph-rma {version}\n"
    out = venv / "cora"
    proc = _run(
        [
            str(bin_ / "graph-rma"),
            "cora",
            "--seeds",
            "0",
            "--epochs",
            "2",
            "--variants",
            "ma",
            "--out",
            str(out),
            "--root",
            str(PLANETOID),
        ],
        cwd=venv,
    )
    assert "| `ma` | 1 |" in proc.stdout
    assert "plot skipped (matplotlib not installed): pip install 'graph-rma[plots]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / "results.json").is_file() and not (out / "accuracy.png").exists()


def test_readme_quick_start_runs(venv):
    """The README's quick start, as a user copies it, offline: it reads the shared data through $GRAPH_RMA_DATA and
    prints the two accuracies and head distances it exists to show."""
    work = venv / "quick"
    if not (PYG / "wikipedia_network" / "chameleon" / "geom_gcn" / "raw").is_dir():
        pytest.skip("needs $GRAPH_RMA_DATA/pyg (the heterophilous graphs, datasets/heterophilous.md)")
    work.mkdir()
    code = _quick_start()
    assert "for epoch in trange(300, " in code
    code = code.replace("trange(300, ", "trange(3, ")  # three steps show that it runs
    (work / "quick_start.py").write_text(code)
    proc = _run([str(venv / "venv" / "bin" / "python"), "quick_start.py"], cwd=work)
    arm = r"\d+\.\d % \(head distance \d+\.\d\d\)"
    assert re.fullmatch(rf"test accuracy, split 0: plain heads {arm}, repulsive heads {arm}\n", proc.stdout)
