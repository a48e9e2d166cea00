"""Node-classification protocols: each option changes what it says on a hand-checkable graph; the presets are the
cited configurations; the residual GAT is Platonov et al.'s block around PyG's GATConv; ROC AUC; early stopping."""

import dataclasses
import itertools
import math
import re

import pytest
import torch
from conftest import PYG
from torch_geometric.data import Data
from torch_geometric.nn import GATConv

import graph_rma
from graph_rma.data.transforms import EDGE_OPTIONS, direct_edges, normalize_features
from graph_rma.engine import EarlyStopping
from graph_rma.metrics.classification import roc_auc, score
from graph_rma.models import ClassicGAT, ResidualGAT, TwoLayerGAT
from graph_rma.tasks import node_classification as nc
from graph_rma.tasks import node_training as nt
from graph_rma.tasks.protocols import PROTOCOLS, Protocol, default_protocol, resolve_protocol


# ---- graph transforms ----------------------------------------------------------------------------------------
def test_feature_normalisation_by_hand():
    x = torch.tensor([[1.0, 3.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [2.0, 2.0, 4.0, 0.0]])
    assert normalize_features(x, "none") is x
    row = normalize_features(x, "row")
    assert row.to_dense().tolist() == [[0.25, 0.75, 0.0, 0.0], [0.0] * 4, [0.25, 0.25, 0.5, 0.0]]
    sparse = normalize_features(torch.eye(8) * 2, "row")  # 1 in 8 entries non-zero: stored sparse
    assert sparse.is_sparse and torch.equal(sparse.to_dense(), torch.eye(8))
    with pytest.raises(ValueError, match="features: expected one of"):
        normalize_features(x, "standard")


def test_row_normalisation_of_zero_and_negative_sums_follows_ggcn():
    """GGCN's code (r_inv = rowsum ** -1; r_inv[isinf(r_inv)] = 0): a zero-sum row becomes zeros (it used to become
    +-1e12), a negative-sum row is divided by its sum (it used to be divided by 1e-12)."""
    x = torch.tensor([[1.0, -1.0, 0.0, 0.0], [-1.0, -3.0, 0.0, 0.0], [2.0, -3.0, 0.0, 0.0], [0.0] * 4])
    row = normalize_features(x, "row").to_dense()
    assert row.tolist() == [[0.0] * 4, [0.25, 0.75, 0.0, 0.0], [-2.0, 3.0, 0.0, 0.0], [0.0] * 4]
    assert normalize_features(torch.tensor([[1e-40, 0.0], [1.0, 1.0]]), "row").tolist() == [[0.0, 0.0], [0.5, 0.5]]


def test_edge_direction_by_hand():
    ei = torch.tensor([[0, 0, 2, 0], [1, 2, 1, 1]])  # 0->1 twice, 0->2, 2->1
    pairs = lambda e: sorted(map(tuple, e.t().tolist()))  # noqa: E731
    assert direct_edges(ei, "as-stored", 3) is ei  # unchanged: order and the duplicate kept
    assert pairs(direct_edges(ei, "reversed", 3)) == [(1, 0), (1, 2), (2, 0)]
    assert pairs(direct_edges(ei, "undirected", 3)) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    with pytest.raises(ValueError, match="edges: expected one of"):
        direct_edges(ei, "both", 3)


def test_reversed_edges_make_a_node_attend_over_its_out_links():
    """GGCN's dense GAT: row i of the adjacency holds i's out-links; PyG attends over in-links, so the edge 0 -> 1
    reversed lets node 0 (and not node 1) see its neighbour's features."""
    torch.manual_seed(0)
    conv = GATConv(2, 2, heads=1, add_self_loops=False)
    x = torch.tensor([[1.0, 0.0], [0.0, 5.0]])
    stored = torch.tensor([[0], [1]])
    out_as_stored = conv(x, direct_edges(stored, "as-stored", 2))
    out_reversed = conv(x, direct_edges(stored, "reversed", 2))
    bias = conv.bias.detach()
    assert torch.allclose(out_as_stored[0], bias) and not torch.allclose(out_as_stored[1], bias)
    assert torch.allclose(out_reversed[1], bias) and not torch.allclose(out_reversed[0], bias)


def test_self_loops_option_reaches_both_gat_layers():
    x, ei = torch.randn(4, 3), torch.tensor([[0, 1, 2], [1, 2, 3]])
    for loops, edges in ((True, 3 + 4), (False, 3)):
        model = TwoLayerGAT(3, 2, hidden_channels=2, heads=2, self_loops=loops).eval()
        _, att, _ = model.forward_with_attention(x, ei)
        assert [a.size(0) for a, _ in att] == [edges, edges]
        assert TwoLayerGAT(**model.model_kwargs).self_loops is loops
    assert "self_loops=False" in repr(TwoLayerGAT(3, 2, self_loops=False))


# ---- presets -------------------------------------------------------------------------------------------------
def test_presets_are_the_cited_configurations():
    g, y, p, s = (PROTOCOLS[k] for k in ("gat", "ggcn", "platonov", "platonov-small"))
    assert (g.features, g.edges, g.weight_decay, g.epochs, g.early_stopping) == (
        "row",
        "as-stored",
        5e-4,
        1000,
        "val_metric",
    )
    # Yan et al.'s table_1_GAT.sh and full-supervised.py for the heterophilous graphs
    assert (y.hidden, y.heads, y.dropout, y.attn_dropout, y.lr, y.weight_decay) == (8, 8, 0.6, 0.6, 0.005, 5e-5)
    assert (y.features, y.edges, y.self_loops, y.epochs, y.patience, y.early_stopping) == (
        "row",
        "reversed",
        True,
        1500,
        100,
        "val_loss",
    )
    assert "Table 1" in y.reproduces and "60.26" in y.reproduces
    # Platonov et al.'s train.py defaults
    assert (p.model, p.hidden, p.heads, p.layers, p.dropout, p.attn_dropout, p.lr, p.weight_decay, p.epochs) == (
        "residual",
        512,
        8,
        5,
        0.2,
        0.0,
        3e-5,
        0.0,
        1000,
    )
    assert (p.features, p.edges, p.self_loops, p.patience) == ("none", "undirected", True, 1000)
    assert "92.01" in p.reproduces and s.model == "residual" and s.hidden < p.hidden and s.epochs < p.epochs
    assert [default_protocol(d) for d in ("Cora", "chameleon", "actor", "minesweeper", "roman_empire")] == [
        "gat",
        "ggcn",
        "ggcn",
        "platonov-small",
        "platonov-small",
    ]


def test_overrides_and_bad_values_are_one_line_errors():
    p = resolve_protocol("ggcn", "chameleon", {"lr": 0.01, "v2": True, "heads": None})
    assert (p.name, p.lr, p.v2, p.heads, p.weight_decay) == ("ggcn", 0.01, True, 8, 5e-5)
    assert resolve_protocol(None, "minesweeper").name == "platonov-small"
    for overrides, match in (
        ({"lr": float("inf")}, "lr: expected a finite number"),
        ({"lr": 0}, "lr: expected a finite number > 0"),
        ({"weight_decay": float("nan")}, "weight_decay"),
        ({"dropout": 1.0}, "dropout: expected a probability"),
        ({"edges": "both"}, "edges: expected one of"),
        ({"layers": 3}, "layers: the GAT model has 2 layers"),
        ({"self_loops": "no"}, "self_loops: expected True or False"),
        ({"colour": 1}, "unknown field"),
    ):
        with pytest.raises(ValueError, match=match):
            resolve_protocol("ggcn", "chameleon", overrides)
    with pytest.raises(ValueError, match="hidden: the residual GAT splits hidden over the heads"):
        resolve_protocol("platonov-small", "minesweeper", {"hidden": 60})
    with pytest.raises(ValueError, match="protocol: expected one of"):
        resolve_protocol("geom-gcn", "chameleon")


def test_metric_and_stopping_rule_follow_the_task():
    p = PROTOCOLS["platonov-small"]
    assert nc.resolve_metric(p, 2) == ("roc_auc", "val_auc")
    assert nc.resolve_metric(p, 5) == ("accuracy", "val_acc")
    assert nc.resolve_metric(PROTOCOLS["ggcn"], 5) == ("accuracy", "val_loss")
    with pytest.raises(ValueError, match="roc_auc needs a binary task"):
        nc.resolve_metric(Protocol("x", "", metric="roc_auc"), 3)
    with pytest.raises(ValueError, match="val_acc does not match the metric roc_auc"):
        nc.resolve_metric(Protocol("x", "", early_stopping="val_acc"), 2)
    name, kwargs = nc.model_settings(p, 7, 2, "roc_auc")
    assert name == "residual" and kwargs["out_channels"] == 1 and kwargs["hidden"] == 64


# ---- the residual GAT ------------------------------------------------------------------------------------------
def test_residual_gat_is_the_pre_norm_block_around_pygs_gatconv():
    """h0 = GELU(W_in x); h1 = h0 + W2 GELU(W1 TwoLayerGAT(LN(h0))); out = W_out LN(h1), checked against stock GATConv
    with the same weights (eval mode: dropout off)."""
    torch.manual_seed(0)
    model = ResidualGAT(5, 3, hidden=8, heads=2, layers=1, dropout=0.5).eval()
    stock = GATConv(8, 4, heads=2)
    stock.load_state_dict({k: v for k, v in model.convs[0].state_dict().items() if k in stock.state_dict()})
    x, ei = torch.randn(6, 5), torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    h0 = torch.nn.functional.gelu(model.input(x))
    msg = stock(model.norms[0](h0), ei)
    h1 = h0 + model.ffn_out[0](torch.nn.functional.gelu(model.ffn_in[0](msg)))
    expected = model.output(model.output_norm(h1))
    assert torch.allclose(model(x, ei), expected, atol=1e-6)
    out, att, heads = model.forward_with_attention(x, ei)
    assert torch.allclose(out, expected, atol=1e-6) and heads.shape == (6, 2, 4) and att[0][0].shape == (12, 2)
    assert torch.allclose(model.head_outputs(x, ei), (msg - stock.bias).view(6, 2, 4), atol=1e-6)
    assert ResidualGAT(**model.model_kwargs).model_kwargs == model.model_kwargs
    # -sep: the feed-forward net reads [own projection, message]; its layer adds no self-loops
    sep = ResidualGAT(5, 3, hidden=8, heads=2, layers=2, sep=True)
    assert sep.ffn_in[0].in_features == 16 and not sep.convs[0].add_self_loops and sep(x, ei).shape == (6, 3)
    with pytest.raises(ValueError, match="hidden: expected a multiple of heads"):
        ResidualGAT(5, 3, hidden=9, heads=2)


def test_a_sampler_finds_every_blocks_heads():
    import graph_rma

    groups = graph_rma.find_particle_groups(ResidualGAT(5, 1, hidden=16, heads=4, layers=2))
    assert [(g.name, g.num_heads) for g in groups] == [("convs.0", 4), ("convs.1", 4)]


# ---- metrics and early stopping --------------------------------------------------------------------------------
def _auc_by_pairs(s, y):
    pos = [a for a, t in zip(s, y) if t == 1]
    neg = [a for a, t in zip(s, y) if t == 0]
    return sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg)) / (len(pos) * len(neg))


