"""studies.webnlg2017_evidence: the rules of the repulsion-vs-plain study on WebNLG 2017 (selection by dev loss,
fresh finals, one decoding chosen on the baseline run's dev from the baseline's grid plus n-gram blocking),
the paired report on hand-checked numbers, and the whole study on the tiny WebNLG fixture."""

import json
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO

from studies import webnlg2017 as base
from studies import webnlg2017_evidence as ev

FIXTURE = FIXTURES / "webnlg_tiny"


def _run(folder: Path, losses, epochs=None, best=b"weights") -> Path:
    """A finished (or, with ``epochs`` above ``len(losses)``, unfinished) run folder with these dev losses."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"config": {"epochs": epochs or len(losses)}, "variant": "ma"}))
    history = [{"epoch": e + 1, "dev_loss": x, "seconds": 10.0 * (e + 1)} for e, x in enumerate(losses)]
    (folder / "train.json").write_text(json.dumps({"history": history}))
    (folder / "best.pt").write_bytes(best)
    return folder


@pytest.fixture
def rounds(monkeypatch):
    """The plain rounds' committed decoding choices as a test sets them (``rounds["v4-s0"] = {...}``); by default
    ``v3-s0``'s recipe is the stronger one on dev."""
    choices = {"v3-s0": {"setting": "beam5-lp1.8-nr3", "dev_BLEU": 57.0}, "v4-s0": {"dev_BLEU": 56.0}}
    monkeypatch.setattr(ev, "_round_choice", lambda name: choices.get(name))
    return choices


def test_the_arms_have_an_equal_budget_and_the_seeds_are_disjoint():
    assert len({len(settings) for settings in ev.ARMS.values()}) == 1
    assert ev.SELECT_SEED not in ev.FINAL_SEEDS and len(ev.FINAL_SEEDS) >= 3
    assert ev.label("ma", {"dropout": 0.4}) == "ma [dropout=0.4]" and ev.label("svgd:alpha=0.1", {}) == "svgd:alpha=0.1"


def test_the_train_command_is_the_presets_with_the_settings_options():
    cmd = ev.train_command("ma", {"dropout": 0.4}, 100, 10, Path("runs/x"), root="/data")
    assert cmd[1:5] == ["-m", "graph_rma.cli", "webnlg", "train"]
    text = " ".join(cmd[5:])
    assert (
        text == "--preset webnlg2017 --variant ma --seed 100 --epochs 10 --out runs/x --save-every 100 "
        "--dropout 0.4 --root /data"
    )
    from graph_rma.cli import webnlg as cli  # the options exist: the CLI parses them

    args = cli._parser().parse_args(cmd[4:])
    assert (args.dropout, args.epochs, args.seed, args.preset) == (0.4, 10, 100, "webnlg2017")


def test_choose_takes_the_lowest_dev_loss_per_arm_and_the_earlier_on_a_tie(tmp_path):
    out = tmp_path / "out"
    _run(ev.select_dir(out, "plain", 0), [2.0, 1.50, 1.6])
    _run(ev.select_dir(out, "plain", 1), [2.0, 1.55, 1.50])  # the same lowest loss, later setting: loses the tie
    _run(ev.select_dir(out, "svgd", 0), [2.0, 1.7])
    with pytest.raises(SystemExit, match=r"selection runs not finished: svgd 1 \(python -m"):
        ev.choose(out)
    _run(ev.select_dir(out, "svgd", 1), [1.9, 1.65, 1.66], epochs=4)
    with pytest.raises(SystemExit, match="not finished: svgd 1"):  # 3 of 4 epochs: unfinished
        ev.choose(out)
    (ev.select_dir(out, "svgd", 1) / "config.json").write_text(json.dumps({"config": {"epochs": 3}}))
    choice = ev.choose(out)
    assert (choice["plain"]["index"], choice["plain"]["epoch"], choice["plain"]["dev_loss"]) == (0, 2, 1.5)
    assert (choice["svgd"]["index"], choice["svgd"]["setting"], choice["svgd"]["epoch"]) == (1, "svgd:alpha=0.01", 2)
    assert json.loads((out / "choice.json").read_text()) == choice
    assert (
        ev.pick([1.0, 0.5, 0.5]) == 1
        and ev.lowest([{"epoch": 1, "dev_loss": 1}, {"epoch": 2, "dev_loss": 1}])["epoch"] == 1
    )


