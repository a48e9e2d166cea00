"""studies.webnlg2017: the challenge-baseline driver's rules (choice on dev, one test decode) on hand-made files, and
the whole driver (dev -> choose -> test -> report -> rescore) on the tiny WebNLG fixture."""

import json
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO

from graph_rma.engine import blocks
from graph_rma.tasks import defaults
from studies import webnlg2017 as study
from studies.graph_to_text import PUBLISHED

FIXTURE = FIXTURES / "webnlg_tiny"


def _fake_run(tmp_path: Path, bleus=None, epochs_done=2, epochs=2, grid=study.GRID) -> Path:
    """A run folder with a stand-in best.pt (only its bytes matter to choose and test) and, for each BLEU given,
    that setting of ``grid``'s dev record and scores as `dev` writes them."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "best.pt").write_bytes(b"weights of epoch 2")
    (run / "config.json").write_text(json.dumps({"config": {"epochs": epochs}, "variant": "ma", "seed": 0}))
    (run / "train.json").write_text(json.dumps({"history": [{"epoch": e + 1} for e in range(epochs_done)]}))
    sha = study._sha256(run / "best.pt")
    for setting, bleu in zip(grid, bleus or []):
        folder = run / "decode" / study.setting_name(setting)
        folder.mkdir(parents=True)
        record = {"setting": study.setting_name(setting), "checkpoint": {"sha256": sha, "epoch": 2, "dev_loss": 1.5}}
        record.update(setting, max_len=80, entries=872, seconds=30.0, threads=1, device="cpu", date="d", torch="t")
        record["machine"] = "m"
        (folder / "decoded.dev.json").write_text(json.dumps(record))
        metrics = {"all": {"BLEU": bleu, "n": 872}, "unseen": None}
        (folder / "metrics.dev.webnlg2017.json").write_text(json.dumps(metrics))
    return run


def test_the_grid_is_the_issues():
    assert [study.setting_name(s) for s in study.GRID] == ["beam5-lp0.6", "beam5-lp1.0", "beam5-lp1.4", "beam10-lp1.0"]


def test_a_settings_name_covers_every_decoding_option_of_the_generator():
    """Every decoding option the generator has besides beam, length and length penalty is one the study names, with
    the generator's default as "off" (a coverage reward once went unnamed through a choice and was dropped)."""
    import dataclasses

    from graph_rma.tasks.generator_config import DECODING_FIELDS, GeneratorConfig

    defaults_ = {f.name: f.default for f in dataclasses.fields(GeneratorConfig) if f.name in DECODING_FIELDS}
    extra = {k: v for k, v in defaults_.items() if k not in ("beam", "max_len", "length_penalty")}
    assert study.EXTRA_DECODING == extra
    plain = {"beam": 5, "length_penalty": 1.4}
    names = {study.setting_name(dict(plain, **{k: 2})) for k in extra}  # each option on alone: a name of its own
    assert len(names) == len(extra) and study.setting_name(plain) not in names


def test_pick_takes_the_highest_and_the_earlier_on_a_tie():
    assert study.pick([40.0, 42.5, 42.5, 41.0]) == 1
    assert study.pick([3.0, 1.0, 2.0]) == 0 and study.pick([1.0, 1.0]) == 0 and study.pick([0.0, 0.5]) == 1


def test_choose_takes_the_highest_dev_bleu_and_reads_no_test_file(tmp_path):
    run = _fake_run(tmp_path, [40.0, 42.5, 42.5, 41.0])
    test = run / "decode" / "test"
    test.mkdir()
    (test / "metrics.test.webnlg2017.json").write_text("not json: choose must not open it")
    choice = study.choose(run)
    assert choice["setting"] == "beam5-lp1.0" and (choice["beam"], choice["length_penalty"]) == (5, 1.0)
    assert choice["dev_BLEU"] == 42.5
    assert json.loads((run / "decode" / "choice.json").read_text()) == choice