def test_roc_auc_by_hand_and_by_its_definition():
    assert roc_auc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1])) == 0.75  # sklearn's example
    assert roc_auc(torch.tensor([1.0, 1.0, 0.0]), torch.tensor([1, 0, 0])) == 0.75  # a tie counts one half
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        s = torch.randint(0, 6, (40,), generator=g).float()  # many ties
        y = torch.randint(0, 2, (40,), generator=g)
        assert math.isclose(roc_auc(s, y), _auc_by_pairs(s.tolist(), y.tolist()), rel_tol=1e-12)
    assert score(torch.tensor([[0.0, 1.0], [2.0, 0.0]]), torch.tensor([1, 0]), "roc_auc") == 1.0
    for s, y, match in (
        ([0.1, 0.2], [1, 1], "needs both classes"),
        ([0.1], [0, 1], "differ in length"),
        ([0.1, 0.2], [0, 2], "labels must be 0 or 1"),
    ):
        with pytest.raises(ValueError, match=match):
            roc_auc(torch.tensor(s), torch.tensor(y))


def test_roc_auc_refuses_scores_that_are_not_finite():
    """scikit-learn's roc_auc_score refuses NaN and infinite scores; so does this one, where it used to rank them
    (1.0 with one NaN below, 0.75 when all are NaN)."""
    y = torch.tensor([0, 0, 1, 1])
    for s in (
        [0.1, 0.4, float("nan"), 0.8],
        [float("nan")] * 4,
        [0.1, float("inf"), 0.35, 0.8],
        [float("-inf"), 0.4, 0.35, 0.8],
    ):
        with pytest.raises(ValueError, match=r"roc_auc: scores must be finite, got \d NaN or infinite score"):
            roc_auc(torch.tensor(s), y)
    with pytest.raises(ValueError, match="scores must be finite, got 1 NaN"):
        score(torch.tensor([[0.0], [float("nan")], [1.0], [2.0]]), y, "roc_auc")  # the one-logit path too