def test_every_final_is_a_fresh_run_and_the_decoding_grid_extends_the_baselines(tmp_path, rounds):
    out = tmp_path / "out"
    assert ev.final_dir(out, "plain", 0) == out / "final" / "plain-s0"  # not the baseline run (its test was decoded)
    assert ev.final_results(tmp_path / "ev", "svgd", 2) == tmp_path / "ev" / "svgd-s2"
    assert ev.DECODE_GRID[: len(base.GRID)] == base.GRID
    names = [base.setting_name(g) for g in ev.DECODE_GRID[len(base.GRID) :]]
    assert names == [f"beam5-lp{lp}-nr{n}" for n in (3, 4) for lp in ("1.0", "1.4", "1.8")]
    out.mkdir()
    none = tmp_path / "nothing committed"
    (out / "choice.json").write_text(json.dumps({"plain": {"index": 0}, "svgd": {"index": 0}}))
    with pytest.raises(SystemExit, match="the final seeds are 0, 1, 2, not 7"):
        ev.final(out, "svgd", 7, results=none)
    with pytest.raises(SystemExit, match="decoding.json: the decoding is not chosen yet"):
        ev.final(out, "svgd", 0, results=none)  # a final keeps best.pt by dev BLEU under the study's decoding
    (out / "decoding.json").write_text(json.dumps({"setting": "beam5-lp1.4", "beam": 5, "length_penalty": 1.4}))
    assert ev.keeping(out, none) == {"keep": "dev_bleu", "beam": 5, "length_penalty": 1.4}


def test_the_decoding_is_chosen_on_the_baselines_dev_from_the_whole_grid(tmp_path, monkeypatch):
    run, out = _run(tmp_path / "ma-s0", [1.5, 1.4]), tmp_path / "out"
    monkeypatch.setattr(base, "_checkpoint", lambda best: {"path": str(best), "sha256": base._sha256(best)})
    decoded = []

    def fake_decode(folder, split, setting, best, args):  # dev BLEU: 50 + the length penalty (+ n below 1.5)
        decoded.append(base.setting_name(setting))
        folder.mkdir(parents=True, exist_ok=True)
        bleu = 50 + setting["length_penalty"] + setting.get("no_repeat_ngram", 0) * (setting["length_penalty"] < 1.5)
        (folder / "decoded.dev.json").write_text(json.dumps({"checkpoint": args["checkpoint"]()}))
        (folder / f"metrics.dev.{base.SCORER}.json").write_text(json.dumps({"all": {"BLEU": bleu}}))

    monkeypatch.setattr(base, "_decode", fake_decode)
    choice = ev.decoding(out, run, progress=False)
    assert decoded == [base.setting_name(g) for g in ev.DECODE_GRID]
    # 50 + 1.4 + 4 = 55.4 (nr4 at 1.4) beats 50 + 1.0 + 4, 50 + 1.8 (no bonus) and 50 + 1.4 + 3
    assert (choice["setting"], choice["no_repeat_ngram"], round(choice["dev_BLEU"], 6)) == ("beam5-lp1.4-nr4", 4, 55.4)
    assert json.loads((out / "decoding.json").read_text()) == choice
    assert not (run / "decode" / "choice.json").exists()  # the baseline's own choice is untouched
    kept = ev._decoding(choice, run)
    assert kept["setting"] == "beam5-lp1.4-nr4" and len(kept["grid"]) == len(ev.DECODE_GRID)
    assert kept["grid"][0] == {"setting": "beam5-lp0.6", "BLEU": 50.6} and kept["grid"][-1]["BLEU"] == 51.8
    ev.decoding(out, run, progress=False)  # everything scored: nothing decoded again
    assert len(decoded) == len(ev.DECODE_GRID)


def test_a_final_is_decoded_with_the_studys_setting_only(tmp_path, monkeypatch, rounds):
    out = tmp_path / "out"
    svgd = _run(out / "final" / "svgd-s1", [1.6, 1.5], best=b"svgd weights")
    calls = []
    monkeypatch.setattr(base, "decode_test", lambda run, results, **kw: calls.append((run, results)) or {"ok": 1})
    monkeypatch.setattr(base, "_checkpoint", lambda best: {"path": str(best), "sha256": "abc", "epoch": 2})
    with pytest.raises(SystemExit, match="the decoding is not chosen yet"):
        ev.decode_final(out, "svgd", 1, tmp_path / "ev")  # nothing committed under tmp_path / "ev" either
    choice = {"setting": "beam5-lp1.4-nr3", "beam": 5, "length_penalty": 1.4, "no_repeat_ngram": 3, "dev_BLEU": 60.0}
    (out / "decoding.json").write_text(json.dumps(choice))
    assert ev.decode_final(out, "svgd", 1, tmp_path / "ev") == {"ok": 1}
    assert calls == [(svgd, tmp_path / "ev" / "svgd-s1")]
    record = json.loads((svgd / "decode" / "choice.json").read_text())
    got = [record[k] for k in ("setting", "beam", "length_penalty", "no_repeat_ngram", "dev_BLEU")]
    assert got == ["beam5-lp1.4-nr3", 5, 1.4, 3, None]
    assert record["checkpoint"]["path"] == str(svgd / "best.pt")
    # the study's setting changed after this run's choice was written: refused, nothing decoded
    (out / "decoding.json").write_text(json.dumps(dict(choice, setting="beam10-lp1.0")))
    with pytest.raises(SystemExit, match="beam5-lp1.4-nr3, not the study's beam10-lp1.0"):
        ev.decode_final(out, "svgd", 1, tmp_path / "ev")
    assert len(calls) == 1
    # a decoding with a coverage reward: the run's choice names it and holds it (it once held only the name)
    plain = _run(out / "final" / "plain-s1", [1.6, 1.5], best=b"plain weights")
    (out / "decoding.json").write_text(json.dumps(dict(choice, setting="beam5-lp1.4-nr3-cr1", coverage_reward=1.0)))
    ev.decode_final(out, "plain", 1, tmp_path / "ev")
    record = json.loads((plain / "decode" / "choice.json").read_text())
    assert (record["setting"], record["no_repeat_ngram"], record["coverage_reward"]) == ("beam5-lp1.4-nr3-cr1", 3, 1.0)
    assert base.setting_name(record) == record["setting"]