def test_choose_refuses_an_unscored_setting_and_another_checkpoint(tmp_path):
    run = _fake_run(tmp_path, [40.0, 42.5, 41.0])
    with pytest.raises(SystemExit, match="dev not scored for beam10-lp1.0: run `python -m studies.webnlg2017 dev`"):
        study.choose(run)
    (run / "decode" / "beam10-lp1.0").mkdir()
    (run / "decode" / "beam10-lp1.0" / "metrics.dev.webnlg2017.json").write_text('{"all": {"BLEU": 50.0}}')
    with pytest.raises(SystemExit, match="dev not scored for beam10-lp1.0"):  # scores without a decode record
        study.choose(run)
    (run / "decode" / "beam10-lp1.0" / "decoded.dev.json").write_text(
        (run / "decode" / "beam5-lp0.6" / "decoded.dev.json").read_text()
    )
    (run / "best.pt").write_bytes(b"weights of epoch 3")  # training went on after dev was decoded
    with pytest.raises(SystemExit, match="decoded from another best.pt"):
        study.choose(run)
    assert not (run / "decode" / "choice.json").exists()


def test_dev_refuses_a_run_that_is_still_training(tmp_path):
    run = _fake_run(tmp_path, epochs_done=1, epochs=30)
    with pytest.raises(SystemExit, match="trained 1 of 30 epochs; wait for `graph-rma webnlg train` to finish"):
        study.dev(run, root="/nonexistent")
    assert not (run / "decode").exists()
    with pytest.raises(SystemExit, match="no such checkpoint"):
        study.dev(tmp_path / "nothing", root="/nonexistent")


def test_test_refuses_before_choose_another_checkpoint_and_another_setting(tmp_path):
    run = _fake_run(tmp_path, [40.0, 42.5, 42.5, 41.0])
    results = tmp_path / "results"
    kwargs = dict(root="/nonexistent", meteor="none", progress=False)  # a refusal reads no data
    with pytest.raises(SystemExit, match="no setting chosen: run `python -m studies.webnlg2017 choose` first"):
        study.decode_test(run, results, **kwargs)
    choice = study.choose(run)
    # a choice whose options are not the setting it names (a coverage reward left out): refused, nothing decoded
    named = dict(choice, setting=choice["setting"] + "-cr1")
    (run / "decode" / "choice.json").write_text(json.dumps(named))
    with pytest.raises(SystemExit, match=f"names {named['setting']} but its options decode {choice['setting']}"):
        study.decode_test(run, results, **kwargs)
    assert not (run / "decode" / "test").exists()
    (run / "decode" / "choice.json").write_text(json.dumps(choice))
    # the test set was decoded (or its decoding started) with another setting: no second decode
    claim = run / "decode" / "test" / "claim.json"
    claim.parent.mkdir()
    claim.write_text(json.dumps({"setting": "beam10-lp1.0", "checkpoint": choice["checkpoint"]}))
    with pytest.raises(SystemExit, match="decoded with beam10-lp1.0; one test decode per final run"):
        study.decode_test(run, results, **kwargs)
    claim.unlink()
    # the committed record of this run's test decode names another setting
    results.mkdir()
    (results / "test.json").write_text(json.dumps({"setting": "beam5-lp0.6", "checkpoint": choice["checkpoint"]}))
    with pytest.raises(SystemExit, match="test.json: the test set was decoded with beam5-lp0.6"):
        study.decode_test(run, results, **kwargs)
    # the committed outputs are another checkpoint's (another run's): not overwritten
    other = dict(choice["checkpoint"], sha256="0" * 64, path="runs/webnlg2017/ma-s1/best.pt")
    (results / "test.json").write_text(json.dumps({"setting": choice["setting"], "checkpoint": other}))
    with pytest.raises(SystemExit, match="holds the test decode of another checkpoint .*ma-s1/best.pt"):
        study.decode_test(run, results, **kwargs)
    (results / "test.json").unlink()
    (run / "best.pt").write_bytes(b"weights of epoch 3")
    with pytest.raises(SystemExit, match="not the checkpoint dev was decoded from"):
        study.decode_test(run, results, **kwargs)
    assert not claim.exists() and sorted(p.name for p in results.iterdir()) == []


