"""graph_rma.tasks.webnlg and the ``graph-rma webnlg`` command: multi-reference scoring by subset, exact resume,
train / generate / evaluate on the tiny fixture."""

import hashlib
import json
from pathlib import Path

import pytest
import torch

from graph_rma.cli import webnlg as cli
from graph_rma.cli._generator import rounded
from graph_rma.data.webnlg import load_webnlg, load_webnlg_splits
from graph_rma.engine import load_checkpoint
from graph_rma.tasks import webnlg as task

FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "webnlg_tiny"
SMALL = dict(
    task.PRESETS["cpu"], hidden=16, layers=1, heads=2, decoder_heads=2, epochs=2, batch_size=3, min_freq=1, max_len=12
)


@pytest.fixture(scope="module")
def splits():
    return load_webnlg_splits(FIXTURE)


def test_multi_reference_scores_by_hand():
    refs = [
        {"references": ["the dog sat", "a cat ran"], "entities": ["cat"], "seen": True},
        {"references": ["x y z w", "p q r s"], "entities": ["p"], "seen": False},
    ]
    res = task.score(["the cat sat", "p q r s"], refs, meteor="none")
    # entry 1: every hypothesis unigram occurs in one of the references -> clipped unigram precision 3/3; entry 2
    # equals its second reference (4/4); both hypotheses as long as their closest reference: BLEU-1 = 100
    assert res["all"]["BLEU-1"] == pytest.approx(100.0, abs=1e-6)
    assert res["all"]["n"] == 2 and res["seen"]["n"] == 1 and res["unseen"]["n"] == 1
    # only the first references: unigram precision (2 + 0) / 7
    first = task.score(
        ["the cat sat", "p q r s"], [dict(r, references=r["references"][:1]) for r in refs], meteor="none"
    )
    assert first["all"]["BLEU-1"] == pytest.approx(100.0 * 2 / 7, abs=1e-4)
    # seen: "the cat sat" vs best reference "the dog sat": ROUGE-1 F = 2/3; unseen matches exactly
    assert res["seen"]["ROUGE-1"] == pytest.approx(200.0 / 3)
    assert res["unseen"]["BLEU-4"] == pytest.approx(100.0, abs=1e-4) and res["unseen"]["ROUGE-L"] == 100.0
    assert res["all"]["ROUGE-1"] == pytest.approx((200.0 / 3 + 100.0) / 2)
    assert res["unseen"]["entity_coverage"] == 100.0 and res["seen"]["entity_coverage"] == 100.0
    only_seen = task.score(["the cat sat"], refs[:1], meteor="none")
    assert only_seen["unseen"] is None and only_seen["seen"] == res["seen"] == only_seen["all"]
    with pytest.raises(ValueError, match="hypotheses"):
        task.score(["a"], refs, meteor="none")


def test_a_subset_holding_every_entry_is_scored_once_as_all(monkeypatch):
    """dev holds seen categories only: its ``seen`` subset is the corpus ``all`` is, so the challenge scorer (whose
    TER takes minutes on dev) runs once and both subsets get the same scores."""
    pytest.importorskip("sacrebleu")
    refs = [
        {"references": ["the dog sat", "a cat ran"], "entities": [], "seen": True},
        {"references": ["p q r s"], "entities": [], "seen": True},
    ]
    calls = []
    scorer = task.score_webnlg2017
    monkeypatch.setattr(task, "score_webnlg2017", lambda h, r, **kw: calls.append(len(h)) or scorer(h, r, **kw))
    res = task.score(["the cat sat", "p q r"], refs, meteor="none", scorer="webnlg2017")
    assert calls == [2] and res["unseen"] is None
    assert res["seen"] == res["all"] and res["seen"] is not res["all"]
    assert res["all"] == scorer(["the cat sat", "p q r"], [r["references"] for r in refs], meteor="none")
    calls.clear()
    task.score(["the cat sat", "p q r"], [refs[0], dict(refs[1], seen=False)], meteor="none", scorer="webnlg2017")
    assert calls == [2, 1, 1]  # all, seen, unseen: three corpora


