"""Dependencies point one way: the import-linter contracts of pyproject.toml hold.

``lint-imports`` (import-linter, in the ``dev`` extra) analyses the package in the working directory, so each run
below starts in the repository (or in a copy of it) rather than importing the installed ``graph_rma``.
"""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


def _lint_imports():
    pytest.importorskip("importlinter", reason="import-linter not installed: pip install -e '.[dev]'")
    script = Path(sys.executable).parent / "lint-imports"
    found = str(script) if script.is_file() else shutil.which("lint-imports")
    if found is None:
        pytest.skip("import-linter is importable but its lint-imports script is not on PATH")
    return found


def _contract_ids():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    return re.findall(r'^id = "([^"]+)"', text.split("[tool.importlinter]", 1)[1], flags=re.M)


def _run(cwd, *contracts):
    args = [_lint_imports(), "--no-cache"] + [a for c in contracts for a in ("--contract", c)]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


CONTRACTS = [
    "layers",
    "cli-protected",
    "support-below-nn",
    "engine-metrics-standalone",
    "data-independent",
    "core-standalone",
    "acyclic",
]


def test_contract_list_matches_pyproject():
    assert _contract_ids() == CONTRACTS


@pytest.mark.slow
@pytest.mark.parametrize("contract", CONTRACTS)
def test_import_contract_holds(contract):
    r = _run(REPO, contract)
    assert r.returncode == 0 and "1 kept, 0 broken" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]


def _imported_modules(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


SCRIPTS = sorted(
    str(p.relative_to(REPO)) for folder in ("examples", "benchmarks", "studies") for p in (REPO / folder).glob("*.py")
)


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_import_the_library_not_the_cli(name):
    """Examples, benchmarks and studies import the library (tasks, engine, ...), never the command line."""
    modules = set(_imported_modules(REPO / name))
    is_script = "__main__" in (REPO / name).read_text()  # not a helper module such as studies/pages.py
    if name.startswith(("examples", "studies")) and is_script:
        assert any(m.startswith("graph_rma") for m in modules)  # the parser sees the script's imports
    assert not {m for m in modules if m == "graph_rma.cli" or m.startswith("graph_rma.cli.")}


def test_benchmarks_import_nothing_from_studies():
    """The results folders import one way (studies/render.py renders the benchmarks' page too): benchmarks/ never
    imports studies/; what both write pages with lives in the package (graph_rma.engine.blocks)."""
    found = {
        name: sorted(m for m in _imported_modules(REPO / name) if m == "studies" or m.startswith("studies."))
        for name in SCRIPTS
        if name.startswith("benchmarks")
    }
    assert not {name: mods for name, mods in found.items() if mods}


def test_bad_input_raises_the_package_type():
    """src/ raises GraphRMAError for bad input, never a plain ValueError (which the commands show as a bug)."""
    found = [
        f"{path.relative_to(REPO)}:{i}"
        for path in sorted((REPO / "src").rglob("*.py"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\braise ValueError\b", line)
    ]
    assert not found, found


def test_one_head_layout_registry():
    """Where head i lives is registered once (graph_rma.particles.layouts): the HF integration registers its finder
    there and imports nothing from the diagnostics, which read the same registry."""
    for path in sorted((REPO / "src" / "graph_rma" / "hf").glob("*.py")):
        assert not [m for m in _imported_modules(path) if "diagnostics" in m.split(".")], path.name
    text = (REPO / "src" / "graph_rma" / "diagnostics" / "capture.py").read_text()
    assert "particles.layouts import" in text and "_FINDERS" not in text


def test_the_package_map_names_every_package_and_module():
    """docs/design.md's package layout: every subpackage of graph_rma/ (as ``name/``) and every module in it (by its
    name) appears in the map, so a new module cannot go unmentioned."""
    import re

    text = (REPO / "docs" / "design.md").read_text()
    block = text.split("## Package layout", 1)[1].split("```", 2)[1]
    words = set(re.findall(r"[A-Za-z_][\w]*", block))
    missing = []
    for path in sorted((REPO / "src" / "graph_rma").rglob("*.py")):
        rel = path.relative_to(REPO / "src" / "graph_rma")
        if "__pycache__" in rel.parts:
            continue
        for folder in rel.parts[:-1]:
            if f"{folder}/" not in block:
                missing.append(f"{folder}/")
        if path.stem != "__init__" and path.stem.lstrip("_") not in words and path.stem not in words:
            missing.append(str(rel))
    assert not missing, f"docs/design.md's package layout does not name: {sorted(set(missing))}"


@pytest.mark.slow  # a fresh Python process
def test_a_clone_folder_named_graph_rma_does_not_shadow_the_package(tmp_path):
    """Issue 32 item 15: run from the parent of a clone called ``graph_rma`` (a folder without ``__init__.py``, so
    Python would make it a namespace package), ``import graph_rma`` must still give the real package. The src
    layout makes the package a regular one on a ``sys.path`` entry, and a regular package beats a namespace one."""
    (tmp_path / "graph_rma" / "examples").mkdir(parents=True)  # what a clone's top level looks like to Python
    code = "import graph_rma, sys; print(graph_rma.__file__); sys.exit(0 if callable(graph_rma.convert) else 1)"
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert Path(r.stdout.strip()).name == "__init__.py" and tmp_path not in Path(r.stdout.strip()).parents
