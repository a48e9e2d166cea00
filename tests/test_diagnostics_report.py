"""``graph-rma report`` end to end on a checkpoint with the pipeline's keys (a small stand-in task here)."""

import json
import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv

from graph_rma import SVGD
from graph_rma.cli import main as cli_main
from graph_rma.diagnostics import HeadCapture, expected_calibration_error, head_distance, overconfidence_error
from graph_rma.engine import save_checkpoint
from graph_rma.tasks.report import ReportInputs, register_report_task, report_checkpoint, report_tasks

PNG = b"\x89PNG\r\n\x1a\n"


class StandInGAT(torch.nn.Module):
    """Same contract as graph_rma.models.gat.TwoLayerGAT: conv1 / conv2 GATConv, forward(x, edge_index) -> logits."""

    def __init__(self, in_channels, out_channels, hidden_channels=4, heads=4):
        super().__init__()
        self.conv1 = GATConv(in_channels, hidden_channels, heads=heads)
        self.conv2 = GATConv(heads * hidden_channels, out_channels, heads=1, concat=False)

    def forward(self, x, edge_index):
        return self.conv2(F.elu(self.conv1(x, edge_index)), edge_index)


def toy_graph(seed=0, N=60, K=3):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(N) % K
    x = F.one_hot(y, K).float() + 0.8 * torch.randn(N, K, generator=g)
    src = torch.randint(0, N, (4 * N,), generator=g)
    dst = torch.randint(0, N, (4 * N,), generator=g)
    same = y[src] == y[dst]
    edge_index = torch.stack([src[same], dst[same]])  # homophilous edges
    test_mask = torch.zeros(N, dtype=torch.bool)
    test_mask[N // 2 :] = True
    return x, edge_index, y, test_mask


def build_standin(ckpt, root):
    x, edge_index, y, test_mask = toy_graph()
    model = StandInGAT(**ckpt["model_kwargs"])
    model.load_state_dict(ckpt["model"])
    return ReportInputs(model=model, x=x, edge_index=edge_index, y=y, mask=test_mask, layers=["conv1"])


register_report_task("standin", build_standin)


def train_standin(path, variant="plain"):
    torch.manual_seed(0)
    x, edge_index, y, test_mask = toy_graph()
    kwargs = {"in_channels": 3, "out_channels": 3}
    model = StandInGAT(**kwargs)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    if variant == "svgd":
        SVGD(model, alpha=0.1, layers=[model.conv1]).attach(opt)
    for _ in range(30):
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index)[~test_mask], y[~test_mask]).backward()
        opt.step()
    save_checkpoint(
        path,
        {
            "task": "standin",
            "dataset": "toy",
            "model_kwargs": kwargs,
            "variant": variant,
            "seed": 0,
            "model": model.state_dict(),
            "metrics": {"val_metric": 0.0},
        },
    )
    return path, model.eval()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return train_standin(tmp_path_factory.mktemp("ckpt") / "standin.pt")


@pytest.mark.slow
def test_report_writes_json_and_pngs_matching_direct_computation(checkpoint, tmp_path):
    path, model = checkpoint
    out = tmp_path / "report"
    assert cli_main(["report", "--checkpoint", str(path), "--out", str(out), "--bins", "5"]) == 0
    summary = json.loads((out / "report.json").read_text())
    x, edge_index, y, mask = toy_graph()
    with torch.no_grad(), HeadCapture(model.conv1) as cap:
        logits = model(x, edge_index)
    probs = logits[mask].double().softmax(-1)
    acc = float((probs.argmax(-1) == y[mask]).double().mean())
    assert summary["accuracy"] == pytest.approx(acc)
    assert acc > 0.6  # the stand-in learned something, so the report is about a real model
    assert summary["variant"] == "plain" and summary["task"] == "standin" and summary["num_nodes"] == 30
    cal = summary["calibration"]
    assert cal["num_bins"] == 5 and sum(cal["bins"]["count"]) == 30
    assert cal["ece"] == pytest.approx(expected_calibration_error(probs, y[mask], num_bins=5))
    assert cal["oe"] == pytest.approx(overconfidence_error(probs, y[mask], num_bins=5))
    div = summary["diversity"]["conv1"]
    assert div["num_heads"] == 4 and len(div["entropy"]) == 4
    assert div["dist"] == pytest.approx(head_distance(cap.outputs[mask]))
    drops = summary["redundancy"]["drops"]["conv1"]
    assert len(drops) == 4
    assert summary["redundancy"]["baseline"] == pytest.approx(acc)
    for name in ("reliability", "head_importance", "head_entropy", "entropy_cdf"):
        data = (out / f"{name}.png").read_bytes()
        assert data[:8] == PNG and len(data) > 1000