def test_roc_auc_equals_scikit_learn():
    from sklearn import metrics  # the dev extra installs scikit-learn: this test runs, never skips

    g = torch.Generator().manual_seed(1)
    s, y = torch.randn(200, generator=g), torch.randint(0, 2, (200,), generator=g)
    assert math.isclose(roc_auc(s, y), metrics.roc_auc_score(y.numpy(), s.numpy()), rel_tol=1e-12)


def test_val_loss_rule_keeps_the_lowest_loss_and_stops_after_patience():
    stop = EarlyStopping("val_loss", patience=2)
    # (metric, loss) per epoch: the metric is ignored; a loss equal to the best is no improvement (strict <)
    steps = [(0.1, 1.0), (0.9, 0.8), (0.95, 0.8), (0.2, 0.7), (0.99, 0.75), (0.99, 0.9)]
    assert [stop.update(a, loss) for a, loss in steps] == [
        (True, False),
        (True, False),
        (False, False),
        (True, False),
        (False, False),
        (False, True),
    ]
    with pytest.raises(ValueError, match="rule: expected one of"):
        EarlyStopping("val_los")


# ---- one run, end to end ---------------------------------------------------------------------------------------
def test_a_binary_run_trains_one_logit_and_reports_roc_auc():
    torch.manual_seed(0)
    n = 40
    y = torch.arange(n) % 2
    x = torch.randn(n, 4) + y[:, None].float()  # separable enough
    ei = torch.stack([torch.arange(n), (torch.arange(n) + 2) % n])
    part = torch.arange(n) // 2 % 4  # both classes in every part
    masks = [part < 2, part == 2, part == 3]
    data = Data(x=x, edge_index=ei, y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2])
    proto = dataclasses.replace(
        PROTOCOLS["platonov-small"],
        hidden=16,
        layers=1,
        epochs=30,
        patience=30,
        lr=3e-3,
        weight_decay=0.0,
        early_stopping="val_auc",
        metric="roc_auc",
    )
    metrics, state, model = nc.train_run(proto, data, "ma", 0)
    assert metrics["metric"] == "roc_auc" and model.output.out_features == 1
    model.eval()
    with torch.no_grad():
        out = model(x, ei).squeeze(-1)
    assert metrics["test_metric"] == pytest.approx(roc_auc(out[masks[2]], y[masks[2]]))
    assert metrics["val_metric"] > 0.8


def test_a_diverging_run_stops_with_a_clear_error():
    data = Data(
        x=torch.randn(10, 3),
        edge_index=torch.tensor([[0, 1], [1, 2]]),
        y=torch.arange(10) % 2,
        train_mask=torch.ones(10, dtype=torch.bool),
        val_mask=torch.ones(10, dtype=torch.bool),
        test_mask=torch.ones(10, dtype=torch.bool),
    )
    data.x[0, 0] = float("nan")
    with pytest.raises(nt.TrainingDiverged, match="training diverged at epoch 1 .*the loss is nan"):
        nc.train_run(
            dataclasses.replace(PROTOCOLS["gat"], hidden=2, heads=2, epochs=3, metric="accuracy"), data, "ma", 0
        )


