"""Part-way runs carried in the repository, so that a long study goes on when a session gets a new machine.

    python -m studies.carry save      # copy the unfinished runs under runs/ into carry/ (committed), with a manifest
    python -m studies.carry restore   # put each carried run back under runs/ unless the one there is as far on
    python -m studies.carry list      # what is carried, how far each run is, and where runs/ stands

``runs/`` is not committed, and a session that starts on a new machine finds it empty: every run saved part-way there
(hours of one CPU thread) would start again. ``save`` copies what the study drivers need to continue each unfinished
run into ``carry/``, which is committed; ``restore`` on the new machine puts it back, after which the same study
commands resume as if the machine had been kept. What a run is, and how far it is:

* a node run saved part-way (``*.partial.pt``, :mod:`graph_rma.tasks.node_training`): that one file; how far: its
  epoch (finished, when the run's checkpoint is beside it: a restored save never shadows a run finished here);
* a graph-to-text run folder (``config.json`` beside ``checkpoint.pt`` or ``best.pt``,
  :mod:`graph_rma.tasks.graph_to_text`): every file in it, except ``checkpoint.pt`` once ``train.json`` says the
  run is finished (nothing is left to resume; its ``best.pt`` and decodes are what the study steps read); how far:
  finished, then the training step of ``checkpoint.pt``.

``carry/manifest.json`` lists each run with its files (path under the repository, SHA-256, bytes) and how far it is.
``restore`` checks every file's SHA-256 before it writes anything; a run already under ``runs/`` is replaced only
when the carried one is further on (the local folder is first moved aside to ``runs/.replaced/``), and when both
are as far on, only the files missing locally are copied (e.g. the decodes of a finished run). A run larger than
``--max-mb`` is not carried (one line says so). Files of runs no longer carried are removed from ``carry/``; git
keeps them in its history, so ``save`` and commit ``carry/`` once, at the end of a session. What is carried is in
every clone and every copy of the working tree: a graph-to-text run still training (about 140 MB: its
``checkpoint.pt`` holds Adam's state) is carried only with ``--max-mb 160``, when losing it costs more than that.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from graph_rma.data.root import sha256sum
from graph_rma.engine import CheckpointError, atomic_write_bytes, load_checkpoint, one_line_errors, write_json

REPO = Path(__file__).resolve().parents[1]
MANIFEST = "manifest.json"
#: A run larger than this (MB, all its files) is not carried unless ``--max-mb`` says otherwise: a node run's save
#: (about 2 MB) and a finished graph-to-text run (its ``best.pt``, about 35 MB, and decodes) are; a graph-to-text run
#: still training (about 140 MB with Adam's state) only when asked.
MAX_MB = 48.0


@dataclass(frozen=True)
class Run:
    """One unfinished run: ``kind`` (``node`` or ``generator``), ``path`` (the file or folder, relative to the
    repository), ``files`` (relative to the repository, sorted) and ``progress``: (1, -1) when finished, else (0,
    the epoch or step its save holds, -1 when unreadable); larger is further on."""

    kind: str
    path: str
    files: Tuple[str, ...]
    progress: Tuple[int, ...]


def _checkpoint_field(path: Path, key: str) -> int:
    """``key`` of a checkpoint as an int; -1 when the file is unreadable (a run that starts again)."""
    try:
        return int(load_checkpoint(path)[key])
    except (CheckpointError, KeyError, TypeError, ValueError, OSError):
        return -1


def _progress(kind: str, path: Path) -> Tuple[int, ...]:
    """How far the run at ``path`` is (see :class:`Run`): a node save's epoch; a graph-to-text folder's
    (finished, step of ``checkpoint.pt``)."""
    if kind == "node":  # finished when the run's checkpoint is beside its part-way save (X.pt beside X.partial.pt)
        done = path.with_name(path.name[: -len(".partial.pt")] + ".pt").is_file()
        return (int(done), -1 if done else _checkpoint_field(path, "epoch"))
    done = (path / "train.json").is_file()
    return (int(done), -1 if done else _checkpoint_field(path / "checkpoint.pt", "step"))


def _generator_run(folder: Path, repo: Path) -> Optional[Run]:
    if not (folder / "config.json").is_file():
        return None
    if not ((folder / "checkpoint.pt").is_file() or (folder / "best.pt").is_file()):
        return None
    done = (folder / "train.json").is_file()
    files = sorted(
        p.relative_to(repo).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and not (done and p == folder / "checkpoint.pt")
    )
    return Run("generator", folder.relative_to(repo).as_posix(), tuple(files), _progress("generator", folder))


def find_runs(runs: Path, repo: Path) -> List[Run]:
    """Every unfinished run under ``runs`` (see the module): node runs saved part-way and graph-to-text run folders
    (finished ones included: their decodes may still be going on), in path order."""
    found: List[Run] = []
    if not runs.is_dir():
        return found
    folders = sorted({p.parent for p in runs.rglob("config.json")} - {runs})
    generators = [r for r in (_generator_run(f, repo) for f in folders) if r is not None]
    inside = [repo / r.path for r in generators]
    for save in sorted(runs.rglob("*.partial.pt")):
        if any(folder in save.parents for folder in inside) or ".replaced" in save.parts:
            continue
        rel = save.relative_to(repo).as_posix()
        found.append(Run("node", rel, (rel,), _progress("node", save)))
    found += [r for r in generators if ".replaced" not in Path(r.path).parts]
    return sorted(found, key=lambda r: r.path)


def _stamp(repo: Path, files: Sequence[str]) -> List[Tuple[str, int, int]]:
    return [(f, (repo / f).stat().st_mtime_ns, (repo / f).stat().st_size) for f in files if (repo / f).is_file()]


def _copy(src: Path, dst: Path) -> None:
    """``src`` to ``dst`` atomically (a reader never sees half a file)."""
    atomic_write_bytes(dst, src.read_bytes())


def _snapshot(run: Run, repo: Path, carry: Path, tries: int = 3) -> Dict:
    """Copy ``run``'s files into ``carry``; again when a file changed during the copy (a training that saved
    meanwhile), so that the copies are of one moment of the run. Its manifest entry, with how far the copies are."""
    for _ in range(tries):
        before = _stamp(repo, run.files)
        entries = []
        for rel, _mtime, size in before:
            dst, digest = carry / rel, sha256sum(repo / rel)
            if not (dst.is_file() and dst.stat().st_size == size and sha256sum(dst) == digest):
                _copy(repo / rel, dst)
            entries.append({"path": rel, "sha256": digest, "bytes": size})  # the stamps below say it is the copy's
        if _stamp(repo, run.files) == before:
            progress = _progress(run.kind, carry / run.path)
            return {"kind": run.kind, "path": run.path, "progress": list(progress), "files": entries}
    raise SystemExit(f"{run.path} kept changing while it was copied ({tries} tries); save again")


def _read_manifest(carry: Path) -> Dict:
    path = carry / MANIFEST
    if not path.is_file():
        return {"runs": []}
    return json.loads(path.read_text(encoding="utf-8"))


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def save(repo: Path = REPO, runs: str = "runs", carry: str = "carry", max_mb: float = MAX_MB) -> List[str]:
    """Copy every run of :func:`find_runs` no larger than ``max_mb`` into ``repo/carry`` and write its manifest;
    remove from ``carry`` the files of runs no longer there. The lines it prints."""
    out, lines, kept = repo / carry, [], []
    for run in find_runs(repo / runs, repo):
        size = sum((repo / f).stat().st_size for f in run.files if (repo / f).is_file())
        if size > max_mb * 1e6:
            lines.append(f"not carried: {run.path} ({_mb(size)}, over --max-mb {max_mb:g})")
            continue
        kept.append(_snapshot(run, repo, out))
        lines.append(f"carried: {run.path} ({run.kind}, {describe(run.kind, kept[-1]['progress'])}, {_mb(size)})")
    wanted = {out / f["path"] for r in kept for f in r["files"]} | {out / MANIFEST}
    for path in sorted(out.rglob("*")) if out.is_dir() else []:
        if path.is_file() and path not in wanted:
            path.unlink()
            lines.append(f"removed from {carry}: {path.relative_to(out).as_posix()}")
    for folder in sorted((p for p in out.rglob("*") if p.is_dir()), reverse=True) if out.is_dir() else []:
        if not any(folder.iterdir()):
            folder.rmdir()
    if kept or out.is_dir():
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        write_json(out / MANIFEST, {"saved": stamp, "runs": kept})
    return lines or ["nothing to carry: no unfinished run under " + runs]


def describe(kind: str, progress: Sequence[int]) -> str:
    """How far a run is, in words: ``finished``, else ``epoch 600`` (node) or ``step 11300`` (generator)."""
    if progress[0]:
        return "finished"
    return f"{'epoch' if kind == 'node' else 'step'} {progress[1]}" if progress[1] >= 0 else "unreadable save"


def _local(entry: Dict, repo: Path) -> Optional[Run]:
    """The run under ``runs/`` at the carried run's path, if any."""
    path = repo / entry["path"]
    if entry["kind"] == "node":
        progress = _progress("node", path)
        return Run("node", entry["path"], (entry["path"],), progress) if path.is_file() or progress[0] else None
    return _generator_run(path, repo) if path.is_dir() else None