def _results(seen_bleu):
    res = study.not_run()
    scores = {"BLEU": seen_bleu, "METEOR": 40.0, "TER": 45.0, "n": 971}
    res["choice"] = {"setting": "beam5-lp1.0", "beam": 5, "length_penalty": 1.0, "dev_BLEU": 60.0, "rule": "r"}
    res["test"] = {
        "setting": "beam5-lp1.0",
        "beam": 5,
        "length_penalty": 1.0,
        "seconds": 60.0,
        "date": "2030-01-01 00:00 UTC",
        "scores": {"seen": scores, "unseen": dict(scores, BLEU=20.0, METEOR=None), "all": dict(scores, BLEU=40.0)},
    }
    return res


def test_acceptance_is_gcn_ecs_published_seen_bleu():
    gcn = [s["BLEU seen"] for name, s, _ in PUBLISHED["webnlg"] if name.startswith("GCN_EC")]
    assert gcn == [study.target()] == [55.9]
    assert study.acceptance(study.not_run()) is None
    assert study.acceptance(_results(55.9)) is True and study.acceptance(_results(55.89)) is False
    text = study.render_results({study.FIRST: _results(55.89)})
    assert f"`{study.FIRST}` **not met** (55.89, -0.01)" in text
    assert "| 55.89 | 20.00 | 40.00 | 40.00 | n/a | 40.00 | 45.00 | 45.00 | 45.00 |" in text
    assert f"`{study.FIRST}` **met** (56.00, +0.10)" in study.render_results({study.FIRST: _results(56.0)})


def test_a_chosen_setting_that_blocks_repeats_is_named_so(tmp_path):
    """The second round's grid blocks repeated n-grams: the results keep it in the choice and the test decode, and
    the block names it (a setting without blocking is written as before)."""
    bleus = [50.0] * len(study.GRID) + [51.0, 52.0, 53.0, 50.0, 50.0, 50.0]  # beam5-lp1.8-nr3 is highest
    run = _fake_run(tmp_path, bleus, grid=study.DECODE_GRID)
    choice = study.choose(run, study.DECODE_GRID)
    assert (choice["setting"], choice["no_repeat_ngram"]) == ("beam5-lp1.8-nr3", 3)
    test = run / "decode" / "test"
    test.mkdir()
    dev = json.loads((run / "decode" / "beam5-lp1.8-nr3" / "decoded.dev.json").read_text())
    (test / "decoded.test.json").write_text(json.dumps(dict(dev, entries=1862)))
    scores = {"BLEU": 50.0, "METEOR": None, "TER": 40.0, "n": 971}
    (test / "metrics.test.webnlg2017.json").write_text(json.dumps({s: scores for s in study.SUBSETS}))
    data = study.collect(run, tmp_path / "results", study.DECODE_GRID)
    assert data["choice"]["no_repeat_ngram"] == data["test"]["no_repeat_ngram"] == 3
    text = study.render_results({study.FIRST: study.not_run(), "v3-s0": data})
    described = "beam 5, length penalty 1.8, no repeated 3-gram"
    assert f"Chosen: {described} (the highest BLEU" in text and f"| {described}; decoded outputs" in text
    (tmp_path / "first").mkdir()
    first = _fake_run(tmp_path / "first", [50.0, 51.0, 50.0, 50.0])
    study.choose(first)
    assert "no_repeat_ngram" not in study.collect(first, tmp_path / "r")["choice"]