needs_minesweeper = pytest.mark.skipif(
    not (PYG / "heterophilous_graph" / "minesweeper" / "raw").is_dir(),
    reason="Platonov et al.'s graphs not available (set GRAPH_RMA_DATA)",
)


@pytest.mark.slow
@needs_minesweeper
def test_node_command_on_minesweeper_scores_roc_auc(tmp_path, capsys):
    from graph_rma.cli import main

    out = tmp_path / "out"
    assert (
        main(
            [
                "node",
                "--dataset",
                "minesweeper",
                "--variants",
                "ma",
                "--seeds",
                "3",
                "--epochs",
                "2",
                "--hidden",
                "16",
                "--layers",
                "1",
                "--out",
                str(out),
                "--no-plot",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "minesweeper, protocol platonov-small (residual, metric roc_auc, early stopping val_auc)" in text
    assert "test ROC AUC (%)" in text
    res = nc.read_json(out / "results.json")
    assert res["config"]["edges"] == "undirected" and res["config"]["features"] == "none"
    assert res["runs"][0]["split"] == 3 and res["config"]["model_kwargs"]["hidden"] == 16
    # the report rebuilds the run from its checkpoint under the same protocol
    from graph_rma.tasks.report import report_checkpoint

    summary = report_checkpoint(out / res["runs"][0]["checkpoint"], tmp_path / "report", plots=False)
    assert summary["task"] == "node" and "diversity" in summary
    # one output logit: the report scores ROC AUC (the run's own test metric), not a softmax over one logit
    assert summary["metric"] == "roc_auc" and summary["score"] == pytest.approx(
        res["runs"][0]["metrics"]["test_metric"]
    )
    assert summary["calibration"]["bins"]["count"][-1] < summary["num_nodes"]


def test_a_run_refuses_a_split_without_validation_or_test_nodes():
    """An empty test mask used to report test 0.0, an empty validation mask to keep epoch 1 (or, under val_loss,
    the untrained model)."""
    proto = dataclasses.replace(PROTOCOLS["gat"], hidden=2, heads=2, epochs=2, metric="accuracy")
    for empty in ("train_mask", "val_mask", "test_mask"):
        masks = {
            "train_mask": torch.arange(6) < 2,
            "val_mask": (torch.arange(6) >= 2) & (torch.arange(6) < 4),
            "test_mask": torch.arange(6) >= 4,
        }
        masks[empty] = torch.zeros(6, dtype=torch.bool)
        data = Data(x=torch.randn(6, 3), edge_index=torch.tensor([[0, 1], [1, 2]]), y=torch.arange(6) % 2, **masks)
        for rule in ("val_acc", "val_loss"):
            with pytest.raises(ValueError, match=f"data: {empty} selects no node"):
                nc.train_run(dataclasses.replace(proto, early_stopping=rule), data, "ma", 0)


def test_node_command_refuses_a_dropped_in_graph_with_an_empty_split_in_one_line(tmp_path, capsys):
    from test_platonov import _write

    from graph_rma.cli import main

    val = torch.tensor([0, 0, 1, 0, 0], dtype=torch.bool).repeat(10, 1).numpy()
    val[7] = False
    _write(tmp_path, "holes", val_masks=val)
    assert (
        main(
            [
                "node",
                "--dataset",
                "holes",
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
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "holes.npz: split 7 has no validation node (val_masks[7] is all False)" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


@needs_minesweeper
@pytest.mark.parametrize(
    "argv,match",
    [
        (
            ["--dataset", "minesweeper", "--metric", "accuracy", "--early-stopping", "val_auc"],
            "does not match the metric",
        ),
        (["--dataset", "chameleon_filtered", "--metric", "roc_auc"], "roc_auc needs a binary task"),
        (["--dataset", "minesweeper", "--lr", "inf"], "--lr: expected a finite number"),
        (["--dataset", "minesweeper", "--out", ""], "--out: expected a folder, got an empty path"),
        (["--dataset", "nonexistent_graph"], "name: expected one of"),
    ],
)
def test_node_command_mistakes_are_one_line(tmp_path, capsys, argv, match):
    from graph_rma.cli import main

    argv = argv + (["--out", str(tmp_path / "o")] if "--out" not in argv else [])
    assert main(["node", *argv, "--seeds", "0", "--epochs", "1", "--variants", "ma", "--no-plot"]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")),
    ],
)
def test_a_run_trains_on_the_device_asked_for_and_returns_a_cpu_state(device):
    torch.manual_seed(0)
    data = Data(
        x=torch.randn(12, 3),
        edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]),
        y=torch.arange(12) % 3,
        train_mask=torch.arange(12) < 6,
        val_mask=(torch.arange(12) >= 6) & (torch.arange(12) < 9),
        test_mask=torch.arange(12) >= 9,
    )
    proto = dataclasses.replace(PROTOCOLS["gat"], hidden=2, heads=2, epochs=3)
    metrics, state, model = nc.train_run(proto, data, "svgd:alpha=0.1", 0, device=device)
    assert metrics["device"] == device and next(model.parameters()).device.type == device
    assert all(v.device.type == "cpu" for v in state.values())


def test_the_lean_option_reaches_every_attention_layer_and_keeps_the_outputs():
    x, ei = torch.randn(8, 5), torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]])
    for cls, kwargs in (
        (TwoLayerGAT, {"hidden_channels": 4, "heads": 2}),
        (ResidualGAT, {"hidden": 8, "heads": 2, "layers": 2}),
    ):
        torch.manual_seed(0)
        plain = cls(5, 3, **kwargs).eval()
        lean = cls(5, 3, lean=True, **kwargs).eval()
        lean.load_state_dict(plain.state_dict())
        convs = [m for m in lean.modules() if hasattr(m, "lean")]
        assert convs and all(m.lean for m in convs if m is not lean)
        torch.testing.assert_close(lean(x, ei), plain(x, ei), atol=1e-5, rtol=1e-5)
    assert resolve_protocol("platonov-small", "tolokers", {"lean": True}).lean is True
    _, kwargs = nc.model_settings(resolve_protocol("ggcn", "chameleon", {"lean": True}), 5, 3, "accuracy")
    assert kwargs["lean"] is True