def _verify(entry: Dict, carry: Path) -> None:
    for f in entry["files"]:
        src = carry / f["path"]
        if not src.is_file():
            raise SystemExit(f"{src}: listed in {carry / MANIFEST} but missing; nothing restored")
        got = sha256sum(src)
        if got != f["sha256"]:
            raise SystemExit(f"{src}: sha256 {got}, the manifest says {f['sha256']}; nothing restored")


def restore(repo: Path = REPO, carry: str = "carry", under: Optional[str] = None) -> List[str]:
    """Put every carried run back (see the module), or only those at or under ``under`` (a path relative to the
    repository); every carried file is checked before any is written. The lines it prints."""
    src, manifest = repo / carry, _read_manifest(repo / carry)
    if under is not None:
        inside = [e for e in manifest["runs"] if Path(under) in (Path(e["path"]), *Path(e["path"]).parents)]
        manifest["runs"] = inside
    for entry in manifest["runs"]:
        _verify(entry, src)
    lines = []
    for entry in manifest["runs"]:
        path, carried, local = entry["path"], tuple(entry["progress"]), _local(entry, repo)
        files = [f["path"] for f in entry["files"]]
        how_far = describe(entry["kind"], carried)
        if local is not None and local.progress > carried:
            lines.append(f"kept: {path} (here {describe(local.kind, local.progress)}, carried {how_far})")
            continue
        if local is not None and local.progress == carried:
            missing = [f for f in files if not (repo / f).is_file()]
            for f in missing:
                _copy(src / f, repo / f)
            lines.append(f"as far on here: {path} ({how_far}; {len(missing)} missing file(s) copied)")
            continue
        if local is not None:
            aside = repo / "runs" / ".replaced" / datetime.datetime.now().strftime("%Y%m%d-%H%M%S") / path
            aside.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(repo / path), str(aside))
            lines.append(
                f"moved aside: {path} (here {describe(local.kind, local.progress)}) -> {aside.relative_to(repo)}"
            )
        for f in files:
            _copy(src / f, repo / f)
        lines.append(f"restored: {path} ({how_far})")
    return lines or [f"nothing carried ({carry / Path(MANIFEST)} lists no run)"]