def _final(arm, seed, bleu_all, bleu_seen=50.0, ter=40.0):
    s = {"BLEU": bleu_all, "METEOR": 38.0, "TER": ter, "n": 1862}
    return {"arm": arm, "seed": seed, "scores": {"all": s, "seen": dict(s, BLEU=bleu_seen), "unseen": dict(s)}}


def test_the_report_pairs_by_seed_hand_checked():
    data = ev.not_run()
    data["choice"] = {"plain": {"index": 0, "setting": "ma"}, "svgd": {"index": 1, "setting": "svgd:alpha=0.01"}}
    data["finals"] = [_final("plain", s, b) for s, b in ((0, 50.0), (1, 52.0), (2, 54.0))]
    data["finals"] += [_final("svgd", s, b, ter=41.0) for s, b in ((0, 49.0), (1, 53.0))]
    text = ev.render_evidence(data)
    assert (
        "| plain | `ma` | 3 of 3 | 50.00 ± 0.00 | 52.00 ± 2.00 | 52.00 ± 2.00 | 38.00 ± 0.00 | 40.00 ± 0.00 |" in text
    )
    assert "| svgd | `svgd:alpha=0.01` | 2 of 3 |" in text
    # the plain arm over its 3 seeds (seen BLEU 50 each) against GCN_EC's 55.9, itself a mean of 3 seeds
    assert "55.9 (a mean over 3 seeds): 50.00 ± 0.00 over its 3 seeds, **not met** (-5.90)." in text
    # seeds 0 and 1 paired: differences -1 and +1 -> mean 0, sd sqrt(2), se 1
    assert "| all | +0.00 ± 1.00 | 1/0/1 | +0.00 ± 0.00 | +1.00 ± 0.00 |" in text
    assert "Not decided: 2 of 3 seeds paired" in text
    data["finals"].append(_final("svgd", 2, 53.0))
    text = ev.render_evidence(data)
    # differences -1, +1, -1: mean -1/3, sd sqrt(4/3), se 2/3
    assert "| all | -0.33 ± 0.67 | 1/0/2 |" in text
    assert "| seen | +0.00 ± 0.00 | 0/3/0 |" in text
    # the verdict per subset: |-1/3| < 2 * 2/3 is noise; seen differs by exactly 0 on every seed (no spread)
    assert (
        "SVGD minus plain BLEU over 3 paired seeds (a difference within 2 standard errors is noise): seen +0.00 ± "
        "0.00 (0/3/0), within noise; unseen -0.33 ± 0.67 (1/0/2), within noise; all -0.33 ± 0.67 (1/0/2), within "
        "noise." in text
    )


