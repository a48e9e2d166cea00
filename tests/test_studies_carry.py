"""``studies.carry``: unfinished runs saved into a committed folder and put back on a machine without them."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from graph_rma.engine import save_checkpoint
from studies import carry

NODE = "runs/baselines/select/minesweeper-luo/svgd-8fd216/checkpoints/svgd-aaa88a_seed101.partial.pt"
TRAINING = "runs/webnlg2017/v4-s0"  # a graph-to-text run still training
FINISHED = "runs/webnlg2017/ma-s0"  # a finished one, its dev decodes under way


def _training(repo: Path, folder: str, step: int) -> None:
    run = repo / folder
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text('{"config": {"epochs": 30}}')
    save_checkpoint(run / "checkpoint.pt", {"step": step, "model": {"w": torch.full((3,), float(step))}})
    save_checkpoint(run / "best.pt", {"epoch": 1, "model": {"w": torch.full((3,), step + 0.5)}})


def _repo(root: Path) -> Path:
    save_checkpoint(root / NODE, {"epoch": 600, "model": {"w": torch.zeros(2)}})
    _training(root, TRAINING, 1100)
    _training(root, FINISHED, 900)
    (root / FINISHED / "train.json").write_text('{"history": []}')
    (root / FINISHED / "decode" / "beam5-lp1.0").mkdir(parents=True)
    (root / FINISHED / "decode" / "beam5-lp1.0" / "hyp.dev.txt").write_text("a b c\n")
    return root


def _manifest(repo: Path) -> dict:
    return json.loads((repo / "carry" / "manifest.json").read_text())


def _fresh_clone(repo: Path, tmp_path: Path) -> Path:
    """What a new machine has: the committed carry/, no runs/."""
    clone = tmp_path / "clone"
    shutil.copytree(repo / "carry", clone / "carry")
    return clone


def test_save_lists_each_unfinished_run_with_how_far_it_is_and_its_files(tmp_path):
    repo = _repo(tmp_path / "repo")
    lines = carry.save(repo)
    runs = {r["path"]: r for r in _manifest(repo)["runs"]}
    assert set(runs) == {NODE, TRAINING, FINISHED}
    assert runs[NODE]["kind"] == "node" and runs[NODE]["progress"] == [0, 600]
    assert runs[TRAINING]["progress"] == [0, 1100]  # not finished, at step 1100
    assert runs[FINISHED]["progress"] == [1, -1]  # finished: nothing left to resume
    files = {f["path"] for f in runs[TRAINING]["files"]}
    assert files == {f"{TRAINING}/{n}" for n in ("config.json", "checkpoint.pt", "best.pt")}
    finished_files = {f["path"] for f in runs[FINISHED]["files"]}
    assert f"{FINISHED}/checkpoint.pt" not in finished_files  # a finished run's resume state is not carried
    assert f"{FINISHED}/decode/beam5-lp1.0/hyp.dev.txt" in finished_files
    for run in runs.values():
        for f in run["files"]:
            copied = repo / "carry" / f.get("stored", f["path"])
            assert copied.read_bytes() == (repo / f["path"]).read_bytes()
            assert f["sha256"] == carry.sha256sum(copied) and f["bytes"] == copied.stat().st_size
    assert any(line.startswith(f"carried: {NODE} (node, epoch 600") for line in lines)


def test_restore_on_a_new_machine_gives_back_the_same_files(tmp_path):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    lines = carry.restore(clone)
    assert sorted(line.split(":")[0] for line in lines) == ["restored"] * 3
    for rel in (NODE, f"{TRAINING}/checkpoint.pt", f"{TRAINING}/best.pt", f"{FINISHED}/decode/beam5-lp1.0/hyp.dev.txt"):
        assert (clone / rel).read_bytes() == (repo / rel).read_bytes()
    assert not (clone / FINISHED / "checkpoint.pt").exists()
    listed = [line.split(" (")[0] + ", " + line.split(", ")[-1] for line in carry.listing(clone)[:3]]
    assert listed == [
        f"{NODE}: carried epoch 600, here epoch 600",
        f"{FINISHED}: carried finished, here finished",
        f"{TRAINING}: carried step 1100, here step 1100",
    ]


def test_restore_keeps_a_run_that_is_further_on_here(tmp_path):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    save_checkpoint(clone / NODE, {"epoch": 900, "model": {"w": torch.ones(2)}})
    before = (clone / NODE).read_bytes()
    lines = carry.restore(clone)
    assert f"kept: {NODE} (here epoch 900, carried epoch 600)" in lines
    assert (clone / NODE).read_bytes() == before


def test_restore_moves_a_run_that_is_behind_aside_and_puts_the_carried_one_there(tmp_path):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    _training(clone, TRAINING, 200)  # started again from scratch before the restore
    (clone / TRAINING / "stale.txt").write_text("from the restarted run")
    lines = carry.restore(clone)
    assert any(line.startswith(f"moved aside: {TRAINING} (here step 200)") for line in lines)
    assert (clone / TRAINING / "checkpoint.pt").read_bytes() == (repo / TRAINING / "checkpoint.pt").read_bytes()
    assert not (clone / TRAINING / "stale.txt").exists()  # the folder is the carried one, not a mixture
    aside = list((clone / "runs" / ".replaced").rglob("stale.txt"))
    assert len(aside) == 1  # nothing of the local run is deleted
    assert [r.path for r in carry.find_runs(clone / "runs", clone)].count(TRAINING) == 1  # the aside copy is no run


def test_restore_of_a_run_as_far_on_copies_only_the_missing_files(tmp_path):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    carry.restore(clone)
    (clone / FINISHED / "decode" / "beam5-lp1.0" / "hyp.dev.txt").unlink()
    (clone / FINISHED / "best.pt").write_bytes((clone / FINISHED / "best.pt").read_bytes())  # untouched content
    lines = carry.restore(clone)
    assert f"as far on here: {FINISHED} (finished; 1 missing file(s) copied)" in lines
    assert f"as far on here: {NODE} (epoch 600; 0 missing file(s) copied)" in lines
    assert (clone / FINISHED / "decode" / "beam5-lp1.0" / "hyp.dev.txt").read_text() == "a b c\n"


def test_a_driver_does_not_put_back_a_file_removed_from_a_run_as_far_on_here(tmp_path, capsys):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    carry.restore(clone)
    removed = clone / FINISHED / "decode" / "beam5-lp1.0" / "hyp.dev.txt"  # e.g. a decode found wrong here
    removed.unlink()
    carry.restore_before(clone / FINISHED, repo=clone)
    assert not removed.exists() and capsys.readouterr().err == ""
    assert f"as far on here: {FINISHED} (finished; left as it is)" in carry.restore(clone, fill=False)
    carry.restore(clone)  # asked for by name: the missing file is copied
    assert removed.read_text() == "a b c\n"


def test_a_corrupt_carried_file_is_refused_before_anything_is_written(tmp_path):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    best = clone / "carry" / TRAINING / "best.pt"
    best.write_bytes(best.read_bytes()[:-1] + b"X")
    with pytest.raises(SystemExit, match="best.pt: sha256 .* the manifest says .*; nothing restored"):
        carry.restore(clone)
    assert not (clone / "runs").exists()


def test_save_again_drops_the_runs_that_finished_and_keeps_the_earlier_save_of_those_too_large(tmp_path):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    (repo / NODE).unlink()  # the node run finished (its save is removed then)
    save_checkpoint(repo / TRAINING / "checkpoint.pt", {"step": 1700, "model": {"w": torch.zeros(3)}})  # trained on
    lines = carry.save(repo, max_mb=0.0005)  # 500 bytes: the generator runs' checkpoints are larger
    assert f"removed from carry: {NODE}" in lines
    assert any(
        line.startswith(f"not carried anew: {TRAINING} (")
        and line.endswith("its earlier save stays carried (step 1100)")
        for line in lines
    )
    assert {r["path"]: r["progress"] for r in _manifest(repo)["runs"]} == {TRAINING: [0, 1100], FINISHED: [1, -1]}
    assert f"restored: {TRAINING} (step 1100)" in carry.restore(_fresh_clone(repo, tmp_path))
    fresh = _repo(tmp_path / "fresh")  # nothing carried before: nothing to keep
    lines = carry.save(fresh, max_mb=0.0005)
    assert any(line.startswith(f"not carried: {TRAINING} (") for line in lines)
    assert not (fresh / "carry").exists()  # the node save is larger than 500 bytes too


def test_a_run_saved_during_the_copy_is_copied_again_as_one_moment(tmp_path, monkeypatch):
    repo = _repo(tmp_path / "repo")
    copy, calls = carry._copy_in, []

    def copy_while_training(src, dst):
        written = copy(src, dst)
        calls.append(src)
        if src == repo / TRAINING / "checkpoint.pt" and calls.count(src) == 1:  # the run's next save lands mid-copy
            save_checkpoint(repo / TRAINING / "checkpoint.pt", {"step": 1200, "model": {"w": torch.zeros(3)}})
        return written

    monkeypatch.setattr(carry, "_copy_in", copy_while_training)
    carry.save(repo)
    run = next(r for r in _manifest(repo)["runs"] if r["path"] == TRAINING)
    assert run["progress"] == [0, 1200]  # how far the copy is, not the run when the copy began
    entry = next(f for f in run["files"] if f["path"] == f"{TRAINING}/checkpoint.pt")
    copied = repo / "carry" / entry.get("stored", entry["path"])
    assert copied.read_bytes() == (repo / TRAINING / "checkpoint.pt").read_bytes()
    assert calls.count(repo / TRAINING / "checkpoint.pt") == 2
    assert len(list((repo / "carry" / TRAINING).glob("checkpoint.pt*"))) == 1  # the first copy, never committed, went


def test_nothing_to_carry_or_restore_says_so_in_one_line(tmp_path):
    assert carry.save(tmp_path) == ["nothing to carry: no unfinished run under runs"]
    assert carry.restore(tmp_path) == ["nothing carried (carry/manifest.json lists no run)"]


def test_a_driver_restores_only_the_runs_under_its_folder_before_it_trains(tmp_path, capsys):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    carry.restore_before(clone / "runs" / "baselines", repo=clone)
    assert (clone / NODE).is_file() and not (clone / TRAINING).exists()
    assert capsys.readouterr().err == f"carry: restored: {NODE} (epoch 600)\n"
    carry.restore_before(clone / "runs" / "baselines", repo=clone)  # again: nothing to do, nothing said
    carry.restore_before(tmp_path / "elsewhere", repo=clone)  # a folder outside the repository: left alone
    assert capsys.readouterr().err == ""
    carry.restore_before(clone / TRAINING, repo=clone)  # a driver given the run folder itself
    assert (clone / TRAINING / "checkpoint.pt").read_bytes() == (repo / TRAINING / "checkpoint.pt").read_bytes()
    assert not (clone / FINISHED).exists()


def test_a_carried_save_of_a_run_finished_here_is_not_put_back(tmp_path):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    finished = clone / NODE.replace(".partial.pt", ".pt")  # the run finished here; its part-way save is gone
    save_checkpoint(finished, {"epoch": 2000})
    assert f"kept: {NODE} (here finished, carried epoch 600)" in carry.restore(clone)
    assert not (clone / NODE).exists()


def test_the_node_study_puts_the_carried_saves_back_before_it_plans_or_trains(tmp_path, monkeypatch, capsys):
    from studies import baselines

    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    monkeypatch.setattr(carry, "REPO", clone)
    out = clone / "runs" / "baselines"
    monkeypatch.setattr("sys.argv", ["baselines", "plan", "--out", str(out), "--evidence", "minesweeper:luo"])
    baselines.main()
    assert (clone / NODE).read_bytes() == (repo / NODE).read_bytes()
    assert f"carry: restored: {NODE} (epoch 600)" in capsys.readouterr().err


def test_the_generator_study_puts_its_carried_run_folder_back_before_it_decodes(tmp_path, monkeypatch, capsys):
    from studies import webnlg2017

    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    clone = _fresh_clone(repo, tmp_path)
    monkeypatch.setattr(carry, "REPO", clone)
    with pytest.raises(SystemExit):  # the stand-in run has not trained its epochs: dev refuses it, after the restore
        webnlg2017.main(["dev", "--round", "v4-s0", "--run", str(clone / TRAINING), "--meteor", "none"])
    assert (clone / TRAINING / "best.pt").read_bytes() == (repo / TRAINING / "best.pt").read_bytes()
    assert f"carry: restored: {TRAINING} (step 1100)" in capsys.readouterr().err


def _commit(repo: Path) -> None:
    """Commit everything under ``repo`` (a git repository, made on the first call)."""
    import subprocess

    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    if not (repo / ".git").is_dir():
        subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "carry"], check=True)


def test_a_committed_carried_file_is_never_rewritten_or_removed_and_prune_removes_it(tmp_path):
    repo = _repo(tmp_path / "repo")
    carry.save(repo)
    _commit(repo)
    committed = {p: p.read_bytes() for p in (repo / "carry").rglob("*.pt")}
    save_checkpoint(repo / TRAINING / "checkpoint.pt", {"step": 1700, "model": {"w": torch.zeros(3)}})  # trained on
    (repo / NODE).unlink()  # the node run finished
    new_size = (repo / TRAINING / "checkpoint.pt").stat().st_size
    lines = carry.save(repo)
    assert {p: p.read_bytes() for p in committed} == committed  # not one committed copy rewritten or removed
    run = next(r for r in _manifest(repo)["runs"] if r["path"] == TRAINING)
    assert run["progress"] == [0, 1700]  # read from the new copy, not the committed one at the run's path
    entry = next(f for f in run["files"] if f["path"] == f"{TRAINING}/checkpoint.pt")
    assert entry["stored"] == f"{TRAINING}/checkpoint.pt.{entry['sha256'][:12]}"
    assert "stored" not in next(f for f in run["files"] if f["path"] == f"{TRAINING}/best.pt")  # unchanged: reused
    assert f"this save adds {new_size / 1e6:.1f} MB to carry/ against the last commit" in lines
    stale = (repo / "carry" / NODE).stat().st_size + (repo / "carry" / TRAINING / "checkpoint.pt").stat().st_size
    assert any(line.startswith(f"stale: {stale / 1e6:.1f} MB of committed files") for line in lines)
    clone = _fresh_clone(repo, tmp_path)
    assert f"restored: {TRAINING} (step 1700)" in carry.restore(clone)
    assert (clone / TRAINING / "checkpoint.pt").read_bytes() == (repo / TRAINING / "checkpoint.pt").read_bytes()
    assert carry.listing(repo)[-2].startswith("stale: 2 file(s)")
    (repo / "carry" / "never-committed.bin").write_bytes(b"x" * 10**6)  # stale too, but free to remove
    stale = {NODE: (repo / "carry" / NODE).stat().st_size}
    stale[f"{TRAINING}/checkpoint.pt"] = (repo / "carry" / TRAINING / "checkpoint.pt").stat().st_size
    # a budget that holds one of the two committed stale files: one goes, the other stays for a later prune
    lines = carry.prune(repo, budget_mb=(max(stale.values()) + 1) / 1e6)
    gone = [rel for rel in stale if not (repo / "carry" / rel).exists()]
    assert len(gone) == 1 and not (repo / "carry" / "never-committed.bin").exists()
    (left,) = set(stale) - set(gone)
    assert [line.split(" (")[0] for line in lines] == [
        f"left in carry: {left}",
        "removed from carry: never-committed.bin",
        f"removed from carry: {gone[0]}",
    ]
    assert [line.split(" (")[0] for line in carry.prune(repo)] == [f"removed from carry: {left}"]
    assert carry.prune(repo) == ["nothing stale in carry/"]
    assert "restored: " + TRAINING + " (step 1700)" in carry.restore(_fresh_clone(repo, tmp_path / "again"))


def _files_mb(repo: Path, folder: str) -> float:
    return sum(p.stat().st_size for p in (repo / folder).rglob("*") if p.is_file()) / 1e6


def test_over_the_budget_the_run_furthest_on_is_carried_and_the_others_keep_their_earlier_save(tmp_path):
    repo = _repo(tmp_path / "repo")
    other = "runs/webnlg2017/evidence/final-v4-s0/svgd-s0"
    _training(repo, other, 1700)  # further on than TRAINING (1100), as large
    small = (repo / NODE).stat().st_size / 1e6 + _files_mb(repo, FINISHED)
    budget = small + _files_mb(repo, other) + 1e-6  # the small runs and one run still training
    lines = carry.save(repo, budget_mb=budget)
    assert {r["path"] for r in _manifest(repo)["runs"]} == {NODE, FINISHED, other}
    assert any(line.startswith(f"not carried: {TRAINING} (its copies would add ") for line in lines)
    _commit(repo)
    save_checkpoint(repo / other / "checkpoint.pt", {"step": 1900, "model": {"w": torch.zeros(3)}})
    _training(repo, TRAINING, 2500)  # now the furthest on
    lines = carry.save(repo, budget_mb=_files_mb(repo, TRAINING) + 1e-6)
    assert any(line.startswith(f"carried: {TRAINING} (generator, step 2500") for line in lines)
    assert any(
        line.startswith(f"not carried anew: {other} (its copies would add ")
        and line.endswith("its earlier save stays carried (step 1700)")
        for line in lines
    )
    runs = {r["path"]: r["progress"] for r in _manifest(repo)["runs"]}
    assert runs == {NODE: [0, 600], FINISHED: [1, -1], TRAINING: [0, 2500], other: [0, 1700]}
    restored = carry.restore(_fresh_clone(repo, tmp_path))
    assert f"restored: {other} (step 1700)" in restored and f"restored: {TRAINING} (step 2500)" in restored


def test_a_finished_run_whose_test_set_is_decoded_is_carried_without_its_weights(tmp_path):
    repo = _repo(tmp_path / "repo")
    test = repo / FINISHED / "decode" / "test"
    test.mkdir(parents=True)
    (test / "decoded.test.json").write_text('{"setting": "beam5-lp1.0"}')
    (test / "hyp.test.txt").write_text("a b\n")
    carry.save(repo)
    files = {f["path"] for r in _manifest(repo)["runs"] if r["path"] == FINISHED for f in r["files"]}
    assert f"{FINISHED}/best.pt" in files  # decoded but not scored yet: the test step may still need it
    (test / "metrics.test.webnlg2017.json").write_text('{"all": {"BLEU": 50.0}}')
    carry.save(repo)
    runs = {r["path"]: r for r in _manifest(repo)["runs"]}
    files = {f["path"] for f in runs[FINISHED]["files"]}
    assert f"{FINISHED}/best.pt" not in files and f"{FINISHED}/checkpoint.pt" not in files
    assert {f"{FINISHED}/decode/test/hyp.test.txt", f"{FINISHED}/decode/test/metrics.test.webnlg2017.json"} <= files
    assert f"{TRAINING}/best.pt" in {f["path"] for f in runs[TRAINING]["files"]}  # a run still training keeps both
    clone = _fresh_clone(repo, tmp_path)
    carry.restore(clone)
    assert (clone / FINISHED / "decode" / "test" / "hyp.test.txt").read_text() == "a b\n"
    assert not (clone / FINISHED / "best.pt").exists()
    assert f"as far on here: {FINISHED} (finished; left as it is)" in carry.restore(clone, fill=False)
    assert any(
        line.startswith(f"{FINISHED}: carried finished") and line.endswith("here finished")
        for line in carry.listing(clone)
    )


def _large_checkpoint(repo: Path, step: int) -> int:
    """A part-way run's checkpoint of float32 weights over PACK_FROM (Adam's state beside them); its size."""
    g = torch.Generator().manual_seed(step)
    w = torch.randn(300_000, generator=g)
    state = {"step": step, "model": {"w": w}, "optim": {"exp_avg": 1e-3 * w, "exp_avg_sq": 1e-6 * w.square()}}
    save_checkpoint(repo / TRAINING / "checkpoint.pt", state)
    return (repo / TRAINING / "checkpoint.pt").stat().st_size


def test_a_large_checkpoint_is_carried_packed_smaller_and_put_back_byte_for_byte(tmp_path):
    repo = _repo(tmp_path / "repo")
    size = _large_checkpoint(repo, 1300)
    assert size > carry.PACK_FROM
    packed_mb = len(carry._pack((repo / TRAINING / "checkpoint.pt").read_bytes())) / 1e6
    assert packed_mb < 0.9 * size / 1e6  # float32 tensors: the shuffled exponent bytes compress
    # a budget the run fits packed and would not fit unpacked: what save counts is what it commits
    lines = carry.save(repo, budget_mb=(packed_mb + size / 1e6) / 2)
    run = next(r for r in _manifest(repo)["runs"] if r["path"] == TRAINING)
    assert run["progress"] == [0, 1300]  # read from the packed copy
    entry = next(f for f in run["files"] if f["path"] == f"{TRAINING}/checkpoint.pt")
    assert entry["stored"] == f"{TRAINING}/checkpoint.pt{carry.PACKED}" and entry["bytes"] == size
    assert entry["sha256"] == carry.sha256sum(repo / TRAINING / "checkpoint.pt")  # of the run's file, not the copy
    stored = repo / "carry" / entry["stored"]
    assert stored.stat().st_size == round(packed_mb * 1e6)
    assert any(line.startswith(f"carried: {TRAINING} (generator, step 1300") for line in lines)
    assert "stored" not in next(f for f in run["files"] if f["path"] == f"{TRAINING}/best.pt")  # small: as it is
    clone = _fresh_clone(repo, tmp_path)
    assert f"restored: {TRAINING} (step 1300)" in carry.restore(clone)
    assert (clone / TRAINING / "checkpoint.pt").read_bytes() == (repo / TRAINING / "checkpoint.pt").read_bytes()
    assert carry.save(repo)[-1] == "this save adds 0.0 MB to carry/ against the last commit"  # known content: reused
    damaged = bytearray(stored.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    stored.write_bytes(bytes(damaged))
    again = _fresh_clone(repo, tmp_path / "again")
    with pytest.raises(SystemExit, match=r"checkpoint.pt.blosc2: .*; nothing restored"):
        carry.restore(again)
    assert not (again / "runs").exists()
    (again / "carry" / entry["stored"]).write_bytes(bytes(damaged[:10]))  # truncated: blosc2 cannot unpack it at all
    with pytest.raises(SystemExit, match=r"checkpoint.pt.blosc2: not unpackable .*; nothing restored"):
        carry.restore(again)


def test_a_copy_stored_unpacked_by_an_earlier_save_is_still_restored_and_reused(tmp_path, monkeypatch):
    repo = _repo(tmp_path / "repo")
    _large_checkpoint(repo, 1400)
    with monkeypatch.context() as m:
        m.setattr(carry, "PACK_FROM", 1 << 40)  # a save from before checkpoints were packed
        carry.save(repo)
    assert (repo / "carry" / TRAINING / "checkpoint.pt").is_file()
    carry.save(repo)  # packing now: the same content is already stored, as it is
    entry = next(f for r in _manifest(repo)["runs"] for f in r["files"] if f["path"] == f"{TRAINING}/checkpoint.pt")
    assert "stored" not in entry and not list((repo / "carry" / TRAINING).glob(f"*{carry.PACKED}"))
    clone = _fresh_clone(repo, tmp_path)
    assert f"restored: {TRAINING} (step 1400)" in carry.restore(clone)
    assert (clone / TRAINING / "checkpoint.pt").read_bytes() == (repo / TRAINING / "checkpoint.pt").read_bytes()


def test_without_blosc2_a_packed_copy_is_refused_in_one_line(tmp_path, monkeypatch):
    import sys

    repo = _repo(tmp_path / "repo")
    _large_checkpoint(repo, 1500)
    carry.save(repo)
    monkeypatch.setitem(sys.modules, "blosc2", None)  # not installed
    with pytest.raises(SystemExit, match=r"^studies.carry: packed checkpoints need blosc2 \(the dev extra"):
        carry.restore(_fresh_clone(repo, tmp_path))