def restore_before(out: Path, repo: Optional[Path] = None) -> None:
    """What a study driver calls before it trains into ``out``: the carried runs under ``out`` are put back first
    (:func:`restore`), so that a new machine's first command continues them instead of starting them again (and
    then overwriting their carried saves with its own). Prints what it restored or moved aside; silent when
    ``out`` is outside the repository or nothing was carried there."""
    repo = REPO if repo is None else repo
    try:
        under = Path(out).resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return
    for line in restore(repo, under=under):
        if line.startswith(("restored:", "moved aside:")):
            print(f"carry: {line}", file=sys.stderr)


def listing(repo: Path = REPO, carry: str = "carry") -> List[str]:
    """One line per carried run: how far it is carried, and how far the same run is under ``runs/``."""
    manifest, lines = _read_manifest(repo / carry), []
    for entry in manifest["runs"]:
        local = _local(entry, repo)
        here = describe(local.kind, local.progress) if local is not None else "absent"
        size = sum(f["bytes"] for f in entry["files"])
        lines.append(
            f"{entry['path']}: carried {describe(entry['kind'], entry['progress'])} ({_mb(size)}), here {here}"
        )
    saved = f" (saved {manifest['saved']})" if manifest.get("saved") else ""
    return lines + [f"{len(manifest['runs'])} run(s) carried{saved}"]


def main(argv: Optional[Sequence[str]] = None) -> None:
    one_line_errors()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["save", "restore", "list"])
    p.add_argument("--max-mb", type=float, default=MAX_MB, help=f"save: the largest run carried (default {MAX_MB:g})")
    a = p.parse_args(argv)
    if a.max_mb <= 0:
        p.error(f"argument --max-mb: must be positive, got {a.max_mb:g}")
    lines = {"save": lambda: save(max_mb=a.max_mb), "restore": restore, "list": listing}[a.step]()
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
