"""studies.baselines plan: the node evidence's runs left and the time they take, from hand-made run records."""

import json

from graph_rma.engine import save_checkpoint
from studies import baselines as study

PLAIN = [("ma", {"heads": 8}), ("ma", {"heads": 8, "dropout": 0.5})]
SVGD = [("svgd:alpha=0.1,eps=8,layers=convs.0", {"heads": 8}), ("svgd:alpha=0.01,eps=8,layers=convs.0", {"heads": 8})]
ENTRY = ("chameleon_filtered", "luo")  # 200 epochs per run


def _runs(out, stage, setting, seeds, val, sec_per_epoch):
    """Finished run records as run_study writes them (only what collect reads)."""
    folder = study._arm_dir(out, stage, *ENTRY, *setting) / "runs" / "v"
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        metrics = {"test_metric": 0.5, "val_metric": val, "epochs": 200, "sec_per_epoch": sec_per_epoch}
        record = {"variant": setting[0], "seed": seed, "split": seed % 10, "metrics": metrics}
        (folder / f"seed{seed}.json").write_text(json.dumps(record))


def test_plan_counts_the_runs_left_and_times_them(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "COMMITTED", tmp_path / "no-committed-results.json")  # only the runs here
    monkeypatch.setattr(study, "EVIDENCE", {ENTRY: {"plain": PLAIN, "svgd": SVGD}})
    out = tmp_path / "runs"
    assert study.plan(out) == [
        f"chameleon_filtered:luo select {arm} `{study.settings_name(*s)}`: 3 of 3 left"
        for arm, settings in (("plain", PLAIN), ("svgd", SVGD))
        for s in settings
    ] + [
        "chameleon_filtered:luo final plain: up to 10 left (its choice waits for the selection)",
        "chameleon_filtered:luo final svgd: up to 10 left (its choice waits for the selection)",
        "chameleon_filtered:luo: up to 32 runs left of 200 epochs each (no finished run to time yet)",
    ]
    _runs(out, "select", PLAIN[0], [100, 101, 102], 0.9, 36.0)
    _runs(out, "select", PLAIN[1], [100, 101], 0.8, 36.0)  # the third cut short, saved part-way
    (study._arm_dir(out, "select", *ENTRY, *PLAIN[1]) / "checkpoints").mkdir()
    save_checkpoint(
        study._arm_dir(out, "select", *ENTRY, *PLAIN[1]) / "checkpoints" / "v_seed102.partial.pt", {"epoch": 50}
    )
    (study._arm_dir(out, "final", *ENTRY, *SVGD[1]) / "checkpoints").mkdir(parents=True)
    for seed, epoch in ((4, 20), (5, 30), (0, 150)):  # seed 0 finished (below): its stale save is not counted
        save_checkpoint(
            study._arm_dir(out, "final", *ENTRY, *SVGD[1]) / "checkpoints" / f"v_seed{seed}.partial.pt",
            {"epoch": epoch},
        )
    (study._arm_dir(out, "final", *ENTRY, *SVGD[1]) / "checkpoints" / "v_seed6.partial.pt").write_bytes(
        b"cut"
    )  # unreadable: 0
    _runs(out, "select", SVGD[0], [100, 101, 102], 0.7, 72.0)
    _runs(out, "select", SVGD[1], [100, 101, 102], 0.75, 72.0)  # svgd's choice: the higher validation metric
    _runs(out, "final", SVGD[1], [0, 1, 2, 3], 0.75, 72.0)
    # each run's epochs left times its setting's seconds per epoch: plain select (200 - 50) x 36 s = 1.5 h; plain
    # finals, its choice open, at its slowest setting's 36 s: 10 x 200 x 36 s = 20.0 h; svgd finals
    # (6 x 200 - 50) x 72 s = 23.0 h; in all 44.5 h
    assert study.plan(out) == [
        "chameleon_filtered:luo select plain `ma [dropout=0.5,heads=8]`: 1 of 3 left (1 saved part-way, at epoch 50: "
        "resumed from there); about 1.5 h at 36.00 s/epoch",
        "chameleon_filtered:luo final plain: up to 10 left (its choice waits for the selection); about 20.0 h at "
        "36.00 s/epoch",
        f"chameleon_filtered:luo final svgd `{study.settings_name(*SVGD[1])}`: 6 of 10 left (3 saved part-way, at "
        "epochs 0, 20, 30: resumed from there); about 23.0 h at 72.00 s/epoch",
        "chameleon_filtered:luo: up to 17 runs left, about 44.5 h of one thread (17 x 200 epochs, 100 of them saved "
        "part-way)",
    ]
    _runs(out, "select", PLAIN[1], [102], 0.8, 1.0)
    _runs(out, "final", PLAIN[0], range(10), 0.9, 1.0)
    _runs(out, "final", SVGD[1], range(4, 10), 0.75, 2.0)
    assert study.plan(out) == ["chameleon_filtered:luo: complete"]


def test_a_setting_without_finished_runs_is_timed_by_the_same_model_then_its_arm_then_the_entry():
    def entry(arm, setting, *seconds):
        return {
            "arm": arm,
            "setting": setting,
            "select": [{"sec_per_epoch": x} for x in seconds[:1]],
            "final": [{"sec_per_epoch": x} for x in seconds[1:]],
        }

    entries = [
        entry("plain", "a", 1.0, 3.0),
        entry("plain", "b"),
        entry("svgd", "c"),
        entry("svgd", "d", 5.0),
        entry("other", "e"),
    ]
    settings = {
        "a": ("ma", {"heads": 8}),
        "b": ("ma", {"heads": 8, "dropout": 0.5}),
        "c": ("svgd", {"heads": 8}),
        "d": ("svgd", {"heads": 1}),
        "e": ("ma", {"heads": 2}),
    }
    assert study._seconds_per_epoch(entries, settings, "a") == 2.0  # its own runs, selection and final
    assert study._seconds_per_epoch(entries, settings, "d") == 5.0
    assert study._seconds_per_epoch(entries, settings, "c") == 2.0  # the same model (heads=8), before its arm's 5.0
    assert study._seconds_per_epoch(entries, settings, "b") == 2.0  # another model: its arm
    assert study._seconds_per_epoch(entries, settings, "e") == 3.0  # alone: the entry's median of 1, 3, 5
    assert study._seconds_per_epoch([entry("plain", "a")], settings, "a") is None
