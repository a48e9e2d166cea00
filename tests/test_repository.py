"""What git tracks: source, docs, recorded results and small text fixtures, never a checkpoint, a packed copy of one
or any file over 2 MB. A long run lives in ``runs/`` (ignored) and resumes from its own checkpoint there; what others
need from it (decodes, ``results.json``, recorded benchmarks) is committed under ``docs/`` and ``benchmarks/``."""

import shutil
import subprocess
from pathlib import Path
from typing import Dict, Iterable, List

import pytest
from conftest import REPO

MAX_BYTES = 2_000_000  # 2 MB

#: File-name suffixes of checkpoints, weights, pickles, array dumps and packed (compressed) copies of them. A stored
#: copy such as ``best.pt.0b6ded3a613b`` counts by any of its suffixes.
BINARY_SUFFIXES = frozenset(
    ".pt .pth .ckpt .safetensors .blosc2 .bin .pkl .pickle .joblib .h5 .hdf5 .onnx .gguf .npy .npz .zst".split()
)

#: Tracked on purpose, until the history rewrite of issue 60 (``git filter-repo --path carry --invert-paths``) removes
#: carry/ from every commit: deleting them before it would only add their bytes to one submission's diff. Each must
#: still be tracked (the test fails otherwise), so this list shrinks to nothing as they go.
ALLOWED = frozenset(
    {
        "carry/runs/webnlg2017/evidence/final-v4-s0/plain-s2/best.pt.0b6ded3a613b.blosc2",
        "carry/runs/webnlg2017/evidence/final-v4-s0/plain-s2/best.pt.blosc2",
        "carry/runs/webnlg2017/evidence/final-v4-s0/plain-s2/checkpoint.pt.blosc2",
        "carry/runs/webnlg2017/evidence/final-v4-s0/svgd-s2/best.pt.blosc2",
    }
)


def tracked_sizes(repo: Path) -> Dict[str, int]:
    """Every file in ``repo``'s git index (what the next commit holds) with its size in bytes, as git stores it."""
    git = ["git", "-C", str(repo)]
    staged = subprocess.run([*git, "ls-files", "-z", "--stage"], capture_output=True, check=True).stdout
    entries = []  # (blob, path); submodules (mode 160000) are commits, not files
    for record in staged.decode().split("\0"):
        if record:
            meta, path = record.split("\t", 1)
            mode, blob, _ = meta.split()
            if mode != "160000":
                entries.append((blob, path))
    query = "".join(f"{blob}\n" for blob, _ in entries).encode()
    sizes = subprocess.run(
        [*git, "cat-file", "--batch-check=%(objectsize)"], input=query, capture_output=True, check=True
    )
    return {path: int(size) for (_, path), size in zip(entries, sizes.stdout.split())}


def problems(sizes: Dict[str, int], allowed: Iterable[str] = ALLOWED) -> List[str]:
    """One line per tracked file that should not be (a checkpoint or packed copy, or over :data:`MAX_BYTES`) and per
    allowed path no longer tracked; empty when the repository is as it should be."""
    allowed, lines = frozenset(allowed), []
    for path, size in sorted(sizes.items()):
        if path in allowed:
            continue
        if BINARY_SUFFIXES.intersection(s.lower() for s in Path(path).suffixes):
            lines.append(f"{path}: a checkpoint or packed copy is tracked")
        if size > MAX_BYTES:
            lines.append(f"{path}: {size / 1e6:.1f} MB tracked (at most {MAX_BYTES / 1e6:g} MB)")
    gone = sorted(allowed - set(sizes))
    lines += [f"{path}: allowed but no longer tracked (remove it from ALLOWED)" for path in gone]
    return lines


def test_no_tracked_checkpoint_and_no_file_over_2_mb():
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: nothing is tracked")
    assert problems(tracked_sizes(REPO)) == []


def test_problems_names_checkpoints_large_files_and_allowed_paths_that_went():
    sizes = {
        "src/graph_rma/nn/gat.py": 40_000,
        "docs/cora/curves.png": 90_000,
        "datasets/fixtures/webnlg_tiny/test/testdata_with_lex.xml": 5_000,
        "runs/x/best.pt": 10,  # small, still a checkpoint
        "carry/a/checkpoint.pt.0b6ded3a613b": 10,  # a stored copy, named by its content's hash
        "weights/model.SafeTensors": 10,
        "docs/big.json": MAX_BYTES + 1,
        "docs/just-fits.json": MAX_BYTES,
        "kept/best.pt.blosc2": 30_000_000,  # allowed below, so neither its suffix nor its size counts
    }
    assert problems(sizes, {"kept/best.pt.blosc2", "gone/best.pt.blosc2"}) == [
        "carry/a/checkpoint.pt.0b6ded3a613b: a checkpoint or packed copy is tracked",
        "docs/big.json: 2.0 MB tracked (at most 2 MB)",
        "runs/x/best.pt: a checkpoint or packed copy is tracked",
        "weights/model.SafeTensors: a checkpoint or packed copy is tracked",
        "gone/best.pt.blosc2: allowed but no longer tracked (remove it from ALLOWED)",
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_tracked_sizes_reads_the_index(tmp_path):
    git = ["git", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a b.txt").write_bytes(b"x" * 1234)
    (tmp_path / "best.pt").write_bytes(b"\0" * 10)
    (tmp_path / "untracked.pt").write_bytes(b"\0" * 10)
    subprocess.run([*git, "add", "sub/a b.txt", "best.pt"], check=True)
    (tmp_path / "sub" / "a b.txt").write_bytes(b"x")  # changed after staging: the index's size counts
    assert tracked_sizes(tmp_path) == {"best.pt": 10, "sub/a b.txt": 1234}
    assert problems(tracked_sizes(tmp_path), ()) == ["best.pt: a checkpoint or packed copy is tracked"]