def test_runs_saved_before_an_option_existed_are_reused(tmp_path, monkeypatch):
    """Protocol fields added later (lean; norm, residual, pre_linear) do not make finished runs look different:
    they are resumed (the saved config is read with the dataclass's defaults, no hand-kept list)."""
    import json

    if not (PYG / "webkb" / "texas" / "raw").is_dir():
        pytest.skip("needs the Geom-GCN raw files")
    out = tmp_path / "out"
    proto = resolve_protocol(None, "texas", {"epochs": 2})
    nc.run_study(proto, ["ma"], [0], out, dataset="texas", make_plot=False, progress=False)
    record = next((out / "runs").rglob("seed0.json"))
    saved = json.loads(record.read_text())
    for key in ("lean", "norm", "residual", "pre_linear"):  # as a run of an earlier version wrote it
        saved["config"].pop(key)
    saved["config"]["model_kwargs"].pop("lean")
    record.write_text(json.dumps(saved))
    calls = []
    monkeypatch.setattr(nc, "train_run", lambda *a, **k: calls.append(a) or (_ for _ in ()).throw(AssertionError))
    res = nc.run_study(proto, ["ma"], [0], out, dataset="texas", make_plot=False, progress=False, resume=True)
    assert calls == [] and len(res["runs"]) == 1


def test_luo_protocol_applies_each_graphs_settings_then_the_overrides():

    mine = resolve_protocol("luo", "minesweeper")
    assert (mine.model, mine.layers, mine.hidden, mine.heads, mine.lr, mine.dropout, mine.norm, mine.epochs) == (
        "classic",
        15,
        64,
        1,
        0.01,
        0.2,
        "batch",
        2000,
    )
    cham = resolve_protocol("luo", "chameleon_filtered", {"layers": 3, "heads": 8})
    assert (cham.layers, cham.hidden, cham.heads, cham.weight_decay, cham.dropout) == (3, 256, 8, 1e-3, 0.7)
    assert resolve_protocol("luo", "tolokers") == PROTOCOLS["luo"]  # no per-graph settings: the preset as it is
    name, kwargs = mine.model_settings(7, 2, "roc_auc")
    assert name == "classic" and kwargs["out_channels"] == 1 and kwargs["layers"] == 15 and kwargs["norm"] == "batch"
    assert isinstance(nt.build_model(name, kwargs), ClassicGAT)
    with pytest.raises(ValueError, match="norm: expected one of"):
        resolve_protocol("luo", "minesweeper", {"norm": "group"})
    with pytest.raises(ValueError, match="hidden: the classic GAT splits hidden over the heads"):
        resolve_protocol("luo", "minesweeper", {"heads": 3})


def test_a_study_takes_a_protocol_and_records_no_head_distance_for_one_head(tmp_path):
    """run_study(protocol=Protocol(...)) takes the whole configuration as one object; a single-head model has no
    distance between heads, so none is reported (not a made-up number)."""
    import dataclasses

    given = PROTOCOLS["luo"]
    assert nc._protocol(given, "minesweeper") is given  # a Protocol is used as it is
    assert nc._protocol("luo", "minesweeper").layers == 15  # a name: the preset with the graph's settings

    torch.manual_seed(0)
    n = 40
    data = Data(
        x=torch.randn(n, 6),
        edge_index=torch.randint(0, n, (2, 160)),
        y=torch.arange(n) % 3,
        train_mask=torch.arange(n) < 20,
        val_mask=(torch.arange(n) >= 20) & (torch.arange(n) < 30),
        test_mask=torch.arange(n) >= 30,
    )
    proto = dataclasses.replace(PROTOCOLS["luo"], layers=2, hidden=8, epochs=3, patience=3)
    metrics, _, model = nc.train_run(proto, data, "ma", 0)
    assert isinstance(model, ClassicGAT) and metrics["dist"] is None
    rows = nc.summarize([{"variant": "ma", "seed": 0, "metrics": metrics}], ["ma"])
    assert rows[0]["dist_mean"] is None and "| — |" in nc.format_table(rows)
    # one seed: its value without a spread (a standard deviation of one run would be a made-up 0)
    acc = f"{100 * metrics['test_metric']:.1f}"
    assert f"| `ma` | 1 | {acc} | — |" in nc.format_table(rows) and "±" not in nc.format_table(rows)
    two = nc.summarize([{"variant": "ma", "seed": s, "metrics": metrics} for s in (0, 1)], ["ma"])
    assert f"| `ma` | 2 | {acc} ± 0.0 | — |" in nc.format_table(two)