def test_report_errors(checkpoint, tmp_path, capsys):
    path, _ = checkpoint
    assert cli_main(["report", "--checkpoint", str(tmp_path / "missing.pt")]) == 2
    bad = tmp_path / "bad.pt"
    save_checkpoint(bad, {"task": "nope", "model_kwargs": {}, "model": {}})
    assert cli_main(["report", "--checkpoint", str(bad)]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err
    # default output folder next to the checkpoint, JSON only
    assert cli_main(["report", "--checkpoint", str(path), "--no-plots"]) == 0
    assert (path.parent / "report_standin" / "report.json").is_file()
    assert not (path.parent / "report_standin" / "reliability.png").exists()


@pytest.mark.slow
def test_report_compares_a_plain_and_a_repulsive_checkpoint(checkpoint, tmp_path):
    plain, _ = checkpoint
    svgd, _ = train_standin(tmp_path / "svgd.pt", variant="svgd")
    out = tmp_path / "cmp"
    assert cli_main(["report", "--checkpoint", str(plain), str(svgd), "--out", str(out)]) == 0
    comparison = json.loads((out / "comparison.json").read_text())
    assert set(comparison) == {"plain (standin)", "svgd (svgd)"}
    for stem, label in (("standin", "plain (standin)"), ("svgd", "svgd (svgd)")):
        own = json.loads((out / stem / "report.json").read_text())
        assert comparison[label]["accuracy"] == own["accuracy"]
        assert comparison[label]["mean_drop"]["conv1"] == pytest.approx(sum(own["redundancy"]["drops"]["conv1"]) / 4)
    data = (out / "head_importance_compare.png").read_bytes()
    assert data[:8] == PNG and len(data) > 1000


def test_report_checkpoint_from_python(checkpoint, tmp_path):
    """The task without argparse: the same summary as the CLI's report.json, and clear errors."""
    path, _ = checkpoint
    assert {"cora", "standin"} <= set(report_tasks())
    summary = report_checkpoint(path, tmp_path / "py", bins=5, plots=False)
    assert (
        cli_main(["report", "--checkpoint", str(path), "--out", str(tmp_path / "cli"), "--bins", "5", "--no-plots"])
        == 0
    )
    cli, py = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("cli", "py"))
    assert py["files"] == {"summary": str(tmp_path / "py" / "report.json")}
    del cli["files"], py["files"], summary["files"]
    assert cli == py == json.loads(json.dumps(summary))
    assert not (tmp_path / "py" / "reliability.png").exists()
    with pytest.raises(ValueError, match="bins"):
        report_checkpoint(path, tmp_path / "bad", bins=0)
    with pytest.raises(ValueError, match="name"):
        register_report_task("", build_standin)


def build_binary_standin(ckpt, root):
    x, edge_index, y, test_mask = toy_graph(K=2)
    model = StandInGAT(**ckpt["model_kwargs"])
    model.load_state_dict(ckpt["model"])
    return ReportInputs(model=model, x=x, edge_index=edge_index, y=y, mask=test_mask, layers=["conv1"])


