"""One default number of torch CPU threads (``graph_rma.argtypes.DEFAULT_THREADS``) in every command and example."""

import subprocess
import sys

import pytest
import torch
from conftest import REPO

from graph_rma.argtypes import DEFAULT_THREADS
from graph_rma.cli import agenda, node, text, webnlg
from graph_rma.cli import cora as cora_cli

EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.py"))


def test_the_default_is_one_thread():
    assert DEFAULT_THREADS == 1


@pytest.mark.parametrize(
    "parser,argv",
    [
        (cora_cli.build_parser, []),
        (node.build_parser, ["--dataset", "cora"]),
        (text.build_parser, []),
        (agenda._parser, ["train"]),
        (agenda._parser, ["evaluate"]),
        (webnlg._parser, ["generate"]),
    ],
)
def test_every_command_defaults_to_it(parser, argv):
    assert parser().parse_args(argv).threads == DEFAULT_THREADS
    assert parser().parse_args(argv + ["--threads", "3"]).threads == 3


@pytest.mark.parametrize("module", [agenda, webnlg])
def test_the_graph_to_text_commands_apply_it_before_anything_else(module, tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    assert module.main(["generate", "--out", str(tmp_path / "none"), "--threads", "2"]) == 2  # no trained run
    assert calls == [2]
    assert module.main(["generate", "--out", str(tmp_path / "none")]) == 2
    assert calls == [2, DEFAULT_THREADS]


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_takes_it(example, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / example), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"--threads THREADS torch CPU threads (default: {DEFAULT_THREADS}," in " ".join(proc.stdout.split())