def test_the_summary_states_the_plain_generator_against_the_line_and_the_repulsion_verdict():
    data = ev.not_run()
    assert "has no final run scored yet" in ev.render_summary(data)
    data["choice"] = {"plain": {"index": 0, "setting": "ma"}, "svgd": {"index": 1, "setting": "svgd:alpha=0.01"}}
    data["finals"] = [_final("plain", s, b, bleu_seen=b + 6.0) for s, b in ((0, 50.0), (1, 52.0))]
    text = ev.render_summary(data)  # seen 56 and 58: the mean 57 is above 55.9, but only 2 of 3 seeds are in
    assert "BLEU seen / unseen / all 57.00 ± 1.41 / 51.00 ± 1.41 / 51.00 ± 1.41 over 2 seeds" in text
    assert "55.9, not decided, 2 of 3 seeds scored." in text and "not decided yet, 0 of 3 seeds paired." in text
    data["finals"].append(_final("plain", 2, 54.0, bleu_seen=60.0))
    # svgd lower by 3, 2 and 4 on seen (mean -3, sd 1, se 1/sqrt(3) = 0.577: beyond 2 SE, a loss); by 1, 0, 0 on
    # all and unseen (mean -1/3, sd 1/sqrt(3), se 1/3: within 2 SE, noise)
    # and TER higher by 1, 2 and 3 on every subset (mean 2, se 0.577: worse beyond noise; METEOR equal: not named)
    finals = ((0, 49.0, 53.0, 41.0), (1, 52.0, 56.0, 42.0), (2, 54.0, 56.0, 43.0))
    data["finals"] += [_final("svgd", s, b, bleu_seen=seen, ter=ter) for s, b, seen, ter in finals]
    text = ev.render_summary(data)
    assert "58.00 ± 2.00" in text and "against GCN_EC's published seen BLEU 55.9, **met** (+2.10)." in text
    assert "(`svgd:alpha=0.01`, each arm's setting chosen on dev from 2): SVGD minus plain BLEU over 3 paired" in text
    assert "seen -3.00 ± 0.58 (0/0/3), a loss;" in text and "all -0.33 ± 0.33 (0/2/1), within noise." in text
    assert text.count("worse with SVGD") == 3 and "METEOR" not in text
    assert "Beyond noise in the other metrics: TER seen +2.00 ± 0.58 (worse with SVGD), TER unseen" in text
    assert ev.SUMMARY in ev.BLOCKS and ev.render_summary(data) in ev.render(
        REPO.joinpath("docs/webnlg.md").read_text(), data
    )


def test_before_any_run_the_block_says_so_and_plan_starts_with_selection(tmp_path):
    text = ev.render_evidence(ev.not_run())
    assert text.count("not run yet") == 4 and text.count("not chosen yet") == 4 and "Not decided: 0 of 3" in text
    assert "(`v3-s0` not chosen yet, `v4-s0` not chosen yet): not decided; no final trains until it is." in text
    assert "The plain arm against" not in text  # nothing chosen yet
    assert "Not chosen yet (the grid: `beam5-lp0.6`," in text
    me = "OMP_NUM_THREADS=1 python -m studies.webnlg2017_evidence"
    selection = [f"{me} select {a} {i}" for a in ("plain", "svgd") for i in (0, 1)]
    none = tmp_path / "nothing committed"
    assert ev.plan(tmp_path / "out", none) == [f"{me} decoding", *selection]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "decoding.json").write_text("{}")  # empty: not a decoding (study_decoding refuses it)
    assert ev.plan(tmp_path / "out", none) == [f"{me} decoding", *selection]
    (tmp_path / "out" / "decoding.json").write_text(json.dumps({"setting": "beam5-lp1.0", "beam": 5}))
    assert ev.plan(tmp_path / "out", none) == selection
    # a finished selection run gives the time per epoch (the median of its epochs, a partial one left out); a run
    # stopped part-way says how far it is
    from graph_rma.engine import save_checkpoint

    done = ev.select_dir(tmp_path / "out", "plain", 0)
    done.mkdir(parents=True)
    (done / "config.json").write_text(json.dumps({"config": {"epochs": 3}}))
    history = [{"seconds": 700.0}, {"seconds": 5.0, "seconds_partial": True}, {"seconds": 740.0}]
    (done / "train.json").write_text(json.dumps({"history": history}))
    save_checkpoint(ev.select_dir(tmp_path / "out", "svgd", 1) / "checkpoint.pt", {"epoch": 4})
    assert ev.plan(tmp_path / "out", none) == [
        f"{me} select plain 1  # about 2.0 h left at 720 s per epoch",  # 10 epochs x 720 s
        f"{me} select svgd 0  # about 2.0 h left at 720 s per epoch",
        f"{me} select svgd 1  # 4 of 10 epochs trained; about 1.2 h left at 720 s per epoch",
    ]
    # a final decodes dev after every epoch (it keeps best.pt by dev BLEU): its estimate says that comes on top
    final = ev._left(0, ev.FINAL_EPOCHS, 720.0, decodes=True)
    assert final == "  # about 4.0 h left at 720 s per epoch, plus a dev decode per epoch"
    # once a final has decoded dev, the median decode time joins the estimate: 20 x (720 + 180) s
    assert ev._decode_seconds([ev._progress(ev.final_dir(tmp_path / "out", "svgd", 2))[1]]) is None
    running = ev.final_dir(tmp_path / "out", "svgd", 2)
    history = [{"epoch": 1, "dev_bleu_seconds": 60.0}, {"epoch": 2, "dev_bleu_seconds": 200.0}]
    save_checkpoint(running / "checkpoint.pt", {"epoch": 2, "history": history})
    assert ev._progress(running) == (2, history)  # one read of the checkpoint: how far, and the epochs so far
    assert ev._decode_seconds([history, [{"epoch": 1, "dev_bleu_seconds": 180.0}]]) == 180.0  # median over finals
    final = ev._left(0, ev.FINAL_EPOCHS, 720.0, decodes=True, decode=180.0)
    assert final == "  # about 5.0 h left at 720 s per epoch and 180 s per dev decode"
    # a running final: 18 epochs left, 18 x (720 + 180) s
    assert ev._left(2, ev.FINAL_EPOCHS, 720.0, decodes=True, decode=180.0) == (
        "  # 2 of 20 epochs trained; about 4.5 h left at 720 s per epoch and 180 s per dev decode"
    )
    committed = json.loads((REPO / "docs" / "webnlg2017" / "evidence" / "results.json").read_text())
    assert (
        ev.render(ev.PAGE.read_text() if ev.PAGE.is_absolute() else (REPO / ev.PAGE).read_text(), committed)
        == (REPO / ev.PAGE).read_text()
    )


