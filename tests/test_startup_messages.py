"""Start-up in one line: a model too large for the machine refused before it is allocated (weights and the first
attention layer's activations), Ctrl-C while a command starts, and a ``--model`` the HF example cannot load."""

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import DATA, REPO, needs_cora, needs_text

from graph_rma.engine import device_memory
from graph_rma.tasks.node_training import check_model_fits


def env():
    e = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"), HF_HUB_OFFLINE="1")
    if DATA is not None:
        e["GRAPH_RMA_DATA"] = str(DATA)
    return e


def test_attention_activations_count_towards_what_must_fit():
    have = device_memory("cpu")
    kwargs = dict(in_channels=8, out_channels=3, heads=1, hidden_channels=8, out_heads=1, dropout=0.0)
    edges = have // 80  # messages [E, 8] and three [E, 1] float32 tensors, twice: 88 bytes an edge, over the memory
    assert check_model_fits("gat", kwargs, "cpu") > 0  # a tiny model: its weights fit
    with pytest.raises(ValueError, match=r"GiB of attention activations \(.* edges x 1 heads x width 8\): more than"):
        check_model_fits("gat", kwargs, "cpu", num_nodes=10, num_edges=edges)
    assert check_model_fits("gat", dict(kwargs, lean=True), "cpu", num_nodes=10, num_edges=edges) > 0  # no [E, 8]


@pytest.mark.slow
@needs_cora
def test_cora_with_100000_heads_is_refused_before_it_allocates(tmp_path):
    argv = [sys.executable, "-m", "graph_rma.cli", "cora", "--heads", "100000", "--seeds", "0", "--out", str(tmp_path)]
    proc = subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "heads=100000" in proc.stderr and "GiB of attention activations" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("after", [0.5, 2.5])
def test_ctrl_c_while_a_command_starts_is_one_line(tmp_path, after):
    argv = [sys.executable, "-m", "graph_rma.cli", "cora", "--seeds", "0", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(argv, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(after)  # importing torch and PyG, then reading the data
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1] in ("graph-rma cora: interrupted", "graph-rma: interrupted"), err[-2000:]
    assert "Traceback" not in err


@pytest.mark.slow
@needs_text
def test_the_hf_example_with_a_model_it_cannot_load_is_one_line(tmp_path):
    pytest.importorskip("transformers", minversion="5")
    argv = [sys.executable, str(REPO / "examples" / "hf_text_classification.py"), "--model", "/nonexistent"]
    proc = subprocess.run(argv + ["--out", str(tmp_path)], env=env(), capture_output=True, text=True, timeout=300)
    err = [ln for ln in proc.stderr.strip().splitlines() if "Warning" not in ln and "warn(" not in ln]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert err[-1].startswith("hf_text_classification.py: --model: cannot load '/nonexistent'"), err


def test_ctrl_c_inside_a_command_import_is_held_until_the_import_ends(tmp_path, monkeypatch):
    """A SIGINT that lands inside an import (as inside Triton's native one, which then aborts the interpreter) is
    held: the module finishes importing, then KeyboardInterrupt is raised and Python's handler is back."""
    from graph_rma import cli

    (tmp_path / "interrupted_import.py").write_text(
        "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nfor _ in range(1000):\n    pass\nFINISHED = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        cli._import_holding_ctrl_c("interrupted_import")
    assert sys.modules["interrupted_import"].FINISHED  # the import ran to its end before the interrupt
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    sys.modules.pop("interrupted_import")
