"""The Cora pipeline: GAT model, the Dist metric, and end-to-end CLI runs (outputs, checkpoints, resume)."""

import copy
import math
import re
from dataclasses import replace

import pytest
import torch
from conftest import data_path, needs_cora
from torch_geometric.nn import GATConv

from graph_rma.cli import cora
from graph_rma.data.planetoid import prepare_features
from graph_rma.diagnostics import head_distance
from graph_rma.engine import load_checkpoint, read_json
from graph_rma.models.gat import TwoLayerGAT
from graph_rma.tasks import node_classification as nc
from graph_rma.tasks.protocols import PROTOCOLS


def test_head_distance_hand_checked():
    # Node 0: heads at (0,0), (3,4), (0,4): pairwise distances 5, 4, 3 -> mean 4. Node 1: identical heads -> 0.
    out = torch.tensor([[[0.0, 0.0], [3.0, 4.0], [0.0, 4.0]], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]])
    assert head_distance(out) == pytest.approx(2.0)
    assert head_distance(out[:1]) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="heads"):
        head_distance(torch.zeros(4, 1, 3))


def test_gat_is_the_paper_architecture_and_rebuilds_from_kwargs():
    torch.manual_seed(0)
    model = TwoLayerGAT(1433, 7)
    assert isinstance(model.conv1, GATConv) and isinstance(model.conv2, GATConv)
    assert (model.conv1.heads, model.conv1.out_channels, model.conv1.concat) == (8, 8, True)
    assert (model.conv2.heads, model.conv2.out_channels, model.conv2.concat) == (1, 7, False)
    assert model.conv1.dropout == model.conv2.dropout == 0.6
    # 1433*64 + 2*64 + 64 (first layer) + 64*7 + 2*7 + 7 (output layer)
    assert sum(p.numel() for p in model.parameters()) == 1433 * 64 + 3 * 64 + 64 * 7 + 3 * 7
    clone = TwoLayerGAT(**model.model_kwargs)
    clone.load_state_dict(model.state_dict())
    x, ei = torch.rand(5, 1433), torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    model.eval(), clone.eval()
    assert torch.equal(model(x, ei), clone(x, ei))
    with pytest.raises(ValueError, match="heads"):
        TwoLayerGAT(10, 3, heads=0)
    with pytest.raises(ValueError, match="dropout"):
        TwoLayerGAT(10, 3, dropout=1.5)


def test_sparse_input_matches_dense_and_drops_only_stored_entries():
    torch.manual_seed(0)
    x = (torch.rand(50, 40) < 0.2).float() * torch.rand(50, 40)
    ei = torch.randint(0, 50, (2, 200))
    model = TwoLayerGAT(40, 3).eval()
    assert torch.allclose(model(x.to_sparse(), ei), model(x, ei), atol=1e-6)
    model.train()
    dropped = model._input_dropout(x.to_sparse().coalesce()).to_dense()
    stored = x != 0
    assert bool((dropped[~stored] == 0).all())
    kept = dropped[stored] != 0
    assert torch.allclose(dropped[stored][kept], x[stored][kept] / 0.4)
    assert 0.5 < 1 - kept.float().mean().item() < 0.7  # ~60% of the stored entries dropped