@pytest.mark.slow
def test_the_study_end_to_end_on_the_fixture(tmp_path, monkeypatch, rounds):
    """select -> choose -> final -> test -> report with tiny settings (children of the real CLI) into tmp paths."""
    pytest.importorskip("sacrebleu")
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    tiny = dict(hidden=16, layers=1, heads=2, decoder_heads=2, batch_size=3, min_freq=1, max_len=12)
    monkeypatch.setattr(
        ev,
        "ARMS",
        {
            "plain": [("ma", dict(tiny)), ("ma", dict(tiny, dropout=0.4))],
            "svgd": [("svgd:alpha=0.1", dict(tiny)), ("svgd:alpha=0.01", dict(tiny))],
        },
    )
    monkeypatch.setattr(ev, "SELECT_EPOCHS", 1)
    monkeypatch.setattr(ev, "FINAL_EPOCHS", 1)
    monkeypatch.setattr(ev, "FINAL_SEEDS", (0,))
    out, results, root = tmp_path / "out", tmp_path / "results", str(FIXTURE)
    common = ["--out", str(out), "--results", str(results), "--root", root, "--quiet"]
    assert ev.main(["select", *common]) == 0
    for arm in ev.ARMS:
        for i in range(2):
            config = json.loads((ev.select_dir(out, arm, i) / "config.json").read_text())
            assert config["seed"] == ev.SELECT_SEED and config["config"]["epochs"] == 1
            assert config["config"]["dropout"] == ev.ARMS[arm][i][1].get("dropout", 0.3)
    stamp = (ev.select_dir(out, "svgd", 1) / "train.json").stat().st_mtime_ns
    assert ev.main(["select", "svgd", "1", *common]) == 0  # finished: not trained again
    assert (ev.select_dir(out, "svgd", 1) / "train.json").stat().st_mtime_ns == stamp
    assert ev.main(["choose", *common]) == 0
    choice = json.loads((out / "choice.json").read_text())

    # the study's decoding choice (made on the baseline run's dev; that run is not needed here)
    (out / "decoding.json").write_text(
        json.dumps(
            {"setting": "beam5-lp1.0-nr3", "beam": 5, "length_penalty": 1.0, "no_repeat_ngram": 3, "dev_BLEU": 9.5}
            | {"rule": base.choose.__doc__}
        )
    )
    run = ev.final(out, "svgd", 0, root=root, quiet=True, results=results)
    config = json.loads((run / "config.json").read_text())
    assert config["variant"] == ev.ARMS["svgd"][choice["svgd"]["index"]][0]
    # kept by dev BLEU, dev decoded after every epoch with the study's decoding
    assert {k: config["config"][k] for k in ("keep", "beam", "length_penalty", "no_repeat_ngram")} == {
        "keep": "dev_bleu",
        "beam": 5,
        "length_penalty": 1.0,
        "no_repeat_ngram": 3,
    }
    assert all("dev_bleu" in h for h in json.loads((run / "train.json").read_text())["history"])
    scores = ev.decode_final(out, "svgd", 0, results, root=root, meteor="none", progress=False)
    decoded = json.loads((run / "decode" / "test" / "decoded.test.json").read_text())
    assert (decoded["beam"], decoded["length_penalty"], decoded["no_repeat_ngram"]) == (5, 1.0, 3)
    assert json.loads((run / "decode" / "test" / "decode.test.json").read_text())["no_repeat_ngram"] == 3
    assert (results / "svgd-s0" / "hyp.test.txt").is_file() and (results / "svgd-s0" / "meta.test.tsv").is_file()

    page = tmp_path / "webnlg.md"
    page.write_text((REPO / "docs" / "webnlg.md").read_text())
    data = ev.report(out, page, results, base=tmp_path / "no-baseline-run")
    assert [f["arm"] for f in data["finals"]] == ["svgd"] and data["finals"][0]["scores"]["all"]["BLEU"] == round(
        scores["all"]["BLEU"], 4
    )
    assert all(r["dev_loss"] is not None for r in data["selection"])
    assert ev.render(page.read_text(), data) == page.read_text() and "| svgd |" in page.read_text()
    assert "| `beam5-lp1.0-nr3` | – | yes |" in page.read_text()  # no baseline run here: no dev scores
    history = json.loads((run / "train.json").read_text())["history"]
    assert [(h["epoch"], h["dev_loss"], h["dev_bleu"]) for h in data["finals"][0]["history"]] == [
        (1, round(history[0]["dev_loss"], 4), round(history[0]["dev_bleu"], 4))
    ]
    assert (results / "curves.png").read_bytes()[:4] == b"\x89PNG" and f"]({ev.CURVES})" in page.read_text()
    # a machine without the runs keeps the committed entries
    elsewhere = tmp_path / "elsewhere"
    again = ev.collect(elsewhere, results)
    assert again["finals"] == data["finals"] and again["selection"] == data["selection"]
    # ... and goes on from them: the selection, the choice and the decoding are done, svgd's final is tested
    per_epoch = sorted(r["seconds_per_epoch"] for r in data["selection"])  # the committed selection's timing
    left = (per_epoch[1] + per_epoch[2]) / 2 / 3600  # their median: one epoch left, plus a dev decode
    assert ev.plan(elsewhere, results) == [
        "OMP_NUM_THREADS=1 python -m studies.webnlg2017_evidence final plain 0  # about "
        f"{left:.1f} h left at {(per_epoch[1] + per_epoch[2]) / 2:.0f} s per epoch, plus a dev decode per epoch",
        "python -m studies.webnlg2017_evidence report",
    ]
    assert ev.chosen(elsewhere, "svgd", results) == choice["svgd"]["index"]
    assert ev.keeping(elsewhere, results) == {
        "keep": "dev_bleu",
        "beam": 5,
        "length_penalty": 1.0,
        "no_repeat_ngram": 3,
    }
    with pytest.raises(SystemExit, match="svgd seed 0: its test scores are committed .*; not trained again"):
        ev.final(elsewhere, "svgd", 0, root=root, quiet=True, results=results)
    assert not elsewhere.exists()
    # a final trained part-way here times what is left by the finals' own epochs (not the selection's)
    from graph_rma.engine import save_checkpoint

    here, history = tmp_path / "here", [{"epoch": 1, "seconds": 300.0, "dev_bleu_seconds": 12.0}]
    save_checkpoint(ev.final_dir(here, "plain", 0, ev.recipe()) / "checkpoint.pt", {"epoch": 1, "history": history})
    monkeypatch.setattr(ev, "FINAL_EPOCHS", 13)  # 12 epochs left: 12 x (300 + 12) s = 1.04 h
    assert ev.plan(here, results)[0] == (
        "OMP_NUM_THREADS=1 python -m studies.webnlg2017_evidence final plain 0  # 1 of 13 epochs trained; about "
        "1.0 h left at 300 s per epoch and 12 s per dev decode"
    )


