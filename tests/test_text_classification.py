"""Text classification (graph_rma.tasks.text_classification) and `graph-rma text` on a separable toy task."""

import json
import random
import sys

import pytest
import torch

from graph_rma import DropAttention
from graph_rma.cli import text as cli
from graph_rma.data.text import TextDataset
from graph_rma.tasks import text_classification as tc


def _toy(n, seed, noise=30):
    """Separable: label 1 iff the sentence contains 'excellent' (else 'awful'), among random filler words."""
    rng = random.Random(seed)
    filler = [f"w{i}" for i in range(noise)]
    sents, labels = [], []
    for i in range(n):
        y = i % 2
        words = rng.choices(filler, k=rng.randint(3, 8))
        words.insert(rng.randrange(len(words) + 1), "excellent" if y else "awful")
        sents.append(" ".join(words))
        labels.append(y)
    return sents, labels


def _toy_ds(n, seed, split):
    s, y = _toy(n, seed)
    return TextDataset("toy", split, s, y, ("neg", "pos"), [t.split() for t in s])


@pytest.mark.slow
@pytest.mark.parametrize(
    "model,variant",
    [("transformer", "svgd:alpha=1"), ("selfattn", "reg:kind=frobenius,weight=0.1+dropattn:p=0.1,mode=column")],
)
def test_end_to_end_learns_separable_toy_task(model, variant):
    torch.set_num_threads(1)
    tr, te = _toy_ds(400, 0, "train"), _toy_ds(200, 1, "test")
    kw = (
        dict(d_model=32, heads=4, num_layers=1, dim_feedforward=64)
        if model == "transformer"
        else dict(embed_dim=16, hidden_channels=16, attention_channels=16, heads=4, mlp_channels=32)
    )
    metrics, m, vocab = tc.train_one(model, variant, tr, te, seed=0, cfg=tc.Config(epochs=6, lr=3e-3), model_kwargs=kw)
    assert metrics["test_acc"] >= 0.95, metrics
    # the keyword gets the most attention from at least one head
    w = m.head_attention(vocab.batch([["w1", "w2", "excellent", "w3"]]))[0]
    assert int(w.max(dim=0).values.argmax()) == 2


@pytest.mark.slow
def test_cli_writes_results_and_heatmaps(tmp_path):
    root = tmp_path / "text"
    (root / "TREC").mkdir(parents=True)
    for split, n, seed in (("train", 200, 0), ("test", 60, 1)):
        s, y = _toy(n, seed)
        (root / "TREC" / f"TREC.{split}.all").write_text(
            "".join(f"{a} {b}\n" for a, b in zip(y, s)), encoding="latin-1"
        )
    out = tmp_path / "out"
    rc = cli.main(
        [
            "--root",
            str(root),
            "--datasets",
            "trec",
            "--models",
            "transformer",
            "selfattn",
            "--variants",
            "ma",
            "svgd",
            "--seeds",
            "0",
            "1",
            "--epochs",
            "1",
            "--out",
            str(out),
            "--sentence",
            "w1 excellent w2",
        ]
    )
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert len(res["runs"]) == 8 and len(res["summary"]) == 4
    assert {r["variant"] for r in res["summary"]} == {"ma", "svgd"}
    assert all(0.0 <= r["head_cos"] <= 1.0 for r in res["runs"])
    for f in ("runs.csv", "summary.csv", "accuracy.png", "heads_trec_transformer.png", "heads_trec_selfattn.html"):
        assert (out / f).stat().st_size > 0
    page = (out / "heads_trec_selfattn.html").read_text()
    assert "excellent" in page and "<script" not in page and "http" not in page  # self-contained
    assert cli.main(["--root", str(root), "--variants", "nope:x=1", "--out", str(out)]) == 2
    assert cli.main(["--root", str(root), "--models", "lstm", "--out", str(out)]) == 2
    assert cli.main(["--root", str(tmp_path / "none"), "--models", "selfattn", "--out", str(out)]) == 1


def test_train_one_installs_one_drop_attention_per_layer_through_apply_variant():
    torch.set_num_threads(1)
    tr, te = _toy_ds(120, 0, "train"), _toy_ds(40, 1, "test")
    kw = dict(d_model=16, heads=2, num_layers=2, dim_feedforward=32)
    _, model, _ = tc.train_one("transformer", "dropattn-c", tr, te, seed=0, cfg=tc.Config(epochs=1), model_kwargs=kw)
    drops = [layer.drop_attention for layer in model.attention_layers]
    assert len(drops) == 2 and drops[0] is not drops[1]  # one module per layer, not one shared
    assert all(isinstance(d, DropAttention) and (d.p, d.mode) == (0.1, "column") for d in drops)
    _, plain, _ = tc.train_one("transformer", "ma", tr, te, seed=0, cfg=tc.Config(epochs=1), model_kwargs=kw)
    assert all(layer.drop_attention is None for layer in plain.attention_layers)


