"""Every number the README and the docs home state has one source: the page it links to.

A summary page (README.md, docs/index.md) quotes results measured elsewhere. Each paragraph or table row that states
a number must link the page holding the measurement, and every number it states must appear there verbatim (after
normalising the minus sign and line breaks), so a re-measured page cannot leave a stale copy behind. The pages' own
generated sections are checked against their committed results in test_studies.py.
"""

import functools
import re
from pathlib import Path
from typing import List, Tuple

import pytest
from conftest import REPO

SUMMARIES = ["README.md", "docs/index.md"]
# Result pages whose tables are generated (between <!-- name:start --> and <!-- name:end -->): their prose may also
# quote their own generated blocks
GENERATED = [
    "docs/cora.md",
    "docs/agenda.md",
    "docs/webnlg.md",
    "docs/text.md",
    "docs/diagnostics.md",
    "docs/metrics.md",
    "docs/authors-update.md",
    "docs/where-it-helps.md",
    "docs/baselines.md",
    "benchmarks/README.md",
    "docs/hf.md",
]  # no generated block: its example prints its own table, and the page quotes no number
# Pages whose numbers another test keeps true, or that are dated history, with where or why.
CHECKED_ELSEWHERE = {
    "docs/design.md": "tests/test_particles.py::test_the_design_page_table_is_what_the_papers_equation_gives and "
    "tests/test_node_classification.py::test_the_repulsion_limit_never_acts_with_the_cora_presets",
    "docs/changes.md": "a dated change log: each entry says what was measured when it landed",
}
MARKED = re.compile(r"<!-- ([\w-]+):start -->(.*?)<!-- \1:end -->", re.S)

# Not measurements: names and versions that contain digits.
NAMES = re.compile(r"METEOR 1\.5|EMNLP \d{4}|arXiv:\d+\.\d+|torch ?[=<>]=? ?[\d.]+|\b(?:19|20)\d\d\b|\bv\d|B/edge")
# Not measurements either: a setting named before its value (``lr 0.005``, ``dropout 0.6``, ``alpha in {0.1, 1}``)
SETTING = re.compile(
    r"\b(?:lr|learning rate|dropout|weight decay|momentum|alpha|eps|beta|p|width|rate)(?: in)? ?=? ?\{?"
    r"[\d.e-]+(?:(?:,| and|/) ?[\d.e-]+)*\}?"
)

# Measured figures: a value with its spread, a range of values, a number in scientific notation, a decimal, a
# percentage, a ratio, a size in memory, a count of seeds or splits.
N = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
PAIR = rf"[+-]?(?:{N}) ± (?:{N})"
D = r"\d+\.\d+"
RANGE = (
    rf"[+-]?(?:{N}) ?- ?[+-]?(?:{N}) ?(?:x\b|%|GiB|MiB|GB|KB|B\b|bytes\b)"  # 8-11.6x, 1,483-1,611 B
    rf"|[+-]?(?:{D}) ?- ?[+-]?(?:{N})|[+-]?(?:{N}) ?- ?[+-]?(?:{D})"
)  # 0.001-1; not seeds 100-102
SCIENTIFIC = r"\d+(?:\.\d+)?e\d+"
UNIT = rf"(?:{N}) ?(?:%|GiB|MiB|GB|KB|bytes|points|(?:\w+ )?seeds|splits|s|ms|min|minutes|hours)(?!\w)|(?:{N})x\b"
DECIMAL = r"[+-]?\d+\.\d+"
FIGURE = re.compile(rf"(?<![\w.`/=-])(?:{PAIR}|{SCIENTIFIC}|{RANGE}|{UNIT}|{DECIMAL})(?![\w.]\d)")
COUNT = re.compile(r"(\d+) ?(?:\w+ )?(seeds|splits)")


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("−", "-").replace("\u2009", " "))


def blocks(text: str) -> List[str]:
    """Paragraphs, list items and table rows, without fenced code."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [b for b in re.split(r"\n\s*\n|\n(?=\||\* )", text) if b.strip()]


def figures(block: str) -> List[str]:
    prose = re.sub(r"`[^`]*`", " ", block)
    prose = re.sub(r"\]\([^)]*\)", "]", prose)
    prose = SETTING.sub(" ", NAMES.sub(" ", normalise(prose)))
    return [f.strip() for f in FIGURE.findall(prose)]


def parts(figure: str) -> List[str]:
    """Patterns that must match in the source: a value with its spread as written, a range's two ends, a count of
    seeds as a count or as a range of seeds, any other figure's number."""
    if "±" in figure:
        return [re.escape(figure)]
    m = COUNT.fullmatch(figure)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        return [rf"{n} (?:\w+ )?{unit[:-1]}s?|{unit[:-1]}s? 0-{n - 1}\b|{unit[:-1]}s? {100}-{100 + n - 1}\b"]
    m = re.fullmatch(rf"([+-]?(?:{N})) ?- ?([+-]?(?:{N}))(?: ?\S+)?", figure)
    if m and not re.fullmatch(SCIENTIFIC, figure):
        return [re.escape(m.group(1)), re.escape(m.group(2))]
    return [re.escape(re.sub(r" ?(%|x|GiB|MiB|GB|KB|bytes|points|s|ms|min|minutes|hours)$", "", figure))]