# ---- issue 33 item 1: the command line's protocol options are generated from the dataclass ---------------------
def _protocol_group(parser):
    return next(g for g in parser._action_groups if g.title == "protocol")


def test_every_protocol_field_is_a_node_option_and_every_protocol_option_a_field():
    """``graph-rma node``'s protocol options are generated from Protocol's fields and their metadata: one option
    (a --x / --no-x pair for a bool) per field, with the field's help and choices, and no other."""
    from graph_rma.cli.node import build_parser
    from graph_rma.tasks.protocols import protocol_fields

    group = _protocol_group(build_parser())
    by_dest = {}
    for action in group._group_actions:
        by_dest.setdefault(action.dest, []).append(action)
    fields = {f.name: f for f in protocol_fields()}
    assert set(by_dest) - {"protocol"} == set(fields)
    for name, f in fields.items():
        actions, flag = by_dest[name], "--" + name.replace("_", "-")
        assert actions[0].option_strings == [flag] and actions[0].default is None
        assert actions[0].help.startswith(f.metadata["help"])
        if f.metadata["kind"] == "bool":
            assert [a.option_strings for a in actions] == [[flag], ["--no-" + flag[2:]]]
            assert (actions[0].const, actions[1].const) == (True, False)
        elif f.metadata["kind"] == "choice":
            assert tuple(actions[0].choices) == f.metadata["choices"]
    # the options given are the overrides of the protocol, and nothing else
    args = build_parser().parse_args(["--dataset", "cora", "--norm", "layer", "--no-residual", "--sep"])
    assert (args.norm, args.residual, args.sep, args.lean) == ("layer", False, True, None)


def test_a_new_protocol_field_becomes_a_node_option_by_itself(monkeypatch, capsys):
    """A field added to the dataclass (with its metadata) is an option of ``graph-rma node`` with nothing else
    written: its help, its kind's argument check, the --x / --no-x pair of a bool."""
    import dataclasses

    from graph_rma.cli import node
    from graph_rma.tasks import protocols

    @dataclasses.dataclass(frozen=True)
    class Extended(Protocol):
        warmup: int = protocols._field(5, "positive_int", "epochs of linear learning-rate warm-up")
        jitter: bool = protocols._field(False, "bool", "jitter the features")

    monkeypatch.setattr(
        node,
        "protocol_fields",
        lambda: [f for f in dataclasses.fields(Extended) if f.name not in ("name", "reproduces")],
    )
    parser = node.build_parser()
    args = parser.parse_args(["--dataset", "cora", "--warmup", "3", "--no-jitter"])
    assert (args.warmup, args.jitter) == (3, False)
    help_text = " ".join(parser.format_help().split())
    assert "--warmup WARMUP epochs of linear learning-rate warm-up (default: the protocol's)" in help_text
    assert "--jitter | --no-jitter" in help_text
    with pytest.raises(SystemExit):
        parser.parse_args(["--dataset", "cora", "--warmup", "0"])
    assert "argument --warmup: expected a positive integer, got '0'" in capsys.readouterr().err


def test_the_node_command_hands_run_study_one_protocol(monkeypatch):
    """``graph-rma node`` resolves the protocol itself (the preset, its settings for the graph as the loader spells
    it, the options over them) and passes run_study that one object, no per-field keyword arguments."""
    from graph_rma.cli import main

    seen = {}

    def fake_run_study(protocol, variants, seeds, out, **kw):
        seen.update(kw, protocol=protocol)
        return {"summary": [], "interrupted": False}

    monkeypatch.setattr(nc, "run_study", fake_run_study)
    argv = ["node", "--dataset", "chameleon-filtered", "--protocol", "luo", "--layers", "3", "--no-residual"]
    assert main([*argv, "--seeds", "0", "--no-plot", "--out", "unused"]) == 0
    proto = seen["protocol"]
    assert isinstance(proto, Protocol) and proto == resolve_protocol(
        "luo", "chameleon_filtered", {"layers": 3, "residual": False}
    )
    assert (proto.hidden, proto.weight_decay) == (256, 1e-3)  # chameleon_filtered's own settings, though misspelt
    assert not set(seen) & {f for f in proto.settings()}