register_report_task("standin_binary", build_binary_standin)


def test_a_binary_checkpoint_is_reported_with_roc_auc_and_sigmoid_calibration(tmp_path, capsys):
    """One output logit (the node task's binary model, minesweeper/tolokers): a softmax over it made every
    confidence 1.0 and every prediction class 0 (accuracy and ECE were the class-0 share, every masking drop 0.0).
    The report scores ROC AUC, predicts class 1 where the sigmoid is above 1/2 and bins the sigmoid's confidence."""
    from graph_rma.metrics.classification import roc_auc

    torch.manual_seed(0)
    x, edge_index, y, mask = toy_graph(K=2)
    kwargs = {"in_channels": 2, "out_channels": 1}
    model = StandInGAT(**kwargs)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(30):
        opt.zero_grad()
        F.binary_cross_entropy_with_logits(model(x, edge_index)[~mask, 0], y[~mask].float()).backward()
        opt.step()
    path = tmp_path / "binary.pt"
    save_checkpoint(
        path, {"task": "standin_binary", "model_kwargs": kwargs, "variant": "ma", "model": model.state_dict()}
    )
    out = tmp_path / "report"
    assert cli_main(["report", "--checkpoint", str(path), "--out", str(out), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "report.json").read_text())

    with torch.no_grad():
        logit = model.eval()(x, edge_index)[mask, 0].double()
    p1 = torch.sigmoid(logit)
    pred = (p1 > 0.5).long()
    conf = torch.maximum(p1, 1 - p1)
    correct = pred == y[mask]
    assert summary["metric"] == "roc_auc" and summary["num_nodes"] == 30
    assert summary["score"] == pytest.approx(roc_auc(logit, y[mask])) and summary["score"] > 0.8  # it learned
    assert summary["accuracy"] == pytest.approx(float(correct.double().mean()))
    assert 0 < int(pred.sum()) < 30  # both classes predicted, not class 0 everywhere
    cal = summary["calibration"]
    assert cal["ece"] == pytest.approx(expected_calibration_error(conf, num_bins=10, correct=correct))
    assert cal["oe"] == pytest.approx(overconfidence_error(conf, num_bins=10, correct=correct))
    assert cal["bins"]["count"][:5] == [0] * 5 and cal["bins"]["count"][-1] < 30  # confidences in [1/2, 1], not all 1
    ent = -(p1 * p1.log() + (1 - p1) * (1 - p1).log())
    assert summary["predictive_entropy"]["mean"] == pytest.approx(float(ent.mean()))
    assert summary["predictive_entropy"]["max_possible"] == pytest.approx(math.log(2))
    assert summary["redundancy"]["baseline"] == pytest.approx(summary["score"])  # masking drops the ROC AUC
    assert any(d != 0.0 for d in summary["redundancy"]["drops"]["conv1"])
    assert f"ROC AUC {summary['score']:.4f}  accuracy {summary['accuracy']:.4f}" in printed
    assert cli_main(["report", "--help"]) == 0  # --help says which checkpoints it reads, and how binary ones
    helptext = " ".join(capsys.readouterr().out.split())
    assert "binary one (one output logit: minesweeper, tolokers) with ROC AUC" in helptext