def test_a_chosen_setting_with_a_coverage_reward_is_named_so_and_decoded_with_it(tmp_path, monkeypatch):
    bleus = [50.0] * (len(study.COVERAGE_GRID) - 1) + [54.0]  # beam5-lp1.8-nr3-cr1 is highest
    run = _fake_run(tmp_path, bleus, grid=study.COVERAGE_GRID)
    choice = study.choose(run, study.COVERAGE_GRID)
    assert (choice["setting"], choice["no_repeat_ngram"], choice["coverage_reward"]) == ("beam5-lp1.8-nr3-cr1", 3, 1.0)
    data = study.collect(run, tmp_path / "results", study.COVERAGE_GRID)
    assert (data["choice"]["no_repeat_ngram"], data["choice"]["coverage_reward"]) == (3, 1.0)
    text = study.render_results({study.FIRST: study.not_run(), "v4-s0": data})
    assert "Chosen: beam 5, length penalty 1.8, no repeated 3-gram, coverage reward 1 (the highest BLEU" in text
    # the test decode gets every setting of the choice
    from graph_rma.tasks import webnlg as task

    asked = {}
    monkeypatch.setattr(task, "generate", lambda *a, **kw: asked.update(kw) or (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        study.decode_test(run, tmp_path / "results", root=FIXTURE, meteor="none", progress=False)
    assert (asked["beam"], asked["length_penalty"], asked["no_repeat_ngram"], asked["coverage_reward"]) == (
        5,
        1.8,
        3,
        1.0,
    )


def test_each_round_has_its_row_its_grid_and_its_verdict():
    """A row each in the one test table, each round's own dev grid, an acceptance verdict each, links into each
    round's results folder, the settings its command sets over the preset; the latest round with a test score is the
    one the summary takes."""
    first, second, third = list(study.ROUNDS)
    assert study.ROUNDS[first].grid == study.GRID
    assert study.ROUNDS[second].grid == study.DECODE_GRID
    # the third's grid: the second's, then the coverage reward (amended before any of its decodes)
    assert study.ROUNDS[third].grid[: len(study.DECODE_GRID)] == study.DECODE_GRID
    added = study.ROUNDS[third].grid[len(study.DECODE_GRID) :]
    assert [study.setting_name(s) for s in added] == [
        f"beam5-lp{lp}-nr3-cr{reward}" for reward in ("0.5", "1") for lp in ("1.0", "1.4", "1.8")
    ]
    assert study.ROUNDS[first].results == study.RESULTS and study.ROUNDS[second].results.parent == study.RESULTS
    assert study.ROUNDS[third].overrides == {"label_smoothing": 0.1}  # the third round's one change (docs/webnlg.md)
    rounds = {first: _results(52.0), second: _results(56.5), third: study.not_run(study.COVERAGE_GRID)}
    rounds[second]["grid"] = study.not_run(study.DECODE_GRID)["grid"]
    text = study.render_results(rounds)
    rows = [line for line in text.splitlines() if line.startswith("| ours, ")]
    assert [r.split("`")[1] for r in rows] == [first, second, third]
    assert "| 52.00 |" in rows[0] and "| 56.50 |" in rows[1]
    assert (
        "`--preset webnlg2017`" in rows[0] and "`--preset webnlg2017 --label-smoothing 0.1` | not run yet |" in rows[2]
    )
    assert f"[{study.folder(second)}/hyp.test.txt]({study.folder(second)}/hyp.test.txt)" in rows[1]
    assert f"`{first}` **not met** (52.00, -3.90); `{second}` **met** (56.50, +0.60); `{third}` not decided" in text
    assert text.count("| beam 5, length penalty 1.8, no repeated 3-gram | not run yet |") == 2  # the later grids
    assert text.count("| beam 5, length penalty 1.0, no repeated 3-gram, coverage reward 0.5 | not run yet |") == 1
    assert study.latest(rounds) == second and study.latest({first: rounds[first], second: study.not_run()}) == first
    assert study.latest({n: study.not_run() for n in study.ROUNDS}) is None


def test_a_rounds_row_names_the_training_settings_its_run_set_over_the_preset():
    preset = dict(defaults.WEBNLG_PRESETS["webnlg2017"])
    # decoding settings and keep are the row's and the dev table's business, not a change of training
    decoded = dict(preset, beam=10, length_penalty=1.8, no_repeat_ngram=3, keep="dev_bleu")
    assert study.trained_over_preset(decoded) == {}
    assert study.trained_over_preset(dict(decoded, label_smoothing=0.1, dropout=0.4)) == {
        "dropout": 0.4,
        "label_smoothing": 0.1,
    }
    ran = _results(56.0)
    ran["conditions"] = {"variant": "ma", "seed": 0, "config": dict(preset, label_smoothing=0.1)}
    row = study._test_row("v4-s0", ran)
    assert row.startswith(
        "| ours, `v4-s0`: GraphWriter, `ma` encoder heads, `--preset webnlg2017 --label-smoothing 0.1`, seed 0 |"
    )


def test_before_any_run_the_block_says_so():
    text = study.render_results({n: study.not_run(r.grid) for n, r in study.ROUNDS.items()})
    settings = sum(len(r.grid) for r in study.ROUNDS.values())
    assert text.count("not run yet") == settings + len(study.ROUNDS)
    assert (
        text.count("not decided")
        == text.count("Chosen: not yet")
        == text.count("nothing decoded yet")
        == len(study.ROUNDS)
    )
    for name, scores, _ in PUBLISHED["webnlg"]:
        assert f"| {name} | {scores['BLEU seen']:g} |" in text  # the published rows, from their one source


@pytest.mark.slow
def test_the_driver_end_to_end_on_the_fixture(tmp_path, monkeypatch, capsys):
    """Train one epoch, then dev -> choose -> test -> report -> rescore into tmp paths; every step resumes."""
    pytest.importorskip("sacrebleu")
    from graph_rma.cli import score as score_cli
    from graph_rma.data.webnlg import load_webnlg_splits
    from graph_rma.tasks import webnlg as task

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # main() installs one_line_errors for the process
    splits = load_webnlg_splits(FIXTURE)
    small = dict(task.PRESETS["webnlg2017"], hidden=16, layers=1, heads=2, decoder_heads=2, epochs=1, batch_size=3)
    run, results = tmp_path / "run", tmp_path / "results"
    task.train(dict(small, min_freq=1, max_len=12), run, variant="ma", seed=0, progress=False, splits=splits)
    kwargs = dict(root=FIXTURE, meteor="none", progress=False)

    study.dev(run, **kwargs)
    for setting in study.GRID:
        folder = run / "decode" / study.setting_name(setting)
        record = json.loads((folder / "decoded.dev.json").read_text())
        assert (record["beam"], record["length_penalty"], record["max_len"], record["entries"]) == (
            setting["beam"],
            setting["length_penalty"],
            12,
            1,
        )
        assert record["checkpoint"]["sha256"] == study._sha256(run / "best.pt") and record["checkpoint"]["epoch"] == 1
        metrics = json.loads((folder / "metrics.dev.webnlg2017.json").read_text())
        assert metrics["scorer"] == "webnlg2017" and metrics["all"]["n"] == 1 and metrics["unseen"] is None
        assert len((folder / "hyp.dev.txt").read_text().split("\n")) == 2  # one entry
    # resumable: a setting decoded but not scored is only scored; a scored one is skipped
    lp14 = run / "decode" / "beam5-lp1.4"
    (lp14 / "metrics.dev.webnlg2017.json").unlink()
    stamps = {p: p.stat().st_mtime_ns for p in (run / "decode").rglob("*") if p.is_file()}
    study.dev(run, **kwargs)
    assert (lp14 / "metrics.dev.webnlg2017.json").is_file()
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps

    assert study.main(["choose", "--run", str(run)]) == 0
    choice = json.loads((run / "decode" / "choice.json").read_text())
    bleus = [
        json.loads((run / "decode" / n / "metrics.dev.webnlg2017.json").read_text())["all"]["BLEU"]
        for n in map(study.setting_name, study.GRID)
    ]
    assert choice["setting"] == study.setting_name(study.GRID[study.pick(bleus)])

    scores = study.decode_test(run, results, **kwargs)
    decoded = json.loads((run / "decode" / "test" / "decoded.test.json").read_text())
    assert (decoded["beam"], decoded["length_penalty"]) == (choice["beam"], choice["length_penalty"])
    hyp = (results / "hyp.test.txt").read_text()
    assert hyp == (run / "decode" / "test" / "hyp.test.txt").read_text() and len(hyp.split("\n")) == 3
    assert (results / "meta.test.tsv").read_text().splitlines()[1:] == [
        f"{i + 1}\t{r['eid']}\t{r['category']}\t{'seen' if r['seen'] else 'unseen'}"
        for i, r in enumerate(json.loads((run / "decode" / "test" / "refs.test.json").read_text()))
    ]
    committed = json.loads((results / "test.json").read_text())
    assert committed["setting"] == choice["setting"] and committed["hyp_sha256"] == study._sha256(
        results / "hyp.test.txt"
    )
    assert [scores[s]["n"] for s in ("seen", "unseen", "all")] == [1, 1, 2]
    # run again: nothing is decoded again
    before = (run / "decode" / "test" / "decoded.test.json").stat().st_mtime_ns
    assert study.decode_test(run, results, **kwargs) == scores
    assert (run / "decode" / "test" / "decoded.test.json").stat().st_mtime_ns == before
    # a different choice now (e.g. another grid) is refused: one test decode per final run
    other = next(g for g in study.GRID if study.setting_name(g) != choice["setting"])
    (run / "decode" / "choice.json").write_text(json.dumps(dict(choice, **other, setting=study.setting_name(other))))
    with pytest.raises(SystemExit, match="one test decode per final run"):
        study.decode_test(run, results, **kwargs)
    (run / "decode" / "choice.json").write_text(json.dumps(choice))

    page = tmp_path / "webnlg.md"
    page.write_text((REPO / "docs" / "webnlg.md").read_text())
    data = study.report(study.FIRST, page, run, results)
    assert json.loads((results / "results.json").read_text()) == data
    assert study.render(page.read_text(), {**study.committed(), study.FIRST: data}) == page.read_text()
    assert data["test"]["scores"]["seen"]["BLEU"] == round(scores["seen"]["BLEU"], 4)
    assert [g["dev"]["BLEU"] for g in data["grid"]] == [round(b, 4) for b in bleus]
    assert data["conditions"]["epochs_trained"] == 1 and data["conditions"]["threads"] == 1
    # the training curves: the run's history in the results, drawn beside them, shown under the round's dev table
    history = json.loads((run / "train.json").read_text())["history"]
    assert [h["epoch"] for h in data["history"]] == [1] and data["history"][0]["lr"] == history[0]["lr"]
    assert data["history"][0]["dev_loss"] == round(history[0]["dev_loss"], 4)
    assert (results / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert f"]({study.folder(study.FIRST)}/curves.png)" in blocks.block(page.read_text(), study.BLOCK)
    block = blocks.block(page.read_text(), study.BLOCK)
    verdict = "**met**" if data["test"]["scores"]["seen"]["BLEU"] >= 55.9 else "**not met**"
    assert f"`{study.FIRST}` {verdict}" in block
    assert "not run yet" not in study.render_results({study.FIRST: data})
    # a tested run folder without its weights (best.pt deleted or not copied): its report reads the decodes
    (run / "best.pt").rename(tmp_path / "best.pt")
    assert study.report(study.FIRST, page, run, results) == data
    (tmp_path / "best.pt").rename(run / "best.pt")

    # rescoring from the committed files alone (and the WebNLG release's references)
    export = tmp_path / "export"
    capsys.readouterr()
    assert (
        study.main(
            ["rescore", "--results", str(results), "--root", str(FIXTURE), "--meteor", "none", "--export", str(export)]
        )
        == 0
    )
    assert "the same as results.json" in capsys.readouterr().out
    again = study.rescore(results, FIXTURE, "none")
    assert {s: again[s]["BLEU"] for s in again} == {s: scores[s]["BLEU"] for s in ("all", "seen", "unseen")}
    for subset in ("seen", "unseen", "all"):  # graph-rma score on one subset's files gives the same numbers
        refs = [a for j in (1, 2, 3) for a in ("--ref", str(export / f"ref{j}.{subset}.txt"))]
        out = tmp_path / f"score.{subset}.json"
        assert (
            score_cli.main(
                [
                    "--scorer",
                    "webnlg2017",
                    "--meteor",
                    "none",
                    "--hyp",
                    str(export / f"hyp.{subset}.txt"),
                    *refs,
                    "--json",
                    str(out),
                ]
            )
            == 0
        )
        by_cli = json.loads(out.read_text())
        assert (by_cli["BLEU"], by_cli["TER"], by_cli["n"]) == (
            scores[subset]["BLEU"],
            scores[subset]["TER"],
            scores[subset]["n"],
        )
    # the diagnosis: dev decoded again with repeated n-grams blocked, never test; then its numbers from the files
    from studies import webnlg2017_diagnosis as diagnosis

    test_files = {p: p.stat().st_mtime_ns for p in (run / "decode" / "test").iterdir()}
    diagnosis.run(run, root=FIXTURE, meteor="none", progress=False)
    for n in diagnosis.NGRAMS:
        folder = run / "decode" / f"{choice['setting']}-nr{n}"
        assert json.loads((folder / "decode.dev.json").read_text())["no_repeat_ngram"] == n
    assert {p: p.stat().st_mtime_ns for p in (run / "decode" / "test").iterdir()} == test_files
    found = diagnosis.collect(run, tmp_path / "diagnosis", results)
    assert [r["after_test"] for r in found["dev"]] == [False] * len(study.GRID) + [True] * len(diagnosis.NGRAMS)
    assert [r["BLEU"] for r in found["dev"][: len(bleus)]] == [round(b, 4) for b in bleus]
    seen = [r for r in splits.test if r.seen]
    assert [c["category"] for c in found["test"]["categories"]] == sorted({r.category for r in seen})
    assert sum(c["entries"] for c in found["test"]["categories"]) == len(seen) == scores["seen"]["n"]
    assert "| beam" in diagnosis.render_diagnosis(found)
    # the last epoch against best.pt, with the chosen decoding: decoded from checkpoint.pt
    last = json.loads((diagnosis.last_epoch_folder(run) / "decode.dev.json").read_text())
    assert last["checkpoint"] == str(run / "checkpoint.pt") and last["beam"] == choice["beam"]
    epochs = len(json.loads((run / "train.json").read_text())["history"])
    assert [(r["checkpoint"], r["epoch"]) for r in found["epochs"]["rows"]][1] == ("checkpoint.pt", epochs)
    assert found["epochs"]["rows"][0]["BLEU"] == round(bleus[study.pick(bleus)], 4)

    # a changed hypothesis is caught: the seen entry's line replaced by its first reference
    lines = (results / "hyp.test.txt").read_text().split("\n")
    lines[0] = splits.test[0].references[0]
    (results / "hyp.test.txt").write_text("\n".join(lines))
    assert study.main(["rescore", "--results", str(results), "--root", str(FIXTURE), "--meteor", "none"]) == 1
    assert "differs from results.json: seen BLEU" in capsys.readouterr().out

    # the second round's grid: choose refuses until its blocking settings are scored; dev decodes only those (the
    # grid's first settings are this checkpoint's, already scored); choose then picks over the whole grid
    second = [n for n in study.ROUNDS if n != study.FIRST][0]
    with pytest.raises(SystemExit, match="dev not scored for beam5-lp1.0-nr3, "):
        study.main(["choose", "--round", second, "--run", str(run)])
    scored = {p: p.stat().st_mtime_ns for p in (run / "decode").glob("beam*/metrics.dev.webnlg2017.json")}
    assert study.main(["dev", "--round", second, "--run", str(run), "--root", str(FIXTURE), "--meteor", "none"]) == 0
    assert {p: p.stat().st_mtime_ns for p in scored} == scored
    assert study.main(["choose", "--round", second, "--run", str(run)]) == 0
    bleus = [row["metrics"]["all"]["BLEU"] for row in study.dev_scores(run, study.DECODE_GRID)]
    chosen = json.loads((run / "decode" / "choice.json").read_text())["setting"]
    assert chosen == study.setting_name(study.DECODE_GRID[study.pick(bleus)])