def test_the_summary_shows_the_strongest_webnlg_baseline_and_the_evidence_on_it():
    from studies import summary

    results = summary.load()
    results["webnlg2017"] = base.not_run()  # nothing stronger scored: the CPU preset's row
    weak = summary.render_summary(results, "docs/")
    assert "| WebNLG 2017, BLEU-4 all / seen / unseen | 1 seed, CPU preset" in weak
    assert summary._webnlg2017_row(base.not_run(), ev.not_run(), "") is None

    scored = dict(base.not_run(), round="v3-s0")  # summary.load names the latest scored round
    s = {"BLEU": 56.0, "METEOR": 40.0, "TER": 40.0, "n": 971}
    scored["test"] = {"scores": {"seen": s, "unseen": dict(s, BLEU=20.0), "all": dict(s, BLEU=40.0)}}
    row = summary._webnlg2017_row(scored, ev.not_run(), "")
    assert "(round `v3-s0`), decoding chosen on dev | 56.00 / 20.00 / 40.00 | not measured on this baseline yet" in row
    assert "| the plain generator reaches GCN_EC's" in row
    scored["test"]["scores"]["seen"]["BLEU"] = 55.0
    assert "the plain generator is below GCN_EC's published seen BLEU 55.9" in summary._webnlg2017_row(
        scored, ev.not_run(), ""
    )

    evidence = ev.not_run()
    evidence["finals"] = [_final("plain", 0, 50.0), _final("svgd", 0, 49.0)]
    row = summary._webnlg2017_row(scored, evidence, "")
    assert "| 1 paired seed, each arm chosen on dev from 2 settings" in row and "one seed: no difference to tell" in row
    assert "| 50.00 / 50.00 / 50.00 | SVGD 50.00 / 49.00 / 49.00 |" in row  # one seed: no spread shown
    evidence["finals"].append(_final("plain", 1, 52.0))  # a seed of one arm only: not in the paired row
    assert summary._webnlg2017_row(scored, evidence, "") == row
    evidence["finals"] += [_final("svgd", 1, 50.0)]
    row = summary._webnlg2017_row(scored, evidence, "")
    # all-subset differences -1 and -2: mean -1.5, se 0.5 -> z = -3, a loss
    assert "| 2 paired seeds, each arm chosen on dev from 2 settings" in row
    assert "| 50.00 ± 0.00 / 51.00 ± 1.41 / 51.00 ± 1.41 | SVGD 50.00 ± 0.00 / 49.50 ± 0.71 / 49.50 ± 0.71 |" in row
    assert "paired (all) -1.50 ± 0.50 (0/0/2): a loss; seen +0.00 ± 0.00 (0/2/0): within noise |" in row
    results["webnlg2017"], results["webnlg2017/evidence"] = scored, evidence
    table = summary.render_summary(results, "")
    assert row in table and "CPU preset, all training data" not in table  # the strong row replaces the weak one