def test_report_on_a_checkpoint_whose_weights_do_not_match_is_one_line(tmp_path, capsys):
    from conftest import PLANETOID

    from graph_rma.cli import main
    from graph_rma.engine import save_checkpoint
    from graph_rma.models import TwoLayerGAT

    if not (PLANETOID / "Cora" / "raw").is_dir():
        pytest.skip("needs the Cora raw files")
    model = TwoLayerGAT(1433, 7)
    state = model.state_dict()
    state["conv1.lin.weight"] = torch.zeros(3, 3)
    save_checkpoint(
        tmp_path / "bad.pt", {"task": "cora", "dataset": "Cora", "model_kwargs": model.model_kwargs, "model": state}
    )
    assert (
        main(
            ["report", "--checkpoint", str(tmp_path / "bad.pt"), "--out", str(tmp_path / "r"), "--root", str(PLANETOID)]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    # issue 67, item 7: torch's first line named only the class ("Error(s) in loading state_dict for TwoLayerGAT:")
    assert err.endswith(
        f"{tmp_path / 'bad.pt'}: the weights do not match the TwoLayerGAT its model_kwargs build: conv1.lin.weight "
        "has shape [3, 3] in the checkpoint, [64, 1433] in the model"
    ), err


def test_weights_that_do_not_fit_the_model_name_the_first_tensor_and_both_shapes():
    """Issue 67, item 7: the report's loader names the first mismatched, missing or extra tensor."""
    from graph_rma import GraphRMAError
    from graph_rma.models import TwoLayerGAT
    from graph_rma.tasks.report import _load_weights

    model = TwoLayerGAT(5, 3)
    what = "the weights do not match the TwoLayerGAT its model_kwargs build"
    wider = TwoLayerGAT(6, 3).state_dict()
    with pytest.raises(
        GraphRMAError,
        match=rf"^{what}: conv1.lin.weight has shape \[64, 6\] in the checkpoint, \[64, 5\] in the model$",
    ):
        _load_weights(model, wider)
    missing = {k: v for k, v in model.state_dict().items() if k != "conv2.bias"}
    with pytest.raises(
        GraphRMAError, match=rf"^{what}: conv2.bias \(shape \[3\] in the model\) is not in the checkpoint$"
    ):
        _load_weights(model, missing)
    extra = {**model.state_dict(), "conv3.weight": torch.zeros(2, 2)}
    with pytest.raises(
        GraphRMAError, match=rf"^{what}: the checkpoint's conv3.weight \(shape \[2, 2\]\) is not in the model$"
    ):
        _load_weights(model, extra)
    with pytest.raises(GraphRMAError, match=r"^its 'model' entry is not a state dict of weights \(got list\)$"):
        _load_weights(model, [1, 2])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    _load_weights(model, TwoLayerGAT(5, 3).state_dict())  # matching weights load
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_report_reads_a_graph_to_text_checkpoint(tmp_path, capsys):
    """graph-rma report works on every run the package writes, GraphWriter's included."""
    from conftest import REPO

    from graph_rma.cli import main
    from graph_rma.engine import read_json
    from graph_rma.tasks import webnlg

    config = {**webnlg.PRESETS["cpu"], "epochs": 1, "hidden": 16, "layers": 1, "batch_size": 4}
    run = tmp_path / "run"
    webnlg.train(
        config, run, REPO / "datasets" / "fixtures" / "webnlg_tiny", "svgd", seed=0, progress=False, device="cpu"
    )
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a measurement, with nothing to warn about (no autograd graph kept)
        assert main(["report", "--checkpoint", str(run / "best.pt"), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "GraphWriter, epoch 1" in out and "head parameter cosine" in out
    report = read_json(tmp_path / "r" / "report.json")
    assert report["kind"] == "graph_to_text" and -1.0 <= report["head_parameter_cosine"] <= 1.0
    # --layers applies to node checkpoints only: on a GraphWriter checkpoint it was silently ignored
    assert main(["report", "--checkpoint", str(run / "best.pt"), "--out", str(tmp_path / "r2"), "--layers", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert "layers: " in err and "graph-to-text (GraphWriter) checkpoint" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r2").exists()


def test_a_single_head_model_is_reported_with_what_applies(tmp_path, capsys):
    """A one-head model (the `luo` protocol's, as published) got no report at all ("need at least 2 heads"), though
    the task's metric and the calibration need no heads: both are reported, and one line says which head
    diagnostics were skipped."""
    torch.manual_seed(0)
    x, edge_index, y, mask = toy_graph()
    kwargs = {"in_channels": 3, "out_channels": 3, "heads": 1}
    model = StandInGAT(**kwargs).eval()
    path = tmp_path / "one_head.pt"
    save_checkpoint(path, {"task": "standin", "model_kwargs": kwargs, "variant": "ma", "model": model.state_dict()})
    out = tmp_path / "report"
    assert cli_main(["report", "--checkpoint", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    summary = json.loads((out / "report.json").read_text())
    with torch.no_grad():
        acc = float((model(x, edge_index)[mask].argmax(-1) == y[mask]).double().mean())
    assert summary["accuracy"] == pytest.approx(acc) and summary["calibration"]["ece"] >= 0
    assert summary["diversity"] == {} and summary["redundancy"]["drops"] == {}
    assert summary["head_diagnostics_skipped"] == {"conv1": 1}
    assert printed[0].startswith(f"[ma] accuracy {acc:.4f}  ECE ")
    assert printed[1] == (
        "[ma] head diagnostics skipped for conv1 (1 head): head distance, diversity, attention entropy per head and "
        "head masking need at least 2 heads"
    )
    assert (out / "reliability.png").read_bytes()[:8] == PNG and not (out / "head_importance.png").exists()
    other = tmp_path / "one_head_b.pt"  # two of them compared: their metrics side by side, no head-masking plot
    save_checkpoint(other, {"task": "standin", "model_kwargs": kwargs, "variant": "ma", "model": model.state_dict()})
    both = tmp_path / "both"
    assert cli_main(["report", "--checkpoint", str(path), str(other), "--out", str(both)]) == 0
    comparison = json.loads((both / "comparison.json").read_text())
    assert comparison["ma (one_head)"]["mean_drop"] == {} and comparison["ma (one_head_b)"][
        "accuracy"
    ] == pytest.approx(acc)
    assert not (both / "head_importance_compare.png").exists()


def test_report_refuses_malformed_node_checkpoints_in_one_line(tmp_path, capsys):
    """Malformed settings or model_kwargs and a split out of range (-1 silently reported the last split) were
    tracebacks or a wrong report; each is one line, exit 2."""
    from conftest import PLANETOID

    from graph_rma.tasks.node_training import build_model
    from graph_rma.tasks.protocols import resolve_protocol

    if not (PLANETOID / "Cora" / "raw").is_dir():
        pytest.skip("needs the Cora raw files")
    protocol = resolve_protocol("gat", "Cora")
    name, kwargs = protocol.model_settings(1433, 7, "accuracy")
    good = {
        "task": "node",
        "dataset": "Cora",
        "protocol": "gat",
        "settings": protocol.settings(),
        "model_name": name,
        "model_kwargs": kwargs,
        "model": build_model(name, kwargs).state_dict(),
        "split": 0,
    }
    cases = [
        ({"split": -1}, "its 'split' entry is not a split number >= 0: -1"),
        ({"split": True}, "its 'split' entry is not a split number >= 0: True"),
        ({"split": 1}, "split 1 is out of range: Cora has 1 split(s), 0 to 0"),
        ({"settings": "fast"}, "its 'settings' entry is not a mapping (str)"),
        ({"settings": {**good["settings"], "lr": "fast"}}, "checkpoint settings: lr"),
        ({"model_kwargs": [1, 2]}, "its 'model_kwargs' entry is not a mapping (list)"),
        ({"model_kwargs": {**kwargs, "bogus": 1}}, "checkpoint model_kwargs: "),
    ]
    for i, (change, message) in enumerate(cases):
        path = tmp_path / f"bad{i}.pt"
        save_checkpoint(path, {**good, **change})
        code = cli_main(
            ["report", "--checkpoint", str(path), "--out", str(tmp_path / f"r{i}"), "--root", str(PLANETOID)]
        )
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and message in err, (change, err)
        assert not (tmp_path / f"r{i}" / "report.json").exists()