def test_penalty_changes_training_only_for_reg_variants():
    """The penalty goes through setup.penalty: weight 0 trains exactly like ma, a positive weight does not."""
    torch.set_num_threads(1)
    tr, te = _toy_ds(120, 0, "train"), _toy_ds(40, 1, "test")
    kw = dict(embed_dim=8, hidden_channels=8, attention_channels=8, heads=3, mlp_channels=8)

    def params(variant):
        _, m, _ = tc.train_one("selfattn", variant, tr, te, seed=0, cfg=tc.Config(epochs=1), model_kwargs=kw)
        return torch.cat([p.detach().flatten() for p in m.parameters()])

    ma = params("ma")
    assert torch.equal(params("reg:kind=frobenius,weight=0"), ma)
    assert not torch.allclose(params("reg:kind=frobenius,weight=1"), ma)


@pytest.mark.slow
def test_run_benchmark_from_python(tmp_path):
    """The task without argparse: seeds as a list, per-model kwargs, results returned and written."""
    root = tmp_path / "text"
    (root / "TREC").mkdir(parents=True)
    for split, n, seed in (("train", 120, 0), ("test", 40, 1)):
        s, y = _toy(n, seed)
        (root / "TREC" / f"TREC.{split}.all").write_text(
            "".join(f"{a} {b}\n" for a, b in zip(y, s)), encoding="latin-1"
        )
    lines = []
    result = tc.run_benchmark(
        ["trec"],
        ["selfattn"],
        ["ma", "reg"],
        seeds=[3],
        out=tmp_path / "out",
        epochs=1,
        root=str(root),
        sentence="w1 awful",
        log=lines.append,
        model_kwargs={"selfattn": dict(embed_dim=8, hidden_channels=8, attention_channels=8, heads=2, mlp_channels=8)},
    )
    assert [(r["variant"], r["seed"], r["spec"]) for r in result["runs"]] == [
        ("ma", 3, "ma"),
        ("reg", 3, "reg:kind=frobenius,weight=0.1"),
    ]
    assert len(lines) == 2 and [r["seeds"] for r in result["summary"]] == [1, 1]
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["runs"] == result["runs"] and "command" not in saved
    assert {p.name for p in result["files"]} >= {"results.json", "heads_trec_selfattn.png", "accuracy.png"}
    with pytest.raises(ValueError, match="models: unknown model 'lstm'"):
        tc.run_benchmark(["trec"], ["lstm"], ["ma"], 1, tmp_path / "bad", root=str(root))
    with pytest.raises(ValueError, match="seeds"):
        tc.run_benchmark(["trec"], ["selfattn"], ["ma"], [], tmp_path / "bad", root=str(root))


def test_cli_without_matplotlib_finishes_and_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    root = tmp_path / "text"
    (root / "TREC").mkdir(parents=True)
    for split, n, seed in (("train", 100, 0), ("test", 30, 1)):
        s, y = _toy(n, seed)
        (root / "TREC" / f"TREC.{split}.all").write_text(
            "".join(f"{a} {b}\n" for a, b in zip(y, s)), encoding="latin-1"
        )
    for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if the plots extra were not installed
    out = tmp_path / "out"
    assert (
        cli.main(
            [
                "--root",
                str(root),
                "--models",
                "selfattn",
                "--variants",
                "ma",
                "--seeds",
                "0",
                "--epochs",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    skipped = [line for line in lines if "skipped" in line]
    assert skipped == ["pictures skipped (matplotlib not installed): pip install 'graph-rma[plots]'"]
    assert (out / "results.json").is_file() and (out / "heads_trec_selfattn.html").is_file()
    assert not list(out.glob("*.png"))
    assert "accuracy.png" not in lines[-1] and "results.json" in lines[-1]


@pytest.mark.slow
def test_cli_heads_sets_every_models_number_of_heads(tmp_path, monkeypatch):
    root = tmp_path / "text"
    (root / "TREC").mkdir(parents=True)
    for split, n, seed in (("train", 40, 0), ("test", 20, 1)):
        s, y = _toy(n, seed)
        (root / "TREC" / f"TREC.{split}.all").write_text(
            "".join(f"{a} {b}\n" for a, b in zip(y, s)), encoding="latin-1"
        )
    seen = {}
    real = tc.train_one

    def spy(model_name, *args, **kwargs):
        metrics, model, vocab = real(model_name, *args, **kwargs)
        heads = [m.num_heads for m in model.modules() if hasattr(m, "num_heads")]  # transformer layers
        seen[model_name] = heads or [model.encoder.heads]
        return metrics, model, vocab

    monkeypatch.setattr(tc, "train_one", spy)
    rc = cli.main(
        [
            "--root",
            str(root),
            "--datasets",
            "trec",
            "--models",
            "transformer",
            "selfattn",
            "--variants",
            "ma",
            "--seeds",
            "0",
            "--epochs",
            "1",
            "--heads",
            "8",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 0
    assert seen == {"transformer": [8, 8], "selfattn": [8]}


def test_transformer_heads_that_do_not_divide_the_width_are_one_line():
    from graph_rma.models import TransformerClassifier

    with pytest.raises(ValueError, match=r"heads: the Transformer's width 64 must split evenly .* got 3"):
        TransformerClassifier(100, 5, heads=3)
