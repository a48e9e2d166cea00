"""The examples are the library's loops: ``examples/cora.py`` trains exactly what the benchmark's run trains, and a
regularised variant really adds its penalty; ``examples/agenda.py`` keeps every variant in its own folder."""

import copy
import json
import runpy
import sys
from pathlib import Path

import pytest
from conftest import REPO, needs_cora

from graph_rma.data.planetoid import load_planetoid, prepare_features
from graph_rma.tasks import node_classification as nc
from graph_rma.variants import VariantSetup, parse_variant

pytestmark = pytest.mark.slow  # subprocesses or real-data runs: left out of make test-fast


REG = "reg:kind=frobenius,weight=0.5"


def _run_example(path: Path, argv, monkeypatch, capsys) -> str:
    monkeypatch.setattr(sys, "argv", [str(path), *argv])
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:  # an example that ends with `raise SystemExit(main())`
        assert exc.code in (0, None), exc.code
    return capsys.readouterr().out


@needs_cora
@pytest.mark.parametrize("spec", [REG, "svgd:alpha=0.01,eps=8,roles=att_src/att_dst"])
def test_cora_example_is_one_benchmark_run(spec, planetoid_cache, monkeypatch, capsys):
    calls = []
    real_penalty = VariantSetup.penalty

    def counting_penalty(self, *args, **kwargs):
        value = real_penalty(self, *args, **kwargs)
        calls.append(float(value))
        return value

    monkeypatch.setattr(VariantSetup, "penalty", counting_penalty)
    out = _run_example(REPO / "examples" / "cora.py", ["--variant", spec, "--epochs", "4"], monkeypatch, capsys)
    if spec == REG:  # the penalty is added once per training epoch, and it is a real (positive) number
        assert len(calls) == 4 and all(c > 0 for c in calls)
    else:
        assert calls == []
    calls.clear()

    data = copy.copy(load_planetoid("Cora")[0])
    data.x = prepare_features(data.x)
    kwargs = {"in_channels": data.num_features, "out_channels": 7}
    metrics, _, _ = nc.train_run(data, spec, 0, kwargs, epochs=4)
    assert f"test {100 * metrics['test_acc']:.1f}%" in out and f"best val {100 * metrics['val_acc']:.1f}%" in out
    assert "stopped at epoch 4" in out


def test_agenda_example_gives_each_variant_its_own_folder(tmp_path, monkeypatch, capsys):
    specs = ["svgd:alpha=0.1", "svgd:alpha=1"]  # the same sampler: the folder name must hold the whole variant
    out = _run_example(
        REPO / "examples" / "agenda.py",
        [
            "--root",
            str(REPO / "datasets" / "fixtures" / "agenda_tiny"),
            "--out",
            str(tmp_path),
            "--epochs",
            "1",
            "--meteor",
            "none",
            "--variants",
            *specs,
        ],
        monkeypatch,
        capsys,
    )
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [r["variant"] for r in rows] == specs
    folders = [Path(r["out"]) for r in rows]
    assert folders[0] != folders[1] and all(f.parent == tmp_path for f in folders)
    for spec, folder in zip(specs, folders):
        assert json.loads((folder / "train.json").read_text())["variant"] == parse_variant(spec).spec
        assert (folder / "metrics.test.json").exists()


@needs_cora
def test_quickstart_vs_stock_runs_the_readme_setting(planetoid_cache, monkeypatch, capsys):
    """examples/quickstart_vs_stock.py attaches the README's SVGD setting once per seed (the plain arm gets none)
    and prints one line per seed and the paired summary (two seeds, one epoch, on Cora)."""
    import graph_rma

    made = []
    real_svgd = graph_rma.SVGD

    def recording_svgd(model, **kwargs):
        made.append(kwargs)
        return real_svgd(model, **kwargs)

    monkeypatch.setattr(graph_rma, "SVGD", recording_svgd)
    out = _run_example(
        REPO / "examples" / "quickstart_vs_stock.py",
        ["--seeds", "0-1", "--epochs", "1", "--dataset", "Cora"],
        monkeypatch,
        capsys,
    )
    assert made == [{"alpha": 0.1, "eps": 8, "layers": ["convs.0"]}] * 2  # the README's setting, once per seed
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["seed 0", "seed 1"]
    assert lines[-1].startswith("mean: plain ") and "wins/ties/losses" in lines[-1]


def test_readme_quick_start_is_the_example_loop():
    """The README's quick start and examples/quickstart_vs_stock.py build the same model, optimizer, sampler and
    selection rule."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    code = readme[readme.index("## Quick start") :].split("```python\n", 1)[1].split("```", 1)[0]
    example = (REPO / "examples" / "quickstart_vs_stock.py").read_text(encoding="utf-8")
    assert 'graph_rma.SVGD(model, alpha=0.1, eps=8, layers=["convs.0"]).attach(opt)' in code
    assert 'graph_rma.SVGD(model, alpha=alpha, eps=8, layers=["convs.0"]).attach(opt)' in example
    assert 'p.add_argument("--alpha", type=nonnegative_float, default=0.1' in example
    for part in (
        "heads=8, dropout=0.6)",
        "torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-5)",
        'normalize_features(data.x, "row").to_dense()',
        'direct_edges(data.edge_index, "reversed", data.num_nodes)',
        "model = graph_rma.convert(model)",
        "if val_loss < best_loss:",
    ):
        assert part in code and part in example, part
    # the published protocol's budget: 1500 epochs, patience 100 (a 200-epoch cap stopped the repulsive arm early)
    assert (
        "for epoch in range(1500)" in code and 'p.add_argument("--epochs", type=positive_int, default=1500' in example
    )
    for part in ("elif (waited := waited + 1) >= ",):
        assert part in code and part in example, part
    # `--seeds` is a list of seeds (ranges A-B) as in every command, and the README's command says so
    assert "type=seed_list, action=SeedsAction, default=list(range(10))" in example
    assert "quickstart_vs_stock.py --seeds 0-9`" in readme and "quickstart_vs_stock.py --seeds 10`" not in readme


def test_agenda_example_small_prints_the_sizes_it_trains_on(tmp_path, monkeypatch, capsys):
    """--small used to print only the data's sizes (the whole training set), not the 200 records it trains on."""
    out = _run_example(
        REPO / "examples" / "agenda.py",
        [
            "--root",
            str(REPO / "datasets" / "fixtures" / "agenda_tiny"),
            "--out",
            str(tmp_path),
            "--small",
            "--meteor",
            "none",
            "--variants",
            "ma",
        ],
        monkeypatch,
        capsys,
    )
    lines = out.splitlines()
    assert lines[0] == "official: train 6, val 2, test 2"  # the fixture's sizes, as stored
    assert lines[1] == (
        "--small: training on the first 6 of 6 training records, dev loss on the first 2 of 2, "
        "scores on the first 2 of 2 test graphs"
    )
