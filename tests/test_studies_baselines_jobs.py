"""studies.baselines --jobs: (setting, seed) runs in their own processes give what one process gives."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import PYG, REPO

from studies import baselines as study

needs_chameleon_filtered = pytest.mark.skipif(
    not (PYG / "heterophilous_graph" / "chameleon_filtered" / "raw").is_dir(),
    reason="Platonov et al.'s graphs not available (set GRAPH_RMA_DATA)",
)
SHORT = {"epochs": 3, "patience": 3, "hidden": 8}  # Luo et al.'s chameleon_filtered recipe, three epochs


def _setting(out, overrides):
    return ("chameleon_filtered", "luo", "ma", {**SHORT, **overrides}, out)


def _records(folder):
    return {r["seed"]: r for r in map(json.loads, map(lambda f: f.read_text(), (folder / "runs").glob("*/seed*.json")))}


@pytest.mark.slow
@needs_chameleon_filtered
def test_jobs_run_each_seed_in_a_process_and_equal_one_process(tmp_path):
    seeds = [100, 101]
    study._run_settings([_setting(tmp_path / "one", {})], seeds, threads=1, jobs=1)
    study._run_settings([_setting(tmp_path / "two", {})], seeds, threads=1, jobs=2)
    one, two = _records(tmp_path / "one"), _records(tmp_path / "two")
    assert sorted(two) == seeds
    for seed in seeds:  # the same run, whichever process trained it
        assert two[seed]["metrics"]["val_metric"] == one[seed]["metrics"]["val_metric"]
        assert two[seed]["metrics"]["test_metric"] == one[seed]["metrics"]["test_metric"]
    summary = json.loads((tmp_path / "two" / "results.json").read_text())
    assert sorted(r["seed"] for r in summary["runs"]) == seeds  # written once, from every finished run


@pytest.mark.slow
@needs_chameleon_filtered
def test_jobs_report_a_failed_run_and_keep_the_others(tmp_path):
    good, bad = _setting(tmp_path / "good", {}), _setting(tmp_path / "bad", {"lr": -1.0})
    with pytest.raises(SystemExit, match=r"1 of 2 runs failed"):
        study._run_settings([good, bad], [100], threads=1, jobs=2)
    assert sorted(_records(tmp_path / "good")) == [100]


@pytest.mark.slow
@needs_chameleon_filtered
def test_an_interrupt_stops_the_running_runs_and_spares_an_idle_process(tmp_path):
    """Ctrl-C to the whole group (as `timeout -s INT` sends it) while one process trains and the other is idle (its
    run failed): the command ends at once with its one-line message, the idle process prints no traceback."""
    long = {"epochs": 100000, "patience": 100000}
    script = (
        "from pathlib import Path\n"
        "from studies import baselines as b\n"
        f"good = ('chameleon_filtered', 'luo', 'ma', {dict(SHORT, **long)!r}, Path({str(tmp_path / 'good')!r}))\n"
        f"bad = ('chameleon_filtered', 'luo', 'ma', {dict(SHORT, lr=-1.0)!r}, Path({str(tmp_path / 'bad')!r}))\n"
        "b._run_settings([good, bad], [100], threads=1, jobs=2)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}
    log = tmp_path / "stderr.txt"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env, stderr=err, start_new_session=True)
        deadline = time.time() + 120
        while "1/2" not in log.read_text() and time.time() < deadline:  # the bad run failed: its process is idle
            time.sleep(0.5)
        assert "1/2" in log.read_text(), log.read_text()
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"still running 60 s after Ctrl-C: {log.read_text()}") from None
    text = log.read_text()
    assert code == 1 and "interrupted: finished runs are saved, the ones in progress where they stopped" in text
    assert "Traceback" not in text, text


def test_one_job_stops_at_the_first_interrupted_setting(tmp_path, monkeypatch):
    """run_study returns (``interrupted``) when Ctrl-C stops it: with one job the next setting must not start."""
    calls = []

    def fake(setting, seeds, threads, progress=True):
        calls.append((setting[4].name, list(seeds), progress))
        return {"interrupted": setting[4].name == "first"}

    monkeypatch.setattr(study, "_study", fake)
    settings = [_setting(tmp_path / name, {}) for name in ("first", "second")]
    with pytest.raises(SystemExit) as stopped:
        study._run_settings(settings, [100], threads=1, jobs=1)
    assert stopped.value.code == 130 and calls == [("first", [100], True)]
    calls.clear()
    study._run_settings(settings[1:], [100, 101], threads=1, jobs=1)  # nothing interrupted: every run, then
    assert calls == [("second", [100], True), ("second", [101], True), ("second", [100, 101], False)]  # the summary


def test_runs_saved_part_way_go_first_the_furthest_first_then_seed_by_seed(tmp_path):
    """A study stopped again part-way has finished the runs that were nearest their end, and the others finish in
    pairs of the same seed."""
    from graph_rma.engine import save_checkpoint

    a, b = _setting(tmp_path / "a", {}), _setting(tmp_path / "b", {})
    for setting, seed, epoch in ((a, 101, 50), (b, 100, 120), (b, 102, 50)):
        save_checkpoint(setting[4] / "checkpoints" / f"ma-x_seed{seed}.partial.pt", {"epoch": epoch})
    order = study._order([(a, [100, 101, 102]), (b, [100, 101, 102])])
    assert [(s[4].name, seed) for s, seed in order] == [
        ("b", 100),  # epoch 120
        ("a", 101),  # epoch 50, before b's (the given order)
        ("b", 102),
        ("a", 100),  # not started: seed by seed, each seed's settings in the given order
        ("b", 101),
        ("a", 102),
    ]
    c, d = _setting(tmp_path / "c", {}), _setting(tmp_path / "d", {})
    later = study._order([(c, [100, 101]), (d, [100, 101, 102])])  # none part-way: every setting's 100, then 101
    assert [(s[4].name, seed) for s, seed in later] == [("c", 100), ("d", 100), ("c", 101), ("d", 101), ("d", 102)]


def test_select_and_final_skip_committed_runs_and_choose_from_them(tmp_path, monkeypatch):
    """A fresh clone (no run folders) trains only what docs/baselines/results.json does not hold: chameleon_filtered's
    `luo` evidence is complete there, so nothing runs and each arm's choice comes from the committed selection."""
    committed = json.loads(study.COMMITTED.read_text())
    entries = [e for e in committed["evidence"] if (e["dataset"], e["protocol"]) == ("chameleon_filtered", "luo")]
    assert entries and all(len(e["select"]) == len(study.SELECT_SEEDS) for e in entries)
    calls = []
    monkeypatch.setattr(
        study, "_study", lambda s, seeds, threads, progress=True: calls.append((s[4], list(seeds))) or {}
    )
    study.select(tmp_path, 1, ("chameleon_filtered", "luo"))
    study.final(tmp_path, 1, [], ("chameleon_filtered", "luo"))
    assert calls == []
    for arm in {e["arm"] for e in entries}:
        mine = [e for e in entries if e["arm"] == arm]
        means = [sum(r["val"] for r in e["select"]) / len(e["select"]) for e in mine]
        spec, overrides, scores = study.chosen(tmp_path, "chameleon_filtered", "luo", arm)
        assert study.settings_name(spec, overrides) == mine[means.index(max(means))]["setting"]
        assert [round(m, 6) for _, m in scores] == [round(m, 6) for m in means]
    # an entry with some runs committed: only the others are trained
    done = {
        (e["setting"], r["seed"])
        for e in committed["evidence"]
        if (e["dataset"], e["protocol"]) == ("minesweeper", "luo")
        for r in e["select"]
    }
    study.select(tmp_path, 1, ("minesweeper", "luo"))
    names = {
        study._arm_dir(tmp_path, "select", "minesweeper", "luo", spec, o): study.settings_name(spec, o)
        for arm in study.EVIDENCE[("minesweeper", "luo")].values()
        for spec, o in arm
    }
    trained = {(names[folder], seed) for folder, seeds in calls for seed in seeds}
    assert done and trained == {(n, k) for n in names.values() for k in study.SELECT_SEEDS} - done