def test_the_finals_recipe_is_the_plain_round_with_the_higher_dev_bleu_and_waits_for_both(rounds):
    assert ev.recipe() == "v3-s0"  # 57.0 against 56.0
    rounds["v4-s0"] = {"dev_BLEU": 57.0}
    assert ev.recipe() == "v3-s0"  # a tie: the earlier round
    rounds["v4-s0"] = {"dev_BLEU": 61.06}
    assert ev.recipe() == "v4-s0"
    rounds["v4-s0"] = None  # its decoding not chosen yet: nothing is decided, no final trains
    assert ev.recipe_or_none() is None
    with pytest.raises(SystemExit, match="recipe is not decided: v4-s0 has no decoding chosen yet"):
        ev.recipe()


def test_a_final_on_v4s_recipe_adds_its_label_smoothing_and_its_decoding(tmp_path, monkeypatch, rounds):
    out, none = tmp_path / "out", tmp_path / "nothing committed"
    out.mkdir()
    (out / "choice.json").write_text(json.dumps({"plain": {"index": 1}, "svgd": {"index": 0}}))
    v4 = {"setting": "beam5-lp1.4-nr3-cr0.5", "beam": 5, "length_penalty": 1.4, "no_repeat_ngram": 3}
    rounds["v4-s0"] = dict(v4, coverage_reward=0.5, dev_BLEU=61.06)
    trained = []
    monkeypatch.setattr(ev, "_train", lambda cmd, run: trained.append((cmd, run)))
    folder = ev.final(out, "plain", 2, results=none)
    assert folder == out / "final-v4-s0" / "plain-s2"  # apart from the earlier recipe's finals
    cmd = trained[0][0]
    options = dict(zip(cmd[cmd.index("--variant") :: 2], cmd[cmd.index("--variant") + 1 :: 2]))
    assert options["--variant"] == "ma" and options["--seed"] == "2" and options["--dropout"] == "0.4"
    assert options["--label-smoothing"] == "0.1" and options["--keep"] == "dev_bleu"
    assert [options[k] for k in ("--beam", "--length-penalty", "--no-repeat-ngram", "--coverage-reward")] == [
        "5",
        "1.4",
        "3",
        "0.5",
    ]
    assert ev.final_results(tmp_path / "ev", "plain", 2, "v4-s0") == tmp_path / "ev" / "v4-s0" / "plain-s2"
    # the same on v3-s0's recipe: the preset's loss and the study's own decoding, in the old folders
    rounds["v4-s0"]["dev_BLEU"] = 50.0
    (out / "decoding.json").write_text(json.dumps({"setting": "beam5-lp1.8-nr3", "beam": 5, "length_penalty": 1.8}))
    assert ev.final(out, "plain", 2, results=none) == out / "final" / "plain-s2"
    assert "--label-smoothing" not in trained[1][0] and "--coverage-reward" not in trained[1][0]


