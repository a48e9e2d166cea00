"""Optional extras: one helper says which extra enables a part; optional parts are skipped with one line."""

import sys

import pytest
from conftest import needs_cora, needs_punkt

from graph_rma.engine.optional import MissingExtraError, require


def _hide(monkeypatch, *packages):
    """Make ``import <package>`` (and its submodules) fail as if the package were not installed."""
    for name in list(sys.modules):
        if name.split(".")[0] in packages:
            monkeypatch.setitem(sys.modules, name, None)
    for name in packages:
        monkeypatch.setitem(sys.modules, name, None)


def test_require_imports_or_names_the_extra(monkeypatch):
    assert require("json.decoder", "nope").JSONDecoder is __import__("json").decoder.JSONDecoder
    with pytest.raises(MissingExtraError) as err:
        require("graph_rma_no_such_module.sub", "plots", "the accuracy plot")
    assert str(err.value) == ("the accuracy plot needs graph_rma_no_such_module: pip install 'graph-rma[plots]'")
    assert (err.value.module, err.value.extra) == ("graph_rma_no_such_module", "plots")
    assert isinstance(err.value, ImportError)
    _hide(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtraError, match=r"^matplotlib is not installed: pip install 'graph-rma\[plots\]'$"):
        require("matplotlib.figure", "plots")


def test_require_does_not_hide_a_broken_installed_module(tmp_path, monkeypatch):
    # An installed module whose own import fails on something else: that error, not a wrong "install the extra".
    (tmp_path / "graph_rma_broken_pkg.py").write_text("import graph_rma_missing_inner\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as err:
        require("graph_rma_broken_pkg", "plots")
    assert not isinstance(err.value, MissingExtraError) and err.value.name == "graph_rma_missing_inner"


def test_generation_metrics_without_the_extra_say_which_extra(monkeypatch):
    from graph_rma.metrics import evaluate_generation

    _hide(monkeypatch, "pycocoevalcap")
    with pytest.raises(MissingExtraError, match=r"^BLEU needs pycocoevalcap: pip install 'graph-rma\[text-metrics\]'$"):
        evaluate_generation(["a b"], ["a b"], tokenize="split", meteor="none")
    monkeypatch.undo()
    _hide(monkeypatch, "rouge_score")
    with pytest.raises(MissingExtraError, match=r"^ROUGE needs rouge_score: pip install 'graph-rma\[text-metrics\]'$"):
        evaluate_generation(["a b"], ["a b"], tokenize="split", meteor="none")


@pytest.mark.slow
@needs_cora
def test_cora_study_without_matplotlib_skips_the_plot_in_one_line(tmp_path, planetoid_cache, monkeypatch, capsys):
    from graph_rma.tasks.node_classification import run_study
    from graph_rma.tasks.protocols import resolve_protocol

    _hide(monkeypatch, "matplotlib")
    res = run_study(resolve_protocol("gat", "cora", {"epochs": 2}), ["ma"], [0], tmp_path / "out", progress=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["plot skipped (matplotlib not installed): pip install 'graph-rma[plots]'"]
    assert sorted(p.name for p in res["files"]) == ["results.csv", "results.json"]
    assert not (tmp_path / "out" / "accuracy.png").exists() and "| `ma` | 1 |" in res["table"]


def test_scoring_work_checks_the_text_metrics_extra_before_it_starts(monkeypatch, tmp_path):
    """agenda/webnlg evaluate (and train --evaluate) stop at once without the extra, not after decoding."""
    from graph_rma.engine.optional import MissingExtraError
    from graph_rma.metrics import generation
    from graph_rma.tasks import agenda, webnlg

    def missing(module, extra, what):
        raise MissingExtraError(f"{what} needs {module}", module, extra)

    monkeypatch.setattr(generation, "require", missing)
    for task in (agenda, webnlg):
        with pytest.raises(MissingExtraError):
            task.evaluate(tmp_path / "no-run")  # raised before it looks for a run to decode


@needs_punkt
def test_keeping_by_dev_bleu_checks_the_text_metrics_extra_before_training(monkeypatch, tmp_path):
    """``--keep dev_bleu`` scores dev after every epoch: without sacrebleu the run stops before its first step."""
    from pathlib import Path

    from graph_rma.tasks import webnlg

    fixture = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "webnlg_tiny"
    splits = webnlg.load_webnlg_splits(fixture)
    config = dict(webnlg.PRESETS["cpu"], hidden=16, layers=1, heads=2, decoder_heads=2, epochs=1, keep="dev_bleu")
    _hide(monkeypatch, "sacrebleu")
    with pytest.raises(MissingExtraError, match="text-metrics"):
        webnlg.train(config, tmp_path / "run", splits=splits, progress=False)
    assert not (tmp_path / "run").exists()
    assert webnlg.dev_bleu(dict(config, keep="dev_loss"), splits) is None  # the default needs no scorer
