"""Text loaders on the real files, the classifiers, and an end-to-end run of `graph-rma text` on a toy task."""
import json
import random

import pytest
import torch

from graph_rma.cli import text as cli
from graph_rma.data.root import DataNotFoundError
from graph_rma.data.text import (TREC_CLASSES, TextDataset, Vocabulary, load_mr, load_sst, load_text_dataset,
                                 load_trec, read_lines, tokenize)

from conftest import needs_text as real


@real
def test_trec_counts_labels_and_encoding():
    tr, te = load_trec("train", tokenize=False), load_trec("test")
    assert (len(tr), len(te)) == (5452, 500)
    assert tr.label_counts() == {0: 1162, 1: 1250, 2: 86, 3: 1223, 4: 835, 5: 896}
    assert te.label_counts() == {0: 138, 1: 94, 2: 9, 3: 65, 4: 81, 5: 113}
    assert tr.classes == TREC_CLASSES and tr.sentences[0] == "How did serfdom develop in and then leave Russia ?"
    assert sum("\u00f0" in s for s in tr.sentences) == 1  # the one non-ASCII byte 0xF0, decoded, not dropped
    assert te.tokens[0] == ["how", "far", "is", "it", "from", "denver", "to", "aspen", "?"]


@real
def test_mr_split_and_cp1252():
    full = load_mr("all", tokenize=False)
    assert len(full) == 10662 and full.label_counts() == {0: 5331, 1: 5331}
    # 0x85 is cp1252's ellipsis: 23 of them, none left as the U+0085 line-break character
    assert sum(s.count("\u2026") for s in full.sentences) == 23
    assert not any("\x85" in s for s in full.sentences)
    test, train = load_mr("test", fold=0, tokenize=False), load_mr("train", fold=0, tokenize=False)
    assert (len(test), len(train)) == (1067, 9595)
    assert test.sentences[0] == full.sentences[0] and test.sentences[1] == full.sentences[10]
    assert sorted(test.sentences + train.sentences) == sorted(full.sentences)  # a partition of the file
    assert len(load_mr("test", fold=9, tokenize=False)) == 1066
    with pytest.raises(ValueError, match="fold"):
        load_mr("test", fold=10)


@real
def test_sst_counts_and_errors(tmp_path):
    assert len(load_sst("train", tokenize=False)) == 6920
    assert load_sst("test", fine=True, tokenize=False).label_counts() == {0: 279, 1: 633, 2: 389, 3: 510, 4: 399}
    assert load_text_dataset("sst2", "dev", tokenize=False).num_classes == 2
    with pytest.raises(ValueError, match="split"):
        load_trec("dev")
    with pytest.raises(ValueError, match="name"):
        load_text_dataset("imdb", "train")
    with pytest.raises(DataNotFoundError, match="TREC"):
        load_trec("train", root=tmp_path)


def test_read_lines_split_on_newline_only(tmp_path):
    p = tmp_path / "mr.txt"
    p.write_bytes(b"0 a \x85 b\n1 caf\xe9\n")  # cp1252 bytes, not UTF-8
    assert read_lines(p) == ["0 a \u2026 b", "1 caf\u00e9"]
    assert tokenize("It's fine.") == ["it", "'s", "fine", "."]


def test_vocabulary_batch():
    v = Vocabulary.build([["a", "b", "a"], ["c"]])
    assert v.itos[:3] == ["<pad>", "<unk>", "a"] and len(v) == 5
    x = v.batch([["a", "zzz"], ["c"], []])
    assert x.tolist() == [[2, 1], [4, 0], [1, 0]]


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


@pytest.mark.parametrize("model,variant", [("transformer", "svgd:alpha=1"), ("selfattn", "reg:kind=frobenius,weight=0.1+dropattn:p=0.1,mode=column")])
def test_end_to_end_learns_separable_toy_task(model, variant):
    torch.set_num_threads(1)
    tr, te = _toy_ds(400, 0, "train"), _toy_ds(200, 1, "test")
    kw = dict(d_model=32, heads=4, num_layers=1, dim_feedforward=64) if model == "transformer" else \
        dict(embed_dim=16, hidden_channels=16, attention_channels=16, heads=4, mlp_channels=32)
    metrics, m, vocab = cli.train_one(model, variant, tr, te, seed=0, cfg=cli.Config(epochs=6, lr=3e-3), model_kwargs=kw)
    assert metrics["test_acc"] >= 0.95, metrics
    # the keyword gets the most attention from at least one head
    w = m.head_attention(vocab.batch([["w1", "w2", "excellent", "w3"]]))[0]
    assert int(w.max(dim=0).values.argmax()) == 2


def test_cli_writes_results_and_heatmaps(tmp_path):
    root = tmp_path / "text"
    (root / "TREC").mkdir(parents=True)
    for split, n, seed in (("train", 200, 0), ("test", 60, 1)):
        s, y = _toy(n, seed)
        (root / "TREC" / f"TREC.{split}.all").write_text("".join(f"{a} {b}\n" for a, b in zip(y, s)), encoding="latin-1")
    out = tmp_path / "out"
    rc = cli.main(["--root", str(root), "--datasets", "trec", "--models", "transformer,selfattn",
                   "--variants", "ma,svgd", "--seeds", "2", "--epochs", "1", "--out", str(out),
                   "--sentence", "w1 excellent w2"])
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