def test_a_final_decoded_with_another_setting_than_its_recipes_is_left_out(tmp_path, rounds, capsys):
    out, results = tmp_path / "out", tmp_path / "ev"
    out.mkdir()
    (out / "choice.json").write_text(json.dumps({"plain": {"index": 0}, "svgd": {"index": 1}}))
    rounds["v4-s0"] = {"setting": "beam5-lp1.4-nr3-cr1", "beam": 5, "length_penalty": 1.4, "dev_BLEU": 61.0}
    wrong = dict(_final("plain", 0, 43.3), decoding="beam5-lp1.4-nr3", recipe="v4-s0")  # the coverage reward missed
    right = dict(_final("svgd", 0, 44.0), decoding="beam5-lp1.4-nr3-cr1", recipe="v4-s0")
    results.mkdir()
    (results / "results.json").write_text(json.dumps({"finals": [wrong, right]}))
    data = ev.collect(out, results, base=tmp_path / "no-baseline-run")
    assert [(f["arm"], f["seed"]) for f in data["finals"]] == [("svgd", 0)]
    said = capsys.readouterr().err
    assert "v4-s0 plain seed 0: the test set was decoded with beam5-lp1.4-nr3, not the recipe's" in said


def test_the_finals_of_another_recipe_are_reported_apart_never_pooled(rounds):
    from studies import summary

    data = ev.not_run()
    data["choice"] = {"plain": {"index": 0, "setting": "ma"}, "svgd": {"index": 1, "setting": "svgd:alpha=0.01"}}
    data["finals"] = [dict(_final("plain", 0, 50.0), recipe="v3-s0"), dict(_final("svgd", 0, 49.0), recipe="v3-s0")]
    data["finals"] += [dict(_final(arm, 0, b), recipe="v4-s0") for arm, b in (("plain", 60.0), ("svgd", 62.0))]
    data["recipes"], data["recipe"] = {"v3-s0": 57.22, "v4-s0": 61.06}, "v4-s0"
    assert ev.per_arm(data, "all", "BLEU") == {"plain": {0: 60.0}, "svgd": {0: 62.0}}
    assert ev.per_arm(data, "all", "BLEU", "v3-s0") == {"plain": {0: 50.0}, "svgd": {0: 49.0}}
    text = ev.render_evidence(data)
    assert "(`v3-s0` 57.22, `v4-s0` 61.06): `v4-s0`; both arms add label smoothing 0.1, and every final" in text
    main, apart = text.split("On `v3-s0`'s recipe, apart")
    assert "Finals on `v4-s0`'s recipe" in main and "| all | +2.00 (one seed) | 1/0/0 |" in main
    assert "Finals on `v3-s0`'s recipe" in apart and "| all | -1.00 (one seed) | 0/0/1 |" in apart
    # the recipe the finals left is not trained further: no "what is left" for it, the finals' recipe still has one
    assert "Stopped at 1 of 3 seeds paired: the finals train `v4-s0`'s recipe." in apart
    assert "Not decided: 1 of 3 seeds paired so far" in main and "Stopped at" not in main
    scored = dict(base.not_run(), round="v4-s0")
    s = {"BLEU": 56.0, "METEOR": 40.0, "TER": 40.0, "n": 971}
    scored["test"] = {"scores": {"seen": s, "unseen": dict(s, BLEU=20.0), "all": dict(s, BLEU=40.0)}}
    row = summary._webnlg2017_row(scored, data, "")
    assert "| 50.00 / 60.00 / 60.00 | SVGD 50.00 / 62.00 / 62.00 |" in row  # the recipe's finals alone


def test_the_plan_waits_for_the_recipe_once_the_selection_is_chosen(tmp_path, rounds):
    out = tmp_path / "out"
    out.mkdir()
    (out / "choice.json").write_text(json.dumps({"plain": {"index": 0}, "svgd": {"index": 1}}))
    (out / "decoding.json").write_text(json.dumps({"setting": "beam5-lp1.8-nr3", "beam": 5, "length_penalty": 1.8}))
    committed = tmp_path / "committed"
    selection = [{"arm": a, "index": i, "epochs": ev.SELECT_EPOCHS} for a in ev.ARMS for i in (0, 1)]
    committed.mkdir()
    (committed / "results.json").write_text(json.dumps({"selection": selection}))
    rounds["v4-s0"] = None
    assert ev.plan(out, committed) == [
        "python -m studies.webnlg2017 report --round v4-s0  # after its training, dev and choose: the finals' "
        "recipe is decided then"
    ]
    rounds["v4-s0"] = {"setting": "beam5-lp1.0", "beam": 5, "length_penalty": 1.0, "dev_BLEU": 60.0}
    me = "OMP_NUM_THREADS=1 python -m studies.webnlg2017_evidence"
    assert ev.plan(out, committed)[:4] == [f"{me} final {a} {s}" for s in (0, 1) for a in ("plain", "svgd")]