@pytest.mark.slow
@needs_cora
def test_cli_end_to_end_writes_results_and_checkpoints(tmp_path, planetoid_cache, capsys):
    out = tmp_path / "out"
    specs = ["ma", "svgd:alpha=0.1"]
    rc = cora.main(["--variants", *specs, "--seeds", "0", "1", "--epochs", "4", "--out", str(out)])
    assert rc == 0
    table = capsys.readouterr().out
    assert "| `ma` | 2 |" in table and "| `svgd:alpha=0.1` | 2 |" in table
    assert (out / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv_lines = (out / "results.csv").read_text().strip().splitlines()
    assert len(csv_lines) == 3 and csv_lines[0].startswith("variant,seeds,test_metric_mean,test_metric_std")
    res = read_json(out / "results.json")
    assert res["seeds"] == [0, 1] and [r["variant"] for r in res["summary"]] == specs
    assert len(res["runs"]) == 4

    # Each checkpoint rebuilds its model, whose accuracies are the recorded ones (test at the best val epoch).
    data = copy.copy(__import__("graph_rma.data.planetoid", fromlist=["x"]).load_planetoid("Cora")[0])
    for run in res["runs"]:
        ckpt = load_checkpoint(out / run["checkpoint"])
        assert {k: ckpt[k] for k in ("task", "dataset", "variant", "seed")} == {
            "task": "node",
            "dataset": "Cora",
            "variant": run["variant"],
            "seed": run["seed"],
        }
        assert ckpt["protocol"] == "gat" and ckpt["model_name"] == "gat" and ckpt["split"] == 0
        model = TwoLayerGAT(**ckpt["model_kwargs"])
        model.load_state_dict(ckpt["model"])
        model.eval()
        with torch.no_grad():
            logits = model(prepare_features(data.x), data.edge_index)
        for mask, key in ((data.val_mask, "val_metric"), (data.test_mask, "test_metric")):
            acc = (logits[mask].argmax(-1) == data.y[mask]).float().mean().item()
            assert acc == pytest.approx(ckpt["metrics"][key])
        assert ckpt["metrics"] == run["metrics"]
        assert 1 <= run["metrics"]["best_epoch"] <= run["metrics"]["epochs"] <= 4

    # Same seed, same variant: identical; SVGD changes the training of the same seed.
    by = {(r["variant"], r["seed"]): r["metrics"] for r in res["runs"]}
    assert by[("ma", 0)]["val_loss"] != by[("svgd:alpha=0.1", 0)]["val_loss"]


@pytest.mark.slow
@needs_cora
def test_interrupted_study_resumes_without_redoing_finished_runs(tmp_path, planetoid_cache, monkeypatch, capsys):
    out = tmp_path / "out"
    real = nc.train_run
    calls = []

    def interrupt_on_third(protocol, data, spec, seed, **kwargs):
        calls.append((spec, seed))
        if len(calls) == 3:
            raise KeyboardInterrupt  # as Ctrl-C in the middle of the third run
        return real(protocol, data, spec, seed, **kwargs)

    monkeypatch.setattr(nc, "train_run", interrupt_on_third)
    argv = ["--variants", "ma", "svgd:alpha=0.1", "--seeds", "0-1", "--epochs", "3", "--out", str(out), "--no-plot"]
    assert cora.main(argv) == 130
    assert "run it again with --resume (resume=True) to continue" in capsys.readouterr().err
    # Seed-major order: ma and svgd on seed 0 finished, the third run (ma, seed 1) was interrupted.
    finished = sorted(str(p.relative_to(out / "runs")) for p in (out / "runs").rglob("seed*.json"))
    assert finished == [f"{nc.slug('ma')}/seed0.json", f"{nc.slug('svgd:alpha=0.1')}/seed0.json"]
    assert len(read_json(out / "results.json")["runs"]) == 2
    first = read_json(out / "runs" / nc.slug("ma") / "seed0.json")

    calls.clear()
    monkeypatch.setattr(nc, "train_run", lambda *a, **k: (calls.append(a[2:4]), real(*a, **k))[1])
    assert cora.main(argv + ["--resume"]) == 0
    assert calls == [("ma", 1), ("svgd:alpha=0.1", 1)]
    res = read_json(out / "results.json")
    assert [(r["variant"], r["seed"]) for r in res["runs"]] == [
        ("ma", 0),
        ("ma", 1),
        ("svgd:alpha=0.1", 0),
        ("svgd:alpha=0.1", 1),
    ]
    assert read_json(out / "runs" / nc.slug("ma") / "seed0.json") == first

    # Interrupted when it already resumes: running it again continues (no --resume to add).
    monkeypatch.setattr(nc, "train_run", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    capsys.readouterr()
    assert cora.main(argv[:-1] + ["--patience", "2", "--no-plot", "--resume"]) == 130
    assert "; run it again to continue" in capsys.readouterr().err
    monkeypatch.setattr(nc, "train_run", lambda *a, **k: (calls.append(a[2:4]), real(*a, **k))[1])

    # A changed setting does not reuse runs made under another configuration, and says which setting differs.
    calls.clear()
    capsys.readouterr()
    assert cora.main(argv[:-1] + ["--patience", "2", "--no-plot", "--resume"]) == 0
    assert len(calls) == 4
    assert (
        f"resume: runs in {out} made with other settings or incomplete (patience 100 -> 2) are trained again"
        in capsys.readouterr().err
    )

    # A finished run whose checkpoint was deleted is not finished: it is trained again (and says why).
    calls.clear()
    ckpt = next((out / "checkpoints").glob(f"{nc.slug('ma')}_seed0.pt"))
    ckpt.unlink()
    assert cora.main(argv[:-1] + ["--patience", "2", "--no-plot", "--resume"]) == 0
    assert calls == [("ma", 0)] and ckpt.is_file()
    assert f"checkpoint {ckpt.name} missing" in capsys.readouterr().err


def test_bad_variant_is_reported(tmp_path, capsys):
    assert cora.main(["--variants", "nonsense", "--out", str(tmp_path)]) == 2
    assert "unknown part 'nonsense'" in capsys.readouterr().err


def test_every_full_study_variant_builds_on_the_gat():
    from graph_rma.nn import RepulsiveGATConv
    from graph_rma.tasks.defaults import NODE_FULL_VARIANTS
    from graph_rma.variants import make_sampler, parse_variant

    for spec in NODE_FULL_VARIANTS:
        v = parse_variant(spec)
        model = TwoLayerGAT(30, 3, drop_attention=v.drop_attention_kwargs)
        if v.drop_attention:
            assert isinstance(model.conv1, RepulsiveGATConv) and model.conv1.drop_attention is not None
            clone = TwoLayerGAT(**model.model_kwargs)
            assert isinstance(clone.conv2, RepulsiveGATConv) and clone.drop_attention == model.drop_attention
        if v.sampler == "ma":
            assert make_sampler(v, model) is None
            continue
        sampler = make_sampler(v, model)  # the 1-head output layer is no particle group (skipped without a word)
        # Only the first layer's 8 heads are particles; the chosen SVGD/SPOS use the attention vectors only.
        assert [(g.name, g.num_heads) for g in sampler.groups] == [("conv1", 8)]
        expected = 2 * 8 if v.roles == ("att_src", "att_dst") else 30 * 8 + 2 * 8
        assert sampler.groups[0].dim == expected


def test_head_outputs_are_the_ones_the_diagnostics_capture():
    from graph_rma.diagnostics.capture import HeadCapture

    torch.manual_seed(0)
    x, ei = torch.rand(12, 10), torch.randint(0, 12, (2, 40))
    model = TwoLayerGAT(10, 3)
    torch.nn.init.normal_(model.conv1.bias)  # a non-zero bias must not count in the heads' outputs
    model.eval()
    with HeadCapture(model.conv1) as cap:
        model(x, ei)
    ours = model.head_outputs(x, ei)
    assert torch.allclose(ours, cap.outputs, atol=1e-6)  # so the pipeline's Dist equals the report's


def test_early_stopping_rules_by_hand():
    from graph_rma.engine import EarlyStopping

    # (val_acc, val_loss) per epoch
    seq = [(0.5, 1.0), (0.6, 0.9), (0.6, 0.8), (0.55, 0.7), (0.6, 0.95), (0.5, 0.99), (0.5, 0.98)]
    acc = EarlyStopping("val_acc", patience=3)
    # keep: strict acc gain, or equal acc with lower loss (epoch 3); counter: epochs since the last strict acc
    # gain (epoch 2), so epochs 3, 4, 5 count 1, 2, 3 and epoch 5 stops
    assert [acc.update(*e) for e in seq] == [
        (True, False),
        (True, False),
        (True, False),
        (False, False),
        (False, True),
        (False, True),
        (False, True),
    ]
    gat = EarlyStopping("gat", patience=3)
    # epoch 4: loss 0.7 is a new minimum (reset, not kept: acc fell); epoch 5: acc 0.6 >= max 0.6 resets, but
    # loss 0.95 > 0.7 so not kept; epochs 6, 7: neither -> counter 1, 2
    assert [gat.update(*e) for e in seq] == [
        (True, False),
        (True, False),
        (True, False),
        (False, False),
        (False, False),
        (False, False),
        (False, False),
    ]
    assert gat.update(0.4, 2.0) == (False, True)  # third epoch without either
    assert (gat.best_metric, gat.best_loss) == (0.6, 0.8)
    with pytest.raises(ValueError, match="rule"):
        EarlyStopping("loss")


def test_node_runs_saved_with_the_0_1_0_metric_keys_read_as_the_new_ones():
    """graph_rma 0.1.0 saved runs and summary rows with test_acc/val_acc (which held ROC AUC on binary graphs): every
    reader (resume, summarize, format_table, the report's training metrics) takes them as test_metric/val_metric."""
    from graph_rma.tasks.node_results import format_table, summarize, upgrade_metrics

    new = [
        {
            "variant": v,
            "seed": s,
            "metrics": {
                "test_metric": 0.5 + 0.1 * s + (0.05 if v == "b" else 0),
                "val_metric": 0.6,
                "val_loss": 1.0,
                "dist": None,
                "epochs": 10,
                "sec_per_epoch": 0.1,
                "metric": "roc_auc",
            },
        }
        for v in ("a", "b")
        for s in (0, 1)
    ]
    renames = {"test_metric": "test_acc", "val_metric": "val_acc"}
    old = [{**r, "metrics": {renames.get(k, k): x for k, x in r["metrics"].items()}} for r in new]
    assert "test_acc" in old[0]["metrics"] and upgrade_metrics(old[0]["metrics"]) == new[0]["metrics"]
    rows = summarize(new, ["a", "b"])
    assert rows == summarize(old, ["a", "b"]) and "test_metric_mean" in rows[0] and "test_acc_mean" not in rows[0]
    assert rows[1]["paired_mean"] == pytest.approx(5.0)
    old_rows = [{k.replace("_metric_", "_acc_"): x for k, x in r.items()} for r in rows]
    assert "test_acc_mean" in old_rows[0] and format_table(old_rows, "roc_auc") == format_table(rows, "roc_auc")
    assert list(upgrade_metrics(old_rows[0])) == list(rows[0])  # the order (results.csv's columns) is kept
    assert type(rows[0]) is dict and type(upgrade_metrics({})) is dict
    with pytest.raises(KeyError):  # the old keys are read from saved files only, not from new results
        rows[0]["test_acc_mean"]


def test_early_stopping_resumes_from_its_state_and_from_a_0_1_0_save():
    """A resumed run's stopper continues exactly; a part-way save of graph_rma 0.1.0 names the metric's counters
    best_acc and acc_max, which are read as best_metric and metric_max."""
    from graph_rma.engine import EarlyStopping

    seq = [(0.5, 1.0), (0.7, 0.9), (0.6, 0.8)]
    whole, first = EarlyStopping("val_acc", patience=2), EarlyStopping("val_acc", patience=2)
    for e in seq:
        whole.update(*e)
    for e in seq[:2]:
        first.update(*e)
    state = first.state_dict()
    assert state == {"best_metric": 0.7, "best_loss": 0.9, "metric_max": 0.7, "loss_min": math.inf, "bad": 0}
    resumed = EarlyStopping("val_acc", patience=2)
    resumed.load_state_dict(state)
    assert resumed.update(*seq[2]) == (False, False) and vars(resumed) == vars(whole)
    old = {"best_acc": 0.7, "best_loss": 0.9, "acc_max": 0.7, "loss_min": math.inf, "bad": 1}
    from_old = EarlyStopping("val_acc", patience=2)
    from_old.load_state_dict(old)
    assert (from_old.best_metric, from_old.metric_max, from_old.bad) == (0.7, 0.7, 1)
    assert "best_acc" not in vars(from_old) and from_old.update(0.65, 0.5) == (False, True)


@pytest.mark.skipif(not data_path("pyg", "webkb").is_dir(), reason="needs $GRAPH_RMA_DATA/pyg (heterophilous graphs)")
@pytest.mark.slow
def test_heterophilous_study_maps_seeds_to_splits_and_pairs_variants(tmp_path, planetoid_cache):
    result = nc.run_study(
        nc.resolve_protocol(None, "texas", {"epochs": 3}),
        ["ma", "svgd:alpha=0.5"],
        seeds=[3, 13],
        out=tmp_path,
        dataset="texas",
        make_plot=False,
        progress=False,
    )
    assert result["config"]["dataset"] == "Texas" and result["config"]["model_kwargs"]["in_channels"] == 1703
    assert [(r["variant"], r["seed"], r["split"]) for r in result["runs"]] == [
        ("ma", 3, 3),
        ("ma", 13, 3),
        ("svgd:alpha=0.5", 3, 3),
        ("svgd:alpha=0.5", 13, 3),
    ]
    ma, svgd = result["summary"]
    assert "paired_mean" not in ma and svgd["paired_n"] == 2
    diffs = [
        100 * (s["metrics"]["test_metric"] - m["metrics"]["test_metric"])
        for m, s in zip(result["runs"][:2], result["runs"][2:])
    ]
    assert abs(svgd["paired_mean"] - sum(diffs) / 2) < 1e-9
    assert "paired diff vs first" in result["table"]


@pytest.mark.slow
@needs_cora
def test_the_repulsion_limit_never_acts_with_the_cora_presets(planetoid_cache):
    """docs/design.md: with the Cora presets (seed 0, 200 epochs) the step limit acts at 0 of 200 steps; a case it
    does act in (nearly identical heads) is in test_particles.py."""
    from graph_rma.tasks.defaults import NODE_FULL_VARIANTS

    data = copy.copy(__import__("graph_rma.data.planetoid", fromlist=["x"]).load_planetoid("Cora")[0])
    data.x = prepare_features(data.x)
    gat = PROTOCOLS["gat"]
    svgd, spos = NODE_FULL_VARIANTS[3], NODE_FULL_VARIANTS[4]
    assert svgd.startswith("svgd:alpha=0.01,eps=8,roles=att_src/att_dst") and "beta=1e9" in spos
    for spec in (svgd, spos):
        metrics, _, _ = nc.train_run(replace(gat, epochs=200, patience=1000), data, spec, 0)
        assert (metrics["epochs"], metrics["limited_steps"]) == (200, 0), spec
    metrics, _, _ = nc.train_run(replace(gat, epochs=5), data, "svgd:alpha=1000,eps=8", 0)  # far beyond: capped
    assert metrics["limited_steps"] == 5


@needs_cora
def test_single_split_graphs_have_pygs_one_dimensional_masks(planetoid_cache):
    """load_node_graph("cora") used to give [N, 1] masks where PyG's Planetoid gives [N], so PyG-style code
    (out[data.train_mask]) failed; the graphs with 10 splits keep PyG's [N, 10]."""
    from torch_geometric.datasets import Planetoid  # noqa: F401  (the convention followed)

    from graph_rma.data.nodes import load_node_graph, select_split

    data = load_node_graph("cora")
    assert data.train_mask.shape == data.val_mask.shape == data.test_mask.shape == (2708,)
    out = torch.zeros(2708, 7)
    assert out[data.train_mask].shape == (140, 7) and int(data.test_mask.sum()) == 1000
    split = select_split(data, 0)
    assert torch.equal(split.train_mask, data.train_mask) and split.train_mask is not data.train_mask
    with pytest.raises(ValueError, match=r"^split: this graph has one split \(masks of shape \[N\]\), got split=1$"):
        select_split(data, 1)
    # the node task reads such a graph as one split: every seed trains on it
    prepared = nc.prepare_graph(data, nc.resolve_protocol(None, "Cora"))
    assert prepared.train_mask.dim() == 1


def test_features_that_are_not_finite_are_refused_when_the_graph_is_prepared():
    """NaN or infinite features used to end in "training diverged ... lower the learning rate", which blames the
    wrong thing."""
    from torch_geometric.data import Data

    protocol = nc.resolve_protocol(None, "Cora")
    for bad in (float("nan"), float("inf"), -float("inf")):
        x = torch.rand(4, 3)
        x[2, 1] = bad
        data = Data(x=x, edge_index=torch.tensor([[0, 1], [1, 2]]), y=torch.arange(4) % 2)
        with pytest.raises(
            ValueError,
            match=r"^x: the feature matrix holds 1 NaN or infinite entries, the first in "
            r"row 2 \(node\)",
        ):
            nc.prepare_graph(data, protocol)
        data.x = x.to_sparse()
        with pytest.raises(ValueError, match=r"^x: the feature matrix holds 1 NaN or infinite entries;"):
            nc.prepare_graph(data, protocol)


@pytest.mark.parametrize(
    "what,arrays,match",
    [
        # labels up to 1e9 used to make a 1e9-class output layer: an allocator traceback or a MemoryError
        (
            "labels",
            {"node_labels": __import__("numpy").array([0, 1, 999_999_999, 0, 1])},
            r"model: residual with .*out_channels=1000000000 has .* parameters, .* GiB .*: "
            r"more than the .* GiB of memory of cpu; .* \(the labels go up to 999999999, "
            r"so the output layer has 1000000000 classes for 5 nodes\)",
        ),
        # NaN features used to end in "training diverged ... lower the learning rate"; the loader refuses them now,
        # naming the file (prepare_graph's own check covers graphs built in Python)
        (
            "features",
            {
                "node_features": __import__("numpy").array(
                    [[0.0, 1, 2], [3, float("nan"), 5], [6, 7, 8], [9, 10, 11], [12, 13, 14]], dtype="float32"
                )
            },
            r"odd\.npz: node_features holds 1 value\(s\) that are not finite float32 numbers \(first: "
            r"node_features\[1, 1\] = nan",
        ),
    ],
)
def test_node_command_refuses_a_graph_it_cannot_train_on_in_one_line(what, arrays, match, tmp_path, capsys):
    from test_platonov import _write

    from graph_rma.cli import main

    _write(tmp_path, "odd", **arrays)
    out = tmp_path / "o"
    assert (
        main(
            [
                "node",
                "--dataset",
                "odd",
                "--root",
                str(tmp_path),
                "--seeds",
                "0",
                "--epochs",
                "1",
                "--variants",
                "ma",
                "--no-plot",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert __import__("re").search(match, err), err
    assert not out.exists()


def _small_graph(seed: int = 0):
    from torch_geometric.data import Data

    g = torch.Generator().manual_seed(seed)
    n = 40
    edge_index = torch.randint(0, n, (2, 160), generator=g)
    x = torch.randn(n, 6, generator=g)
    y = x[:, :3].argmax(dim=1)  # learnable: the validation loss falls for many epochs
    masks = torch.zeros(3, n, dtype=torch.bool)
    masks[torch.arange(n) % 3, torch.arange(n)] = True
    return Data(
        x=x,
        edge_index=edge_index,
        y=y,
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
    )


@pytest.mark.parametrize("kill_at", [12, 26])  # before the kept epoch (the dynamics) and after it (the kept state)
@pytest.mark.parametrize("spec", ["ma", "spos:alpha=0.1,eps=8"])
def test_a_killed_run_continues_from_its_last_save_and_ends_as_an_uninterrupted_run(
    kill_at, spec, tmp_path, monkeypatch, capsys
):
    from graph_rma.tasks import node_training as nt

    data = _small_graph()
    # dropout and SPOS noise draw from generators every epoch; the kept epoch is a late one
    proto = replace(PROTOCOLS["gat"], heads=4, epochs=30, patience=1000, lr=0.01, early_stopping="val_loss")
    whole, whole_state, _ = nt.train_run(proto, data, spec, 0)

    partial = tmp_path / "run.partial.pt"
    real, saves = nt.save_checkpoint, []

    def killed_after_a_save(path, state):
        real(path, state)
        saves.append(state["epoch"])
        if len(saves) == kill_at:
            raise KeyboardInterrupt  # as a kill right after the save of that epoch

    monkeypatch.setattr(nt, "save_checkpoint", killed_after_a_save)
    with pytest.raises(KeyboardInterrupt):
        nt.train_run(proto, data, spec, 0, partial=partial, save_every_s=0)
    assert saves == list(range(1, kill_at + 1)) and partial.is_file()
    monkeypatch.setattr(nt, "save_checkpoint", real)

    resumed, resumed_state, _ = nt.train_run(proto, data, spec, 0, partial=partial, save_every_s=0)
    assert f"{partial}: continuing the unfinished run after epoch {kill_at}" in capsys.readouterr().err
    assert not partial.exists()  # finished: nothing left to continue
    timing = ("sec_per_epoch",)
    assert {k: v for k, v in resumed.items() if k not in timing} == {k: v for k, v in whole.items() if k not in timing}
    assert 20 < whole["best_epoch"] < 26 and all(torch.equal(resumed_state[k], whole_state[k]) for k in whole_state)


def test_a_saved_run_with_other_settings_is_not_continued(tmp_path, monkeypatch, capsys):
    from graph_rma.tasks import node_training as nt

    data, proto = _small_graph(), replace(PROTOCOLS["gat"], heads=2, epochs=5)
    partial = tmp_path / "run.partial.pt"
    real = nt.save_checkpoint

    def killed_after_the_first_save(path, state):
        real(path, state)
        raise KeyboardInterrupt

    monkeypatch.setattr(nt, "save_checkpoint", killed_after_the_first_save)
    with pytest.raises(KeyboardInterrupt):
        nt.train_run(proto, data, "ma", 0, partial=partial, save_every_s=0)
    monkeypatch.setattr(nt, "save_checkpoint", real)
    other_split = copy.copy(data)
    other_split.train_mask, other_split.val_mask = data.val_mask, data.train_mask
    fresh, _, _ = nt.train_run(proto, other_split, "ma", 1)
    got, _, _ = nt.train_run(proto, other_split, "ma", 1, partial=partial)
    assert (
        f"{partial}: an unfinished run with other settings (seed, data); the run starts again"
        in capsys.readouterr().err
    )
    assert got["val_loss"] == fresh["val_loss"] and got["epochs"] == 5 and not partial.exists()


def test_ctrl_c_held_by_the_caller_stops_the_run_at_the_end_of_its_epoch_saved_there(tmp_path, monkeypatch, capsys):
    """A real SIGINT during epoch 7, inside ``deferred_interrupt`` (as run_study calls every run): the run is saved
    at the end of epoch 7 (no periodic save was due) and stops; resumed, it ends as an uninterrupted run."""
    import signal

    from graph_rma.tasks import node_training as nt

    data = _small_graph()
    proto = replace(PROTOCOLS["gat"], heads=4, epochs=20, patience=1000, lr=0.01, early_stopping="val_loss")
    whole, _, _ = nt.train_run(proto, data, "ma", 0)
    epochs_seen = []
    real_update = nt.EarlyStopping.update

    def update(self, *args):
        epochs_seen.append(1)
        if len(epochs_seen) == 7:
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C at the end of epoch 7's evaluation
        return real_update(self, *args)

    monkeypatch.setattr(nt.EarlyStopping, "update", update)
    partial = tmp_path / "run.partial.pt"
    saves = []
    real_save = nt.save_checkpoint
    monkeypatch.setattr(
        nt, "save_checkpoint", lambda path, state: (saves.append(state["epoch"]), real_save(path, state))
    )
    from graph_rma.engine import deferred_interrupt

    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            nt.train_run(proto, data, "ma", 0, partial=partial, save_every_s=3600)
    assert saves == [7] and len(epochs_seen) == 7  # no periodic save came due: the one save is the interrupt's
    monkeypatch.setattr(nt.EarlyStopping, "update", real_update)
    resumed, _, _ = nt.train_run(proto, data, "ma", 0, partial=partial, save_every_s=3600)
    assert "continuing the unfinished run after epoch 7" in capsys.readouterr().err
    timing = ("sec_per_epoch",)
    assert {k: v for k, v in resumed.items() if k not in timing} == {k: v for k, v in whole.items() if k not in timing}
    # outside a deferral Ctrl-C acts at once, as before: no save (with Python's own handler, set here: a shell ignores
    # SIGINT for the background jobs it starts, and the tests may run as one)
    saves.clear()
    epochs_seen.clear()
    monkeypatch.setattr(nt.EarlyStopping, "update", update)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            nt.train_run(proto, data, "ma", 0, partial=tmp_path / "other.partial.pt", save_every_s=3600)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert saves == [] and len(epochs_seen) == 7


@pytest.mark.parametrize("patience", [float("nan"), True, "3", 2.5, 3.0, 0, -1, None])
def test_early_stopping_refuses_a_patience_that_is_not_a_whole_number_of_epochs(patience):
    """Issue 67, item 5 and issue 65, item 9: nan never stopped, True counted as 1, "3" ended in a TypeError."""
    from graph_rma import GraphRMAError
    from graph_rma.engine import EarlyStopping

    with pytest.raises(
        GraphRMAError, match=rf"^patience: expected an integer >= 1 \(epochs\), got {re.escape(repr(patience))}$"
    ):
        EarlyStopping("val_acc", patience=patience)
    assert EarlyStopping("val_acc", patience=__import__("numpy").int64(2)).patience == 2