def test_run_study_takes_the_protocol_first_and_refuses_anything_else_there(monkeypatch, tmp_path):
    """run_study(protocol, variants, seeds, out, *, resume, device, ...): a Protocol, a preset's name (any case) or
    None first; a list of variants or a variant spec first (the order of graph_rma 0.1.0) is a ValueError saying
    that the protocol comes first, and a protocol field as a keyword argument is Python's TypeError."""
    import dataclasses
    import inspect

    assert list(inspect.signature(nc.run_study).parameters)[:6] == [
        "protocol",
        "variants",
        "seeds",
        "out",
        "resume",
        "device",
    ]
    torch.manual_seed(0)
    n = 40
    graph = Data(
        x=torch.rand(n, 6),
        edge_index=torch.randint(0, n, (2, 160)),
        y=torch.arange(n) % 3,
        train_mask=torch.arange(n) < 20,
        val_mask=(torch.arange(n) >= 20) & (torch.arange(n) < 30),
        test_mask=torch.arange(n) >= 30,
    )
    monkeypatch.setattr(nc, "load_node_graph", lambda *a, **k: graph)  # no data read: a small random graph
    proto = dataclasses.replace(resolve_protocol("ggcn", "texas"), epochs=2, hidden=4, heads=2)
    kw = dict(dataset="texas", make_plot=False, progress=False)
    done = nc.run_study(proto, ["ma", "svgd:alpha=0.1"], [0, 1], tmp_path / "new", **kw)
    assert done["config"]["epochs"] == 2 and sorted((r["variant"], r["seed"]) for r in done["runs"]) == [
        ("ma", 0),
        ("ma", 1),
        ("svgd:alpha=0.1", 0),
        ("svgd:alpha=0.1", 1),
    ]
    with pytest.raises(ValueError, match="seeds: expected a seed in"):  # a preset's name first: taken as the protocol
        nc.run_study("GGCN", ["ma"], [2**70], tmp_path / "name", **kw)
    with pytest.raises(ValueError, match=r"^protocol: expected one of .*got list \['ma'\]; .*takes the protocol first"):
        nc.run_study(["ma"], [0], tmp_path / "old", **kw)
    with pytest.raises(TypeError, match="multiple values for argument 'protocol'"):
        nc.run_study(["ma"], [0], tmp_path / "old", protocol=proto, **kw)
    with pytest.raises(ValueError, match=r"got the variant spec 'svgd'; run_study's first argument is the protocol"):
        nc.run_study("svgd", ["ma"], [0], tmp_path / "x", **kw)
    with pytest.raises(ValueError, match=r"^protocol: expected one of .*got 'nope'"):
        nc.run_study("nope", ["ma"], [0], tmp_path / "x", **kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'epochs'"):
        nc.run_study(None, ["ma"], [0], tmp_path / "x", epochs=2, **kw)
    assert not (tmp_path / "old").exists() and not (tmp_path / "x").exists()


def test_models_built_directly_still_refuse_bad_sizes_in_one_line():
    """The Protocol validates its fields where they enter; the models keep their own one-line checks (public API,
    built directly too), one rule for all three (the GAT's copy accepted True as a size)."""
    for cls, kwargs, match in (
        (TwoLayerGAT, {"heads": True}, "heads: expected a positive integer, got True"),
        (TwoLayerGAT, {"hidden_channels": 0}, "hidden_channels: expected a positive integer, got 0"),
        (TwoLayerGAT, {"dropout": 1.5}, r"dropout: expected a probability in \[0, 1\), got 1.5"),
        (ResidualGAT, {"hidden": 0}, "hidden: expected a positive integer, got 0"),
        (ClassicGAT, {"attn_dropout": -0.1}, r"attn_dropout: expected a probability in \[0, 1\)"),
    ):
        with pytest.raises(ValueError, match=match):
            cls(5, 3, **kwargs)


def test_direct_edges_refuses_a_node_count_that_would_drop_edges():
    """Issue 67, item 4: num_nodes not above the largest id made "undirected" (and "reversed") drop that node's
    edges without a word."""
    from graph_rma import GraphRMAError

    ei = torch.tensor([[0, 1, 4], [1, 2, 0]])
    for how in EDGE_OPTIONS:
        for n in (4, 2):
            with pytest.raises(
                GraphRMAError,
                match=rf"^num_nodes: expected more than every node id of edge_index \(ids from 0 to 4\), got {n}: "
                rf"the edges of the nodes outside \[0, {n}\) would be dropped$",
            ):
                direct_edges(ei, how, n)
        assert direct_edges(ei, how, 5).size(1) == {"as-stored": 3, "reversed": 3, "undirected": 6}[how]
    with pytest.raises(GraphRMAError, match=r"ids from -1 to 1"):
        direct_edges(torch.tensor([[0, -1], [1, 1]]), "undirected", 3)
    for bad in (5.0, True, -1, "5"):
        with pytest.raises(GraphRMAError, match=rf"^num_nodes: expected an integer >= 0, got {bad!r}$"):
            direct_edges(ei, "undirected", bad)
    with pytest.raises(
        GraphRMAError, match=r"^edge_index: expected a tensor of shape \[2, num_edges\], got shape \[3\]"
    ):
        direct_edges(torch.tensor([0, 1, 2]), "undirected", 3)
    assert direct_edges(torch.zeros(2, 0, dtype=torch.long), "undirected", 0).shape == (2, 0)


def test_normalize_features_takes_dense_coo_and_csr_matrices_and_refuses_other_shapes():
    """Issue 65, item 9: a 1-D tensor ended in an IndexError, a sparse CSR matrix in a torch error."""
    from graph_rma import GraphRMAError

    x = torch.tensor([[1.0, 3.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [2.0, 2.0, 4.0, 0.0]])
    expected = [[0.25, 0.75, 0.0, 0.0], [0.0] * 4, [0.25, 0.25, 0.5, 0.0]]
    for layout in (x, x.to_sparse(), x.to_sparse_csr()):
        assert normalize_features(layout, "row").to_dense().tolist() == expected
    for bad, got in ((torch.ones(5), "shape [5]"), (torch.ones(2, 2, 2), "shape [2, 2, 2]"), ([[1.0]], "list")):
        for how in ("none", "row"):
            with pytest.raises(
                GraphRMAError,
                match=rf"^x: expected node features of shape \[num_nodes, num_features\], got {re.escape(got)}$",
            ):
                normalize_features(bad, how)


def test_luo_protocol_carries_every_graph_of_their_script_each_cited_by_line():
    """Their run script (LUOyk1999/tunedGNN, medium_graph/run_gnn.sh) tunes the GAT on 14 graphs; only minesweeper
    and chameleon_filtered had their settings, every other graph got the preset's defaults without a word. Values
    hand-copied from the script's GAT lines (flags --ln/--bn as norm, --res, --pre_linear; --epochs default 500)."""
    from graph_rma.tasks.protocols import DATASET_SETTINGS, SETTINGS_SOURCE, protocol_note

    luo = DATASET_SETTINGS["luo"]
    assert len(luo) == 14 and set(SETTINGS_SOURCE["luo"]) == set(luo)
    fields = ("hidden", "layers", "lr", "weight_decay", "dropout", "norm", "residual", "pre_linear", "epochs")
    expected = {  # graph: (script line, the fields above)
        "amazon_computer": (5, (64, 2, 0.001, 5e-5, 0.5, "layer", False, False, 1000)),
        "coauthor_cs": (13, (256, 1, 0.001, 5e-4, 0.3, "layer", True, False, 1500)),
        "cora": (25, (512, 3, 0.001, 5e-4, 0.2, "none", True, False, 500)),
        "pubmed": (33, (512, 2, 0.01, 5e-4, 0.5, "none", False, False, 500)),
        "roman_empire": (47, (512, 10, 0.001, 0.0, 0.3, "batch", True, True, 2500)),
        "questions": (51, (512, 3, 3e-5, 0.0, 0.2, "layer", True, True, 1500)),
        "squirrel_filtered": (55, (512, 7, 0.005, 5e-4, 0.5, "batch", True, False, 500)),
        "chameleon_filtered": (59, (256, 2, 0.01, 0.001, 0.7, "batch", True, False, 200)),
    }
    for graph, (line, values) in expected.items():
        assert SETTINGS_SOURCE["luo"][graph].endswith(f"medium_graph/run_gnn.sh line {line}")
        for dataset in (graph, graph.replace("_", "-").title()):  # as their names are spelled, any case
            p = resolve_protocol("luo", dataset)
            assert tuple(getattr(p, f) for f in fields) == values, graph
            assert p.patience == p.epochs and p.heads == 1 and p.model == "classic"  # no early stopping, one head
            assert p.reproduces.endswith(f"{graph}'s settings: {SETTINGS_SOURCE['luo'][graph]}")
            assert protocol_note("luo", dataset) is None
    for graph in luo:  # every graph's settings build a valid protocol and model
        name, kwargs = resolve_protocol("luo", graph).model_settings(7, 3, "accuracy")
        assert name == "classic" and kwargs["layers"] == luo[graph]["layers"]
    # a graph their script does not tune (or the unfiltered chameleon): the preset's defaults, said in one line
    for graph in ("tolokers", "chameleon"):
        note = protocol_note("luo", graph)
        assert note.startswith(f"protocol luo: no per-graph settings for {graph} (they cover amazon_computer, ")
        assert "the preset's defaults are used: dropout 0.5, epochs 1000, hidden 64, layers 2, lr 0.001" in note
        assert "\n" not in note and resolve_protocol("luo", graph).hidden == 64
    assert protocol_note(None, "chameleon") is None and protocol_note("gat", "tolokers") is None


@pytest.mark.parametrize(
    "protocol,dataset,overrides,field",
    [
        ("luo", "minesweeper", {"out_heads": 2}, "out_heads"),  # only the 2-layer GAT has an output layer's heads
        ("luo", "chameleon_filtered", {"model": "gat", "norm": "layer"}, "norm"),
        ("luo", "minesweeper", {"ffn_multiplier": 2.0}, "ffn_multiplier"),
        ("gat", "cora", {"residual": False}, "residual"),
        ("platonov-small", "minesweeper", {"pre_linear": True}, "pre_linear"),
        ("ggcn", "chameleon", {"ffn_multiplier": 4.0}, "ffn_multiplier"),
    ],
)
def test_an_override_the_chosen_model_does_not_read_is_refused(protocol, dataset, overrides, field):
    """`--protocol luo --out-heads 2`, `--model gat --norm layer`, `--ffn-multiplier` on the classic model were
    accepted and ignored."""
    with pytest.raises(graph_rma.GraphRMAError, match=rf"^{field}: only the \w+ model reads it, and protocol "):
        resolve_protocol(protocol, dataset, overrides)
    # the same fields for the model that reads them are kept
    assert resolve_protocol("gat", "cora", {"out_heads": 2}).out_heads == 2
    assert resolve_protocol("luo", "minesweeper", {"norm": "layer"}).norm == "layer"
    assert resolve_protocol("platonov-small", "minesweeper", {"ffn_multiplier": 2.0}).ffn_multiplier == 2.0


def test_node_says_in_one_line_when_the_preset_has_no_settings_for_the_graph(monkeypatch, tmp_path, capsys):
    from graph_rma.cli import main

    seen = []
    monkeypatch.setattr(
        nc, "run_study", lambda protocol, *a, **k: seen.append(protocol) or {"summary": None, "interrupted": False}
    )
    assert main(["node", "--dataset", "tolokers", "--protocol", "luo", "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("protocol luo: no per-graph settings for tolokers") and len(err.splitlines()) == 1
    assert main(["node", "--dataset", "minesweeper", "--protocol", "luo", "--out", str(tmp_path / "b")]) == 0
    assert capsys.readouterr().err == "" and seen[-1].layers == 15