@pytest.mark.slow
def test_resume_after_kill_is_identical(tmp_path, splits):
    variant = "svgd:alpha=0.1"
    full = task.train(dict(SMALL), tmp_path / "full", variant=variant, seed=1, progress=False, splits=splits)
    killed = task.train(
        dict(SMALL), tmp_path / "resumed", variant=variant, seed=1, stop_after=3, progress=False, splits=splits
    )
    assert killed == {"stopped": True, "step": 3}  # mid-way through epoch 2 (2 batches per epoch)
    resumed = task.train(dict(SMALL), tmp_path / "resumed", variant=variant, seed=1, progress=False, splits=splits)
    assert resumed["steps"] == full["steps"] == 4
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert [h["dev_loss"] for h in full["history"]] == [h["dev_loss"] for h in resumed["history"]]
    assert a["relations"] == ["<rel>"] and "<ent>" in a["vocab"]


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
                "--variant",
                "ma",
            ]
        )
        == 0
    )
    assert (out / "best.pt").exists() and (out / "checkpoint.pt").exists()
    assert json.loads((out / "config.json").read_text())["train_records"] == 6
    assert cli.main(["generate", *args, "--split", "test", "--beam", "2", "--max-len", "12"]) == 0
    hyp = (out / "hyp.test.txt").read_text().split("\n")[:-1]
    refs = json.loads((out / "refs.test.json").read_text())
    assert len(hyp) == len(refs) == 2 and [r["seen"] for r in refs] == [True, False]
    assert refs[1]["references"] == load_webnlg("test", FIXTURE)[1].references
    side = (out / "side_by_side.test.tsv").read_text().split("\n")
    assert side[0] == "eid\tcategory\tseen\thypothesis\treferences" and side[1].split("\t")[3] == hyp[0]
    capsys.readouterr()
    assert cli.main(["evaluate", *args, "--split", "test", "--meteor", "none"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["entries"] == 2 and [result[s]["n"] for s in ("all", "seen", "unseen")] == [2, 1, 1]
    saved = json.loads((out / "metrics.test.json").read_text())
    assert result == rounded(saved)  # printed rounded to 2 decimals (scores 0-100); the file keeps every digit
    # the written scores are those of the hypotheses against all references of their entries
    assert saved["all"] == task.score(hyp, refs, meteor="none")["all"]
    # dev: one hypothesis per entry (the fixture's dev entry is seen)
    capsys.readouterr()
    assert cli.main(["evaluate", *args, "--split", "dev", "--meteor", "none", "--beam", "1"]) == 0
    dev = json.loads(capsys.readouterr().out)
    assert dev["entries"] == 1 and dev["unseen"] is None
    # a decoding option that differs from the decoded file's decodes again (it used to score the old file)
    again = ["evaluate", *args, "--split", "test", "--meteor", "none", "--beam", "2", "--max-len", "12"]
    assert cli.main(again + ["--no-repeat-ngram", "2"]) == 0
    decoded = json.loads((out / "decode.test.json").read_text())
    assert (decoded["no_repeat_ngram"], decoded["beam"], decoded["max_len"]) == (2, 2, 12)
    for line in (out / "hyp.test.delex.txt").read_text().split("\n")[:-1]:
        bigrams = list(zip(line.split(), line.split()[1:]))
        assert len(bigrams) == len(set(bigrams)), line
    assert cli.main(again + ["--no-repeat-ngram", "2", "--coverage-reward", "50"]) == 0
    decoded = json.loads((out / "decode.test.json").read_text())
    assert (decoded["no_repeat_ngram"], decoded["coverage_reward"]) == (2, 50.0)
    refs = json.loads((out / "refs.test.json").read_text())
    for line, ref in zip((out / "hyp.test.txt").read_text().split("\n"), refs):  # a reward this large names them all
        assert all(entity.lower() in line for entity in ref["entities"]), (line, ref["entities"])
    stamp = (out / "hyp.test.txt").stat().st_mtime_ns
    assert cli.main(["evaluate", *args, "--split", "test", "--meteor", "none"]) == 0  # nothing given: scored as is
    assert cli.main(["evaluate", *args, "--split", "test", "--meteor", "none", "--beam", "2"]) == 0  # the same
    assert (out / "hyp.test.txt").stat().st_mtime_ns == stamp


def test_outputs_are_decoded_again_only_when_a_given_setting_or_the_weights_differ(tmp_path):
    from graph_rma.tasks.graph_to_text_model import stale_outputs

    (tmp_path / "best.pt").write_bytes(b"weights")
    (tmp_path / "hyp.test.txt").write_text("a b\n")
    assert stale_outputs(tmp_path, "test", {}) == "no readable decode.test.json"
    record = {"beam": 5, "max_len": 80, "length_penalty": 1.4, "entries": 2, "checkpoint": "run/best.pt"}
    (tmp_path / "decode.test.json").write_text(json.dumps(record))  # written before the record had a digest
    assert stale_outputs(tmp_path, "test", {}) == f"decoded from other weights than {tmp_path / 'best.pt'}"
    record["checkpoint_sha256"] = hashlib.sha256(b"weights").hexdigest()
    (tmp_path / "decode.test.json").write_text(json.dumps(record))
    assert stale_outputs(tmp_path, "test", {}) is None  # nothing given: the file as it is
    assert stale_outputs(tmp_path, "test", {"beam": 5, "length_penalty": 1.4, "no_repeat_ngram": 0}) is None
    assert stale_outputs(tmp_path, "test", {"beam": 2}) == "decoded with beam 5, asked for 2"
    assert stale_outputs(tmp_path, "test", {"no_repeat_ngram": 3}) == "decoded with no_repeat_ngram 0, asked for 3"
    assert stale_outputs(tmp_path, "test", {"coverage_reward": 0.0}) is None  # a record from before it: off
    assert (
        stale_outputs(tmp_path, "test", {"coverage_reward": 0.5}) == "decoded with coverage_reward 0.0, asked for 0.5"
    )
    assert stale_outputs(tmp_path, "test", {"limit": 1}) == "decoded with limit None, asked for 1"
    (tmp_path / "best.pt").write_bytes(b"trained further")  # e.g. more epochs: best.pt changed
    assert stale_outputs(tmp_path, "test", {}) == f"decoded from other weights than {tmp_path / 'best.pt'}"
    (tmp_path / "other.pt").write_bytes(b"weights")
    assert stale_outputs(tmp_path, "test", {"checkpoint": tmp_path / "other.pt"}) is None  # the same bytes
    assert stale_outputs(tmp_path, "dev", {}) == "no hyp.dev.txt"


def test_resume_with_other_settings_is_refused(tmp_path, splits):
    task.train(dict(SMALL, epochs=1), tmp_path / "run", variant="ma", seed=0, progress=False, splits=splits)
    with pytest.raises(ValueError, match=r"other settings \(heads 2 -> 4, min_freq 1 -> 2\); use the same"):
        # max_len, a decoding option, could change; heads and min_freq cannot
        task.train(
            dict(SMALL, epochs=1, heads=4, max_len=20, min_freq=2),
            tmp_path / "run",
            variant="ma",
            seed=0,
            progress=False,
            splits=splits,
        )


@pytest.mark.slow
def test_cli_evaluate_with_the_challenge_scorer(tmp_path, capsys):
    """``evaluate --scorer webnlg2017`` scores each subset as the challenge did, next to (not over) coco's scores."""
    pytest.importorskip("sacrebleu")
    from graph_rma.metrics import score_webnlg2017

    out = tmp_path / "run"
    args = ["--root", str(FIXTURE), "--out", str(out), "--quiet"]
    assert (
        cli.main(
            [
                "train",
                *args,
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
        )
        == 0
    )
    capsys.readouterr()
    assert (
        cli.main(["evaluate", *args, "--split", "test", "--meteor", "none", "--beam", "1", "--scorer", "webnlg2017"])
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    result = json.loads((out / "metrics.test.webnlg2017.json").read_text())
    assert printed["scorer"] == result["scorer"] == "webnlg2017" and printed.keys() == result.keys()
    assert not (out / "metrics.test.json").exists()
    hyp = (out / "hyp.test.txt").read_text().split("\n")[:-1]
    refs = json.loads((out / "refs.test.json").read_text())
    for subset, keep in (("all", [0, 1]), ("seen", [0]), ("unseen", [1])):
        want = score_webnlg2017([hyp[i] for i in keep], [refs[i]["references"] for i in keep], meteor="none")
        assert result[subset] == json.loads(json.dumps(want)) and result[subset]["n"] == len(keep)
    assert set(result["all"]) >= {"BLEU", "METEOR", "TER"} and "BLEU-4" not in result["all"]
    # the default scorer is unchanged and writes its own file
    assert cli.main(["evaluate", *args, "--split", "test", "--meteor", "none"]) == 0
    coco = json.loads(capsys.readouterr().out)
    assert coco["scorer"] == "coco" and "BLEU-4" in coco["all"] and (out / "metrics.test.json").exists()
    # a reference equal to the hypothesis: the challenge scorer gives 100 / 0 through the task's score as well
    perfect = task.score([r["references"][0] for r in refs], refs, meteor="none", scorer="webnlg2017")
    assert perfect["all"]["BLEU"] == pytest.approx(100.0) and perfect["all"]["TER"] == 0.0
    with pytest.raises(ValueError, match="^scorer: expected one of coco, webnlg2017"):
        task.score(hyp, refs, meteor="none", scorer="bleu")
    assert cli.main(["evaluate", *args, "--meteor", "nltk", "--scorer", "webnlg2017"]) == 2
    assert "webnlg2017 scorer uses METEOR 1.5 only" in capsys.readouterr().err


def test_the_challenge_preset_names_its_target_and_decays_on_dev(capsys):
    from graph_rma.tasks.graph_to_text import check_config

    preset = task.PRESETS["webnlg2017"]
    check_config(preset)
    assert preset["lr_schedule"]["kind"] == "plateau" and preset["beam"] > 1 and preset["length_penalty"] > 0
    assert "lr_schedule" not in task.PRESETS["cpu"] and "lr_schedule" not in task.PRESETS["full"]  # unchanged
    assert cli.main(["train", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "webnlg2017: hidden=256" in shown and "the BLEU table of Gardent et al., INLG 2017" in shown


@pytest.mark.slow
def test_the_webnlg_dev_scorer_is_the_challenges_bleu_of_the_dev_outputs(tmp_path, splits):
    """webnlg.dev_bleu decodes dev with the run's settings and scores it as ``evaluate --scorer webnlg2017`` does."""
    pytest.importorskip("sacrebleu")
    config = dict(SMALL, epochs=1, keep="dev_bleu")
    summary = task.train(config, tmp_path / "run", seed=0, progress=False, splits=splits)
    result = task.evaluate(tmp_path / "run", "dev", splits=splits, meteor="none", scorer="webnlg2017", progress=False)
    assert summary["history"][0]["dev_bleu"] == pytest.approx(result["all"]["BLEU"])


def test_an_interrupted_evaluation_writes_nothing_and_exits_130_in_one_line(tmp_path, capsys, monkeypatch):
    """Ctrl-C during `webnlg evaluate` left a full hyp.test.txt of a decode whose metrics were never written, and a
    KeyboardInterrupt traceback: the decode and its metrics are written together at the end, or not at all."""
    from conftest import snapshot

    out = tmp_path / "run"
    task.train(dict(SMALL, epochs=1), out, variant="ma", seed=0, progress=False, root=FIXTURE)
    capsys.readouterr()
    args = ["--root", str(FIXTURE), "--out", str(out), "--quiet", "--meteor", "none"]
    real_score = task.score

    def ctrl_c(*a, **k):  # the user presses Ctrl-C while the decode is scored
        raise KeyboardInterrupt

    monkeypatch.setattr(task, "score", ctrl_c)
    before = snapshot(out)
    assert cli.main(["evaluate", *args]) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("graph-rma webnlg: interrupted: ") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert snapshot(out) == before and not (out / "hyp.test.txt").exists()  # no decode without its metrics
    monkeypatch.setattr(task, "score", real_score)
    assert cli.main(["evaluate", *args]) == 0
    capsys.readouterr()
    done = snapshot(out)
    assert (out / "hyp.test.txt").is_file() and (out / "metrics.test.json").is_file()
    monkeypatch.setattr(task, "score", ctrl_c)  # interrupted again, re-decoding: the finished outputs stay as they were
    assert cli.main(["evaluate", *args, "--regenerate"]) == 130 and snapshot(out) == done
    monkeypatch.setattr(task, "_decode", ctrl_c)  # Ctrl-C while decoding, for generate too
    assert cli.main(["generate", *args[:-2], "--beam", "1"]) == 130 and snapshot(out) == done
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


def test_a_references_file_with_a_bad_entry_is_one_line(tmp_path, capsys):
    """A refs.test.json entry without `seen` (edited by hand, or from another tool) was a KeyError traceback."""
    out = tmp_path / "run"
    task.train(dict(SMALL, epochs=1), out, variant="ma", seed=0, progress=False, root=FIXTURE)
    args = ["--root", str(FIXTURE), "--out", str(out), "--quiet", "--meteor", "none"]
    assert cli.main(["evaluate", *args]) == 0
    good = json.loads((out / "refs.test.json").read_text())
    for change, message in (
        (lambda r: r[1].pop("seen"), "refs: entry 1 (eid "),
        (lambda r: r[0].update(seen="yes"), "refs: entry 0's 'seen' is not true or false: 'yes'"),
        (lambda r: r[0].update(references="a dog"), "refs: entry 0's 'references' is not a list of texts"),
        (lambda r: r.pop(), "hypotheses: expected 1 (one per entry), got 2"),
    ):
        refs = json.loads(json.dumps(good))
        change(refs)
        (out / "refs.test.json").write_text(json.dumps(refs))
        capsys.readouterr()
        for scorer in ("coco", "webnlg2017"):
            assert cli.main(["evaluate", *args, "--scorer", scorer]) == 2
            err = capsys.readouterr().err.strip()
            assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    (out / "refs.test.json").write_text("{not json")
    assert cli.main(["evaluate", *args]) == 2
    assert "refs.test.json: not a references file" in capsys.readouterr().err
