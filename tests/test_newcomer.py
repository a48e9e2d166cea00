"""The newcomer's first hour, run as a user runs it: every command's and example's --help, the main job on its
smallest setting with and without the data, each in a fresh folder with HOME and the cache redirected."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, REPO, snapshot

pytestmark = pytest.mark.slow  # subprocesses or real-data runs: left out of make test-fast


COMMANDS = ["cora", "node", "text", "agenda", "webnlg", "score", "report"]
EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.py"))


def _run(args, tmp_path, data=True, timeout=300):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPH_RMA_DATA", "GRAPH_RMA_CACHE")}
    env.update(HOME=str(home), OMP_NUM_THREADS="1")
    if data and DATA is not None:
        env["GRAPH_RMA_DATA"] = str(DATA)
    elif not data:
        env["GRAPH_RMA_DATA"] = str(tmp_path / "empty")  # a data folder without the data: loaders never download
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, home


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_help(command, tmp_path):
    proc, home = _run(["-m", "graph_rma.cli", command, "--help"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: graph-rma") and not proc.stderr
    assert snapshot(home) == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_answers_help(example, tmp_path):
    proc, home = _run([str(REPO / "examples" / example), "--help"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stderr[-500:]
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(
    DATA is None or not (Path(DATA) / "planetoid" / "Cora" / "raw").is_dir(),
    reason="needs $GRAPH_RMA_DATA (the shared data)",
)
def test_the_main_job_runs_and_without_data_says_where_in_one_line(tmp_path):
    proc, home = _run(
        ["-m", "graph_rma.cli", "cora", "--seeds", "0", "--epochs", "2", "--variants", "ma", "--no-plot"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Cora, protocol gat" in proc.stdout and "| `ma` | 1 |" in proc.stdout
    assert snapshot(home) == []  # nothing written into the user's home (no cache needed for Cora)
    proc, home = _run(
        ["-m", "graph_rma.cli", "cora", "--seeds", "0", "--epochs", "2", "--out", "o"], tmp_path, data=False
    )
    err = proc.stderr.strip()
    assert proc.returncode == 1 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "GRAPH_RMA_DATA" in err and str(tmp_path / "empty") in err
    for dataset in ("chameleon", "minesweeper"):
        proc, _ = _run(
            ["-m", "graph_rma.cli", "node", "--dataset", dataset, "--seeds", "0", "--epochs", "1", "--out", "o"],
            tmp_path,
            data=False,
        )
        err = proc.stderr.strip()
        assert proc.returncode == 1 and len(err.splitlines()) == 1 and "GRAPH_RMA_DATA" in err, err


def test_agenda_help_lists_every_subcommand(tmp_path):
    proc, _ = _run(["-m", "graph_rma.cli", "agenda", "--help"], tmp_path)
    for sub in ("train", "generate", "evaluate", "heads"):
        assert f"\n    {sub} " in proc.stdout, sub


@pytest.mark.parametrize(
    "example,args,word",
    [
        ("cora.py", ["--variant", "bogus", "--epochs", "1"], "unknown part 'bogus'"),
        # the CLI's argument types (graph_rma.argtypes): --epochs -1 used to print "best val -inf%, test 0.0%", exit 0
        ("cora.py", ["--epochs", "-1"], "argument --epochs: expected a positive integer, got '-1'"),
        ("cora.py", ["--seed", "-2"], "argument --seed: expected an integer >= 0, got '-2'"),
        ("neighbor_sampling.py", ["--batch-size", "0"], "argument --batch-size: expected a positive integer, got '0'"),
        ("quickstart_vs_stock.py", ["--seeds", "x"], "--seeds"),
        ("quickstart_vs_stock.py", ["--dataset", "nope"], "name: expected one of"),
        # issue 32: --seeds is a list (ranges A-B) in every script; it used to be a count here ("--seeds 0": "expected
        # at least one seed >= 0, got '0'")
        ("quickstart_vs_stock.py", ["--seeds", "3", "3"], "argument --seeds: a seed is given twice in 3 3"),
        ("quickstart_vs_stock.py", ["--seeds", "0", "--epochs", "0"], "argument --epochs: expected a positive integer"),
        ("quickstart_vs_stock.py", ["--out", "{file}"], "is a file, not a folder"),
        ("text_classification.py", ["--max-train", "0"], "argument --max-train: expected a positive integer, got '0'"),
        ("text_classification.py", ["--epochs", "0"], "argument --epochs: expected a positive integer, got '0'"),
        ("text_classification.py", ["--out", "{file}"], "is a file, not a folder"),
        ("text_classification.py", ["--out", "{ro}/out"], "not writable"),
        ("text_classification.py", ["--variant", "svdg"], "unknown part 'svdg'"),
        ("text_classification.py", ["--seed", str(2**70)], "argument --seed: expected a seed in [0, 2**64 - 1]"),
        ("agenda.py", ["--out", "{file}"], "is a file, not a folder"),
        ("agenda.py", ["--out", "{ro}/out"], "not writable"),
        ("agenda.py", ["--variants", "ma", "svdg"], "unknown part 'svdg'"),
        ("cora.py", ["--seed", str(2**70)], "argument --seed: expected a seed in [0, 2**64 - 1]"),
    ],
)
def test_example_mistakes_are_one_line(example, args, word, tmp_path, request):
    if any("{ro}" in a for a in args):
        args = [a.replace("{ro}", str(request.getfixturevalue("unwritable"))) for a in args]
    if "{file}" in args:
        (tmp_path / "a-file").write_text("not a folder\n")
        args = [str(tmp_path / "a-file") if a == "{file}" else a for a in args]
    proc, _ = _run([str(REPO / "examples" / example), *args], tmp_path)
    err = [line for line in proc.stderr.strip().splitlines() if "Warning" not in line and "warn(" not in line]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-1500:]
    # the one line names the script (as its argparse prog or one_line_errors' prefix) and says what was wrong
    assert word in err[-1] and err[-1].startswith((f"{example}: ", f"examples/{example}: ")), err


def test_the_quick_start_without_data_stops_saying_where(tmp_path):
    """The quick start installs no global excepthook (issue 33 item 7: it would hide the user's own tracebacks):
    missing data ends it with Python's traceback whose last line says where to put the data."""
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    code = re.search(r"## Quick start.*?```python\n(.*?)```", readme, re.S).group(1)
    (tmp_path / "quick.py").write_text(code)
    proc, _ = _run([str(tmp_path / "quick.py")], tmp_path, data=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith("graph_rma.data.root.DataNotFoundError: "), proc.stderr[-2000:]
    assert "GRAPH_RMA_DATA" in last and str(tmp_path / "empty") in last
