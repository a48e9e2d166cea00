"""The dataset cards' statistics tables are what the shared files give (the card is what a user reads; this test is
what keeps it true). Each cell is recomputed with the package's loader and compared number by number."""

import re
from typing import Dict, List

import pytest
import torch
from conftest import PYG, REPO, data_path, needs_punkt, needs_webnlg
from torch_geometric.utils import homophily

from graph_rma.data import DataNotFoundError
from graph_rma.data.heterophilous import load_heterophilous
from graph_rma.data.platonov import load_platonov_all_splits
from graph_rma.data.transforms import direct_edges

pytestmark = pytest.mark.slow  # subprocesses or real-data runs: left out of make test-fast


def card_table(name: str) -> Dict[str, Dict[str, str]]:
    """The first table of ``datasets/<name>.md`` as ``{column: {row label: cell}}``."""
    lines = [line for line in (REPO / "datasets" / f"{name}.md").read_text(encoding="utf-8").splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    head, body = rows[0], rows[2:]
    return {col: {r[0]: r[i] for r in body} for i, col in enumerate(head) if i}


def numbers(cell: str) -> List[float]:
    """The numbers of a cell, thousands separators removed: ``"2 (8,000 / 2,000)"`` -> ``[2, 8000, 2000]``."""
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", cell)]


HETEROPHILOUS = card_table("heterophilous")
PLATONOV = card_table("platonov")


def test_the_cards_have_the_rows_this_test_checks():
    assert set(HETEROPHILOUS) == {"Cornell", "Texas", "Wisconsin", "chameleon", "squirrel", "Actor"}
    assert set(PLATONOV) == {"minesweeper", "tolokers", "chameleon_filtered", "chameleon_filtered_directed"}
    assert numbers("2 (8,000 / 2,000)") == [2, 8000, 2000] and numbers("83.4") == [83.4]


@pytest.mark.parametrize("name", sorted(HETEROPHILOUS))
def test_heterophilous_card_is_what_the_files_give(name):
    try:
        data = load_heterophilous(name, download=False)
    except DataNotFoundError:
        pytest.skip("Geom-GCN raw files not found under $GRAPH_RMA_DATA/pyg (datasets/heterophilous.md)")
    card = HETEROPHILOUS[name]
    ei, x, y = data.edge_index, data.x, data.y
    active = x.sum(dim=1)
    masks = torch.stack([data.train_mask, data.val_mask, data.test_mask]).sum(dim=1).tolist()
    computed = {
        "nodes": [data.num_nodes],
        "directed edges (`edge_index` after PyG's `coalesce`)": [ei.size(1)],
        "of which self-loops": [int((ei[0] == ei[1]).sum())],
        "features (0/1)": [x.size(1)],
        "mean active features per node": [round(float(active.mean()), 1)],
        "nodes with no active feature": [int((active == 0).sum())],
        "classes": [int(y.max()) + 1],
        "class counts (0..4)": torch.bincount(y).tolist(),
        "train / val / test per split (every split)": masks,
        "edge homophily": [round(homophily(ei, y, method="edge"), 4)],
    }
    assert set(card) == set(computed)
    for row, values in computed.items():
        assert numbers(card[row]) == values, (row, card[row], values)


PLATONOV_FILE = {n: PYG / "heterophilous_graph" / n / "raw" / f"{n}.npz" for n in PLATONOV}


@pytest.mark.parametrize("name", sorted(PLATONOV))
def test_platonov_card_is_what_the_files_give(name):
    if not PLATONOV_FILE[name].is_file():
        pytest.skip(f"{PLATONOV_FILE[name]} not found (datasets/platonov.md)")
    card = PLATONOV[name]
    d = load_platonov_all_splits(name, root=PYG)
    directed = name.endswith("_directed")  # used as stored
    ei = d.edge_index if directed else direct_edges(d.edge_index, "undirected", d.num_nodes)
    split0 = [int(m[:, 0].sum()) for m in (d.train_mask, d.val_mask, d.test_mask)]
    computed = {
        "nodes": [d.num_nodes],
        "edges in the file (each undirected edge once)": [d.edge_index.size(1)],
        "directed entries once undirected": [] if directed else [ei.size(1)],
        "features": [d.x.size(1)],
        "classes (counts)": [int(d.y.max()) + 1] + torch.bincount(d.y).tolist(),
        "split sizes (train/val/test, split 0)": split0,
        "edge homophily": [round(homophily(ei, d.y, method="edge"), 3)],
        "adjusted (class-insensitive) homophily": [round(homophily(ei, d.y, method="edge_insensitive"), 3)],
    }
    assert set(card) == set(computed) | {"metric"}
    for row, values in computed.items():
        cell = card[row]
        if cell.startswith("as "):  # "as chameleon_filtered": the same as that column
            cell = PLATONOV[cell[3:]][row]
        assert numbers(cell) == values, (row, cell, values)


@needs_webnlg
@needs_punkt
def test_webnlg_card_delexicalisation_figures_are_what_its_command_prints():
    from graph_rma.data.webnlg import delexicalise, load_webnlg, relexicalise
    from graph_rma.metrics import tokenize

    text = (REPO / "datasets" / "webnlg.md").read_text(encoding="utf-8")
    m = re.search(
        r"\(([\d,]+) references, command\s+below\): ([\d.]+)% of entities .*? ([\d.]+)% of references\s+"
        r"contain .*? exactly in ([\d.]+)% of cases",
        text,
        re.S,
    )
    assert m, "the card's delexicalisation sentence changed: update this test with it"
    found = total = all_in = same = n = 0
    for e in load_webnlg("dev"):  # the card's command
        hit = [False] * len(e.entities)
        for r in e.references:
            d, f = delexicalise(r, e.entities)
            hit = [a or b for a, b in zip(hit, f)]
            n += 1
            all_in += all(f)
            same += relexicalise(d, e.entities) == tokenize(r)
        found += sum(hit)
        total += len(hit)
    shown = [n, round(100 * found / total, 1), round(100 * all_in / n, 1), round(100 * same / n)]
    assert shown == [float(m.group(1).replace(",", "")), *map(float, m.group(2, 3, 4))]


TEXT_FILES = {
    name: data_path("text", rel)
    for name, rel in (("MPQA", "MPQA/mpqa.all"), ("CR", "CR/custrev.all"), ("SUBJ", "SUBJ/subj.all"))
}


def _repeats(path) -> int:
    """Lines of a raw file that repeat an earlier line byte for byte."""
    lines = path.read_bytes().split(b"\n")
    lines = lines[:-1] if lines and lines[-1] == b"" else lines
    return len(lines) - len(set(lines))


@pytest.mark.skipif(not all(p.is_file() for p in TEXT_FILES.values()), reason="SUBJ/CR/MPQA not under $GRAPH_RMA_DATA")
def test_text_card_quirks_are_what_the_files_give():
    text = " ".join((REPO / "datasets" / "text.md").read_text(encoding="utf-8").split())
    m = re.search(
        r"MPQA's examples are short phrases \(([\d.]+) tokens on average\) and ([\d,]+) of its lines repeat "
        r"an earlier line exactly, so folds share identical phrases; CR has (\d+) such repeats, SUBJ none",
        text,
    )
    assert m, "the card's quirks sentence changed: update this test with it"
    lines = TEXT_FILES["MPQA"].read_text(encoding="utf-8").splitlines()
    words = [len(line.split(" ", 1)[1].split()) if " " in line else 0 for line in lines]  # "<label> <phrase>"
    assert round(sum(words) / len(words), 1) == float(m.group(1))
    assert [_repeats(TEXT_FILES[n]) for n in ("MPQA", "CR", "SUBJ")] == [
        int(m.group(2).replace(",", "")),
        int(m.group(3)),
        0,
    ]
