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
  run is finished (nothing is left to resume; its ``best.pt`` and decodes are what the study steps read), and
  ``best.pt`` too once its test set is decoded and scored (:func:`tested`; the study reports read the decodes, and
  a driver asked to decode again says in one line that the checkpoint is missing); how far: finished, then the
  training step of ``checkpoint.pt``.

``carry/manifest.json`` lists each run with its files (path under the repository, SHA-256, bytes) and how far it is.
``restore`` checks every file's SHA-256 before it writes anything; a run already under ``runs/`` is replaced only
when the carried one is further on (the local folder is first moved aside to ``runs/.replaced/``), and when both
are as far on, only the files missing locally are copied (e.g. the decodes of a finished run; the study drivers'
own restore, :func:`restore_before`, leaves such a run as it is). A run larger than
``--max-mb`` is not copied (one line says so); what an earlier save carried of it stays carried.

What a session submits is limited (256 MiB of changes, counted as text: a binary file replaced counts as the old
bytes removed plus the new ones added), and git keeps every committed copy in its history, so ``save`` never
rewrites or deletes a committed file of ``carry/``: a file whose content changed is stored beside the committed one
(``NAME.<sha256 prefix>``, the manifest's ``stored``), a file whose content is already stored anywhere in ``carry/``
is not copied again, and a committed file that no run needs any longer stays as *stale* until ``prune`` removes it
(in a session that carries little: removing counts as much as adding). Files never committed are rewritten and
removed freely. ``save`` says how many MB it adds against the last commit, at most ``--budget-mb`` (default 200):
node saves and finished runs take the budget first, then the runs still training, the furthest on first; a run
that does not fit is not copied (one line says so) and its earlier save, if ``carry/`` holds one, stays carried.
Save and commit ``carry/`` once, at the end of a session. What is carried is in every clone and every copy of the
working tree: a graph-to-text run still training (about 140 MB: its ``checkpoint.pt`` holds Adam's state) is
carried only with ``--max-mb 160``, when losing it costs more than that.

Checkpoints (``*.pt``) of 1 MB or more are stored packed (``NAME.blosc2``: blosc2's byte shuffle, then zstd;
lossless): float32 weights and Adam's moments come to about 0.82 of their size, so that a part-way graph-to-text run
takes about 115 MB and two fit one session's submission (``--budget-mb 240``). The manifest's SHA-256 and bytes are
the run file's, checked on the unpacked bytes; copies an earlier save stored unpacked stay as they are and are
reused.

    python -m studies.carry prune     # remove the stale files (committed copies no carried run needs);
                                      # --budget-mb N: at most N MB of committed ones, the rest later
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from graph_rma.data.root import sha256sum
from graph_rma.engine import CheckpointError, atomic_write_bytes, load_checkpoint, one_line_errors, write_json

REPO = Path(__file__).resolve().parents[1]
MANIFEST = "manifest.json"
#: The suffix of a run file stored packed in ``carry/`` (:func:`_pack`).
PACKED = ".blosc2"
#: Checkpoints from this size (bytes) are stored packed: the graph-to-text ones (35 and 106 MB), not the few-kB ones.
PACK_FROM = 1 << 20
#: A run larger than this (MB, all its files) is not carried unless ``--max-mb`` says otherwise: a node run's save
#: (about 2 MB) and a finished graph-to-text run (its decodes, and its ``best.pt``, about 35 MB, until its test set
#: is decoded) are; a graph-to-text run still training (about 140 MB with Adam's state) only when asked.
MAX_MB = 48.0
#: The most a ``save`` may add to ``carry/`` against the last commit (MB), under the 256 MiB a session may submit.
BUDGET_MB = 200.0


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
    """``key`` of a checkpoint as an int (a packed copy in ``carry/`` is read unpacked); -1 when the file is
    unreadable (a run that starts again)."""
    try:
        if not path.name.endswith(PACKED):
            return int(load_checkpoint(path)[key])
        with tempfile.TemporaryDirectory() as tmp:
            atomic_write_bytes(Path(tmp) / "checkpoint.pt", read_stored(path))
            return int(load_checkpoint(Path(tmp) / "checkpoint.pt")[key])
    except (CheckpointError, KeyError, TypeError, ValueError, OSError, RuntimeError):
        return -1


def _progress(kind: str, path: Path) -> Tuple[int, ...]:
    """How far the run at ``path`` is (see :class:`Run`): a node save's epoch; a graph-to-text folder's
    (finished, step of ``checkpoint.pt``)."""
    if kind == "node":  # finished when the run's checkpoint is beside its part-way save (X.pt beside X.partial.pt)
        done = path.with_name(path.name[: -len(".partial.pt")] + ".pt").is_file()
        return (int(done), -1 if done else _checkpoint_field(path, "epoch"))
    done = (path / "train.json").is_file()
    return (int(done), -1 if done else _checkpoint_field(path / "checkpoint.pt", "step"))


def tested(folder: Path) -> bool:
    """Whether a graph-to-text run's test set is decoded and scored (``decode/test/decoded.test.json`` beside a
    ``metrics.test.*.json``): the study drivers decode each run's test set once, after its dev decodes, so nothing
    is decoded from its weights any more."""
    test = folder / "decode" / "test"
    return (test / "decoded.test.json").is_file() and any(test.glob("metrics.test.*.json"))


def _generator_run(folder: Path, repo: Path) -> Optional[Run]:
    if not (folder / "config.json").is_file():
        return None
    done = (folder / "train.json").is_file()
    weights = (folder / "checkpoint.pt").is_file() or (folder / "best.pt").is_file()
    if not (weights or (done and tested(folder))):  # a tested run is carried, and put back, without its weights
        return None
    left_out = {folder / "checkpoint.pt"} if done else set()
    if done and tested(folder):
        left_out.add(folder / "best.pt")
    files = sorted(p.relative_to(repo).as_posix() for p in folder.rglob("*") if p.is_file() and p not in left_out)
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


def _packs(rel: str, size: int) -> bool:
    """Whether the run file ``rel`` of ``size`` bytes is stored packed (:func:`_pack`): checkpoints (``*.pt``)
    from :data:`PACK_FROM` bytes up to blosc2's 2 GB."""
    return rel.endswith(".pt") and PACK_FROM <= size < 2**31 - 64


def _blosc2():
    try:
        import blosc2
    except ImportError:
        raise SystemExit(
            "studies.carry: packed checkpoints need blosc2 (the dev extra: pip install -e '.[dev]')"
        ) from None
    return blosc2


def _pack(data: bytes) -> bytes:
    """``data`` compressed losslessly for ``carry/``: blosc2's byte shuffle of 4-byte words (float32 tensors: the
    exponent bytes apart from the mantissa bytes), then zstd; a run's checkpoints come to about 0.82 of their size."""
    blosc2 = _blosc2()
    return blosc2.compress2(data, typesize=4, clevel=5, codec=blosc2.Codec.ZSTD, filter=blosc2.Filter.SHUFFLE)


def read_stored(stored: Path) -> bytes:
    """The run file's bytes from where ``carry/`` stores them (unpacked when stored packed)."""
    data = stored.read_bytes()
    if not stored.name.endswith(PACKED):
        return data
    return bytes(_blosc2().decompress2(data))


def _digest(stored: Path) -> str:
    """SHA-256 of the run file stored at ``stored`` (of its unpacked bytes when packed)."""
    return hashlib.sha256(read_stored(stored)).hexdigest() if stored.name.endswith(PACKED) else sha256sum(stored)


def _stored_size(path: Path, rel: str) -> Tuple[str, int]:
    """The run file's SHA-256 and the bytes its copy takes in ``carry/`` (packed when :func:`_packs`)."""
    data = path.read_bytes()
    return hashlib.sha256(data).hexdigest(), len(_pack(data)) if _packs(rel, len(data)) else len(data)


def _copy_in(src: Path, dst: Path) -> int:
    """The run file ``src`` into ``carry/`` at ``dst`` atomically, packed when ``dst`` ends with :data:`PACKED`; the
    bytes written."""
    data = src.read_bytes()
    data = _pack(data) if dst.name.endswith(PACKED) else data
    atomic_write_bytes(dst, data)
    return len(data)


def _copy(src: Path, dst: Path) -> None:
    """``src`` (a file of ``carry/``, unpacked when packed) to ``dst`` atomically (a reader never sees half a file)."""
    atomic_write_bytes(dst, read_stored(src))


def committed_files(repo: Path, carry: str = "carry") -> FrozenSet[str]:
    """The files of ``carry`` in the last commit (paths relative to ``carry``); none outside a git repository."""
    try:
        got = subprocess.run(
            ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", "--", carry],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return frozenset()
    return frozenset(Path(line).relative_to(carry).as_posix() for line in got.stdout.splitlines() if line)


class _Store:
    """The files of ``carry/`` by content: where a file is stored (a path relative to ``carry``). No file is ever
    rewritten (another run's entry may point to it): new content whose path is taken goes beside it, and what no run
    needs is removed afterwards if it was never committed (see the module)."""

    def __init__(self, carry: Path):
        self.carry, self.added = carry, 0
        self.by_sha: Dict[str, str] = {}
        for path in sorted(carry.rglob("*")) if carry.is_dir() else []:
            rel = path.relative_to(carry).as_posix()
            if path.is_file() and rel != MANIFEST:
                self.by_sha.setdefault(_digest(path), rel)

    def where(self, rel: str, digest: str, size: int) -> Tuple[str, bool]:
        """Where the content ``digest`` of the run file ``rel`` (``size`` bytes) is, or goes, and whether it must be
        copied there."""
        if digest in self.by_sha:
            return self.by_sha[digest], False
        name = rel + PACKED if _packs(rel, size) else rel
        if (self.carry / name).exists():  # nothing is rewritten
            name = f"{rel}.{digest[:12]}{PACKED}" if name.endswith(PACKED) else f"{rel}.{digest[:12]}"
        return name, True

    def put(self, src: Path, rel: str, digest: str) -> str:
        stored, new = self.where(rel, digest, src.stat().st_size)
        if new:
            self.added += _copy_in(src, self.carry / stored)
            self.by_sha[digest] = stored
        return stored


def _copy_progress(kind: str, path: str, stored: Dict[str, str], carry: Path) -> Tuple[int, ...]:
    """How far the copies of a run are (:class:`Run`), read from where its files are stored."""
    if kind == "node":
        return (0, _checkpoint_field(carry / stored[path], "epoch"))
    if f"{path}/train.json" in stored:
        return (1, -1)
    checkpoint = stored.get(f"{path}/checkpoint.pt")
    return (0, -1 if checkpoint is None else _checkpoint_field(carry / checkpoint, "step"))


def _snapshot(run: Run, repo: Path, store: _Store, tries: int = 3) -> Dict:
    """Copy ``run``'s files into the store; again when a file changed during the copy (a training that saved
    meanwhile), so that the copies are of one moment of the run. Its manifest entry, with how far the copies are."""
    for _ in range(tries):
        before = _stamp(repo, run.files)
        entries, stored = [], {}
        for rel, _mtime, size in before:
            digest = sha256sum(repo / rel)
            stored[rel] = store.put(repo / rel, rel, digest)
            entry = {"path": rel, "sha256": digest, "bytes": size}  # the stamps below say it is the copy's
            entries.append(entry if stored[rel] == rel else {**entry, "stored": stored[rel]})
        if _stamp(repo, run.files) == before:
            progress = _copy_progress(run.kind, run.path, stored, store.carry)
            return {"kind": run.kind, "path": run.path, "progress": list(progress), "files": entries}
    raise SystemExit(f"{run.path} kept changing while it was copied ({tries} tries); save again")


def _problem(entry: Dict, carry: Path) -> Optional[str]:
    """The first file of a manifest entry not stored in ``carry`` with its listed content, said in one line; None
    when every file is."""
    for f in entry["files"]:
        src = carry / _stored(f)
        if not src.is_file():
            return f"{src}: listed in {carry / MANIFEST} but missing"
        try:
            got = _digest(src)
        except ValueError as exc:  # a packed copy blosc2 cannot unpack (truncated, damaged header)
            return f"{src}: not unpackable ({exc})"
        if got != f["sha256"]:
            return f"{src}: sha256 {got}, the manifest says {f['sha256']}"
    return None


def _read_manifest(carry: Path) -> Dict:
    path = carry / MANIFEST
    if not path.is_file():
        return {"runs": []}
    return json.loads(path.read_text(encoding="utf-8"))


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _stored(f: Dict) -> str:
    """Where a manifest's file is stored under ``carry/``."""
    return f.get("stored", f["path"])


def _stale(out: Path, manifest: Dict) -> List[Path]:
    """The files of ``out`` (``carry/``) that no run of ``manifest`` needs."""
    wanted = {out / _stored(f) for r in manifest["runs"] for f in r["files"]} | {out / MANIFEST}
    return [p for p in sorted(out.rglob("*")) if p.is_file() and p not in wanted] if out.is_dir() else []


def _remove_empty_folders(out: Path) -> None:
    for folder in sorted((p for p in out.rglob("*") if p.is_dir()), reverse=True) if out.is_dir() else []:
        if not any(folder.iterdir()):
            folder.rmdir()


def _order(run: Run) -> Tuple[int, int]:
    """The order in which runs take the budget: node saves and finished runs first (a few MB each), then the runs
    still training, the furthest on first (losing it costs the most)."""
    small = run.kind == "node" or bool(run.progress[0])
    return (0, 0) if small else (1, -run.progress[1])


def save(
    repo: Path = REPO, runs: str = "runs", carry: str = "carry", max_mb: float = MAX_MB, budget_mb: float = BUDGET_MB
) -> List[str]:
    """Copy every run of :func:`find_runs` no larger than ``max_mb`` into ``repo/carry`` and write its manifest
    (never rewriting a committed file: see the module); remove the files no run needs that were never committed.

    The copies add at most ``budget_mb`` against the last commit: runs take the budget in :func:`_order`. A run
    that does not fit (or is larger than ``max_mb``) is not copied; its earlier save stays carried when ``carry/``
    still holds it whole (a restore then puts back that earlier step). The lines it prints."""
    out, lines, kept = repo / carry, [], []
    committed = committed_files(repo, carry)
    store = _Store(out)
    earlier = {e["path"]: e for e in _read_manifest(out)["runs"]}
    chosen, adding, new_digests = [], 0, set(store.by_sha)
    for run in sorted(find_runs(repo / runs, repo), key=_order):
        size = sum((repo / f).stat().st_size for f in run.files if (repo / f).is_file())
        digests = {}  # a run over --max-mb is not read (a part-way generator run is about 140 MB)
        if size <= max_mb * 1e6:
            digests = dict(_stored_size(repo / f, f) for f in run.files if (repo / f).is_file())
        adds = sum(n for d, n in digests.items() if d not in new_digests)
        if size > max_mb * 1e6:
            why = f"{_mb(size)}, over --max-mb {max_mb:g}"
        elif adding + adds > budget_mb * 1e6:
            why = f"its copies would add {_mb(adds)}, over what is left of --budget-mb {budget_mb:g}"
        else:
            chosen.append((run, size))
            adding += adds
            new_digests |= set(digests)
            continue
        before = earlier.get(run.path)
        if before is not None and _problem(before, out) is None:  # what is carried already is never lost
            kept.append(before)
            how_far = describe(before["kind"], before["progress"])
            lines.append(f"not carried anew: {run.path} ({why}); its earlier save stays carried ({how_far})")
        else:
            lines.append(f"not carried: {run.path} ({why})")
    for run, size in chosen:
        kept.append(_snapshot(run, repo, store))
        lines.append(f"carried: {run.path} ({run.kind}, {describe(run.kind, kept[-1]['progress'])}, {_mb(size)})")
    for entry in kept:
        _verify(entry, out)  # every entry's stored files are its copies, whatever later runs stored
    stale_bytes = 0
    for path in _stale(out, {"runs": kept}):
        rel = path.relative_to(out).as_posix()
        if rel in committed:
            stale_bytes += path.stat().st_size
            continue
        path.unlink()
        lines.append(f"removed from {carry}: {rel}")
    _remove_empty_folders(out)
    if kept or out.is_dir():
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        write_json(out / MANIFEST, {"saved": stamp, "runs": sorted(kept, key=lambda e: e["path"])})
    if stale_bytes:
        lines.append(
            f"stale: {_mb(stale_bytes)} of committed files in {carry}/ no run needs; `prune` removes them (in a "
            "session that carries little: removing counts toward the submission as adding does)"
        )
    if kept:
        lines.append(f"this save adds {_mb(store.added)} to {carry}/ against the last commit")
    return lines or ["nothing to carry: no unfinished run under " + runs]


def prune(repo: Path = REPO, carry: str = "carry", budget_mb: Optional[float] = None) -> List[str]:
    """Remove the files of ``carry/`` that no carried run needs (committed ones included). With ``budget_mb`` the
    committed ones removed come to at most that many MB (the largest that fit first; removing counts toward a
    submission as adding does), and the rest stay for a later ``prune``. The lines it prints."""
    out = repo / carry
    committed = committed_files(repo, carry)
    left_mb = float("inf") if budget_mb is None else budget_mb * 1e6
    lines, gone = [], []
    for path in sorted(_stale(out, _read_manifest(out)), key=lambda p: -p.stat().st_size):
        rel, size = path.relative_to(out).as_posix(), path.stat().st_size
        if rel in committed and size > left_mb:
            lines.append(f"left in {carry}: {rel} ({_mb(size)}, over what is left of --budget-mb {budget_mb:g})")
            continue
        left_mb -= size if rel in committed else 0
        gone.append(path)
        lines.append(f"removed from {carry}: {rel} ({_mb(size)})")
    for path in gone:
        path.unlink()
    _remove_empty_folders(out)
    return sorted(lines) or [f"nothing stale in {carry}/"]


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
    problem = _problem(entry, carry)
    if problem:
        raise SystemExit(f"{problem}; nothing restored")


def restore(repo: Path = REPO, carry: str = "carry", under: Optional[str] = None, fill: bool = True) -> List[str]:
    """Put every carried run back (see the module), or only those at or under ``under`` (a path relative to the
    repository); every carried file is checked before any is written. With ``fill=False`` a run as far on here as
    carried is left as it is (its missing files are not copied). The lines it prints."""
    src, manifest = repo / carry, _read_manifest(repo / carry)
    if under is not None:
        inside = [e for e in manifest["runs"] if Path(under) in (Path(e["path"]), *Path(e["path"]).parents)]
        manifest["runs"] = inside
    for entry in manifest["runs"]:
        _verify(entry, src)
    lines = []
    for entry in manifest["runs"]:
        path, carried, local = entry["path"], tuple(entry["progress"]), _local(entry, repo)
        files = {f["path"]: _stored(f) for f in entry["files"]}
        how_far = describe(entry["kind"], carried)
        if local is not None and local.progress > carried:
            lines.append(f"kept: {path} (here {describe(local.kind, local.progress)}, carried {how_far})")
            continue
        if local is not None and local.progress == carried and not fill:
            lines.append(f"as far on here: {path} ({how_far}; left as it is)")
            continue
        if local is not None and local.progress == carried:
            missing = [f for f in files if not (repo / f).is_file()]
            for f in missing:
                _copy(src / files[f], repo / f)
            lines.append(f"as far on here: {path} ({how_far}; {len(missing)} missing file(s) copied)")
            continue
        if local is not None:
            aside = repo / "runs" / ".replaced" / datetime.datetime.now().strftime("%Y%m%d-%H%M%S") / path
            aside.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(repo / path), str(aside))
            lines.append(
                f"moved aside: {path} (here {describe(local.kind, local.progress)}) -> {aside.relative_to(repo)}"
            )
        for f, stored in files.items():
            _copy(src / stored, repo / f)
        lines.append(f"restored: {path} ({how_far})")
    return lines or [f"nothing carried ({carry / Path(MANIFEST)} lists no run)"]


def restore_before(out: Path, repo: Optional[Path] = None) -> None:
    """What a study driver calls before it trains into ``out``: the carried runs under ``out`` are put back first
    (:func:`restore`), so that a new machine's first command continues them instead of starting them again (and
    then overwriting their carried saves with its own). A run as far on here as carried is left as it is: a file
    removed from it here (a wrong decode, say) is not put back behind the driver's back (``python -m studies.carry
    restore`` copies such files). Prints what it restored or moved aside; silent when ``out`` is outside the
    repository or nothing was carried there."""
    repo = REPO if repo is None else repo
    try:
        under = Path(out).resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return
    for line in restore(repo, under=under, fill=False):
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
    stale = _stale(repo / carry, manifest)
    if stale:
        lines.append(f"stale: {len(stale)} file(s), {_mb(sum(p.stat().st_size for p in stale))} (`prune` removes them)")
    return lines + [f"{len(manifest['runs'])} run(s) carried{saved}"]


def main(argv: Optional[Sequence[str]] = None) -> None:
    one_line_errors()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["save", "restore", "list", "prune"])
    p.add_argument("--max-mb", type=float, default=MAX_MB, help=f"save: the largest run carried (default {MAX_MB:g})")
    p.add_argument(
        "--budget-mb",
        type=float,
        default=None,
        help=f"save: the most it may add against the last commit (default {BUDGET_MB:g}); prune: the most it may "
        "remove of committed files (default: every stale file)",
    )
    a = p.parse_args(argv)
    for name in ("max_mb", "budget_mb"):
        if getattr(a, name) is not None and getattr(a, name) <= 0:
            p.error(f"argument --{name.replace('_', '-')}: must be positive, got {getattr(a, name):g}")
    budget = BUDGET_MB if a.budget_mb is None else a.budget_mb
    steps = {"save": lambda: save(max_mb=a.max_mb, budget_mb=budget), "restore": restore, "list": listing}
    lines = {**steps, "prune": lambda: prune(budget_mb=a.budget_mb)}[a.step]()
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
