"""graph_rma.tasks.agenda and the ``graph-rma agenda`` command: train, generate, evaluate, heads on the tiny fixture."""

import json
from pathlib import Path

import pytest
import torch

from graph_rma.cli import agenda as cli
from graph_rma.tasks import agenda as task
from graph_rma.tasks import graph_to_text_model as g2m

FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "agenda_tiny"
SMALL = dict(
    hidden=32,
    layers=1,
    heads=2,
    dropout=0.2,
    attention_dropout=0.1,
    decoder_heads=2,
    epochs=2,
    batch_size=2,
    optimizer="adam",
    lr=3e-3,
    momentum=0.9,
    clip=1.0,
    min_freq=1,
    max_target_len=None,
    beam=2,
    max_len=20,
    length_penalty=1.0,
)


@pytest.mark.slow
def test_cli_train_generate_evaluate(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--root", str(FIXTURE), "--out", str(out), "--quiet"]
    assert (
        cli.main(
            [
                "train",
                *args,
                "--hidden",
                "32",
                "--layers",
                "1",
                "--heads",
                "2",
                "--epochs",
                "1",
                "--batch-size",
                "3",
                "--min-freq",
                "1",
                "--variant",
                "svgd:alpha=0.1+dropattn:p=0.1",
            ]
        )
        == 0
    )
    assert (out / "best.pt").exists() and (out / "checkpoint.pt").exists()
    assert cli.main(["generate", *args, "--split", "test", "--beam", "2", "--max-len", "15"]) == 0
    hyp = (out / "hyp.test.txt").read_text().split("\n")[:-1]
    gold = (out / "gold.test.txt").read_text().split("\n")[:-1]
    assert len(hyp) == len(gold) == 2
    assert gold[1] == "we study summarization of news articles ."
    side = (out / "side_by_side.test.tsv").read_text().split("\n")
    assert side[0] == "title\thypothesis\treference" and side[1].split("\t")[1:] == [hyp[0], gold[0]]
    capsys.readouterr()
    assert cli.main(["evaluate", *args, "--split", "test", "--meteor", "none"]) == 0  # no JVM start in the tests
    result = json.loads(capsys.readouterr().out)
    assert result["records"] == 2 and 0.0 <= result["BLEU-4"] <= 100.0 and result["METEOR_impl"] is None
    # scoring the gold file against itself through the same call gives perfect scores
    perfect = task.score(gold, gold, [["deep networks", "accuracy"], ["summarization", "news articles"]], meteor="none")
    assert perfect["BLEU-4"] == pytest.approx(100.0) and perfect["ROUGE-L"] == pytest.approx(100.0)
    assert perfect["entity_coverage"] == pytest.approx(100.0)
    # printed rounded to 2 decimals (scores 0-100); the file keeps every digit
    assert round(json.loads((out / "metrics.test.json").read_text())["BLEU-1"], 2) == result["BLEU-1"]


def test_head_diversity_command(tmp_path, capsys):
    out = tmp_path / "run"
    task.train(dict(SMALL, epochs=1, heads=4), out, FIXTURE, variant="ma", progress=False)
    capsys.readouterr()
    assert cli.main(["heads", "--root", str(FIXTURE), "--out", str(out), "--split", "train"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["records"] == 6 and len(result["attention_cosine"]) == 1
    model, _, _ = g2m.load_model(out / "best.pt")
    layer = model.encoder.layers[0]
    lins = [layer.lin_query, layer.lin_key, layer.lin_value]
    w = torch.cat(
        [lin.weight.detach().view(4, -1) for lin in lins] + [lin.bias.detach().view(4, -1) for lin in lins], 1
    )
    w = torch.nn.functional.normalize(w, dim=1)  # head h = rows h*d:(h+1)*d of each projection
    expected = (w @ w.t())[torch.triu_indices(4, 4, 1).unbind()].mean()
    assert result["head_parameter_cosine"] == pytest.approx(float(expected), abs=1e-5)


def test_cli_train_again_with_other_settings_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    args = [
        "train",
        "--root",
        str(FIXTURE),
        "--out",
        str(out),
        "--quiet",
        "--hidden",
        "16",
        "--layers",
        "1",
        "--heads",
        "2",
        "--epochs",
        "1",
        "--batch-size",
        "3",
        "--min-freq",
        "1",
    ]
    assert cli.main(args) == 0
    capsys.readouterr()
    assert cli.main(args + ["--hidden", "64", "--lr", "0.01"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"graph-rma agenda: {out / 'checkpoint.pt'} was trained with other settings (hidden 16 -> 64, lr 0.002 -> 0.01)"
    )
    assert cli.main(args + ["--epochs", "2"]) == 0
    assert "epochs: 1 -> 2 (applied)" in capsys.readouterr().err
    assert json.loads((out / "train.json").read_text())["history"][-1]["epoch"] == 2


@pytest.mark.slow
def test_evaluate_reuses_decoded_outputs_only_for_the_same_checkpoint_and_settings(tmp_path, monkeypatch):
    """`agenda evaluate --limit N` decodes once; other settings (or another checkpoint) decode again."""
    from graph_rma.tasks import agenda as task

    pytest.importorskip("pycocoevalcap")
    splits = task.load_agenda(FIXTURE)
    config = {**task.PRESETS["cpu"], "epochs": 1, "hidden": 16, "layers": 1, "batch_size": 4, "beam": 1}
    out = tmp_path / "run"
    task.train(config, out, splits=splits, progress=False, device="cpu")
    calls = []
    real = task.generate
    monkeypatch.setattr(task, "generate", lambda *a, **k: (calls.append(k.get("limit")), real(*a, **k))[1])
    for limit in (2, 2, 3, 3):
        task.evaluate(out, "test", splits=splits, meteor="none", limit=limit, progress=False)
    assert calls == [2, 3]  # the second call of each limit reused the decoded file
    task.evaluate(out, "test", splits=splits, meteor="none", limit=3, beam=2, progress=False)
    assert calls == [2, 3, 3]  # another beam decodes again
    for _ in range(2):
        task.evaluate(out, "test", splits=splits, meteor="none", limit=3, beam=2, no_repeat_ngram=2, progress=False)
    assert calls == [2, 3, 3, 3]  # blocking repeated bigrams decodes again, once
    assert json.loads((out / "decode.test.json").read_text())["no_repeat_ngram"] == 2
    for line in (out / "hyp.test.delex.txt").read_text().split("\n")[:-1]:
        bigrams = list(zip(line.split(), line.split()[1:]))
        assert len(bigrams) == len(set(bigrams)), line