@functools.lru_cache(maxsize=None)
def with_generated_files(path: Path) -> str:
    """A page with the generated tables in the folder of the same name beside it, normalised (read once)."""
    texts = [path.read_text(encoding="utf-8")]
    texts += [t.read_text(encoding="utf-8") for t in sorted(path.with_suffix("").glob("*.md"))]
    return normalise("\n".join(texts))


def sources(page: Path, block: str) -> List[Tuple[str, str]]:
    """The pages a block links, each with its generated files."""
    out = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", block):
        path = (page.parent / target).resolve()
        if path.suffix == ".md" and path.is_file() and path != page.resolve():
            out.append((target, with_generated_files(path)))
    return out


def found(pattern: str, text: str) -> bool:
    return re.search(rf"(?<![\w.])(?:{pattern})(?![\da-wyzA-Z_]|\.\d)", text) is not None  # "1.02x" has 1.02


def unsourced(page: Path, counts: bool = True) -> List[str]:
    """What ``page`` states without its source; ``counts``: also counts of seeds and splits (a summary page's)."""
    text = page.read_text(encoding="utf-8")
    code = normalise(" ".join(re.findall(r"```.*?```", text, flags=re.S)))
    generated = [("its generated tables", normalise(m.group(2))) for m in MARKED.finditer(text)]
    generated += [
        ("its generated files", normalise(f.read_text(encoding="utf-8")))  # docs/<page>/*.md
        for f in sorted(page.with_suffix("").glob("*.md"))
    ]
    problems = []
    for block in blocks(MARKED.sub("", text)):
        quoted = [f for f in figures(block) if counts or not COUNT.fullmatch(f)]
        if not quoted:
            continue
        linked = sources(page, block) + generated
        for figure in quoted:
            missing = [p for p in parts(figure) if not found(p, code)]  # a setting of the page's own example code
            if missing and not linked:
                problems.append(f"{figure!r} links no page that measured it: {normalise(block)[:90]}...")
            elif any(not any(found(p, src) for _, src in linked) for p in missing):
                names = ", ".join(dict.fromkeys(t for t, _ in linked))
                problems.append(f"{figure!r} is not in {names}: {normalise(block)[:90]}...")
    return problems


@pytest.mark.parametrize("name", SUMMARIES + GENERATED)
def test_every_number_on_a_summary_page_is_in_the_page_it_links(name):
    problems = unsourced(REPO / name, counts=name in SUMMARIES)
    assert not problems, "\n".join(problems)


def test_every_docs_page_has_its_numbers_checked():
    """A new page under docs/ is a summary page, a generated page or checked elsewhere: never unchecked prose."""
    known = {(REPO / p).resolve() for p in SUMMARIES + GENERATED + list(CHECKED_ELSEWHERE)}
    unchecked = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md") if p.resolve() not in known)
    assert not unchecked, f"add these pages to a list of test_docs_numbers.py: {unchecked}"


def test_the_checker_finds_a_stale_copy_and_a_missing_link(tmp_path):
    (tmp_path / "source.md").write_text("| ma | 81.9 ± 1.1 | 8.0-11.6x less | 20 seeds | 151-210 |\n")
    (tmp_path / "ok.md").write_text("Plain heads 81.9 ± 1.1 %, 8.0-11.6x, 20 seeds ([Cora](source.md)).\n")
    assert unsourced(tmp_path / "ok.md") == []
    (tmp_path / "stale.md").write_text(
        "Plain heads 81.8 ± 1.1 %, 7.9-11.6x, 10 seeds, 136-210 bytes per edge "
        "([Cora](source.md)).\n\nRepulsive heads 82.1 %.\n"
    )
    problems = unsourced(tmp_path / "stale.md")
    assert [p.split(" is")[0].split(" links")[0] for p in problems] == [
        "'81.8 ± 1.1'",
        "'7.9-11.6x'",
        "'10 seeds'",
        "'136-210 bytes'",
        "'82.1 %'",
    ]
    assert "links no page" in problems[-1]


def test_durations_and_sizes_are_figures():
    assert figures("`make cora` took 44 s wall, 9.3 min, 7 hours, 12 ms, 8 bytes") == [
        "44 s",
        "9.3 min",
        "7 hours",
        "12 ms",
        "8 bytes",
    ]


def test_a_page_may_quote_its_own_generated_tables_but_not_typed_numbers(tmp_path):
    (tmp_path / "page.md").write_text(
        "Plain 81.9 ± 1.1 %.\n\n<!-- t:start -->\n| ma | 81.9 ± 1.1 |\n<!-- t:end -->\n\nTyped: 82.2 %.\n"
    )
    assert [p.split(" ")[0] for p in unsourced(tmp_path / "page.md")] == ["'82.2"]


def test_names_and_code_settings_are_not_taken_for_measurements(tmp_path):
    (tmp_path / "page.md").write_text(
        "METEOR 1.5 (EMNLP 2020, arXiv:1907.11065), `alpha=0.37`, torch==2.13.0, "
        "dropout 0.6, lr 3e-5, alpha in {0.1, 0.01, 1}.\n\n"
        "```python\nlr = 0.005\n```\n\nThe rate 0.005 from the code above.\n"
    )
    assert unsourced(tmp_path / "page.md") == []
