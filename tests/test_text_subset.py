"""``--max-train N`` of the text examples: a seeded stratified subset (``stratified_subset``), not the first N lines."""

import runpy
import sys
from collections import Counter

import pytest
from conftest import REPO, needs_text

import graph_rma
from graph_rma.tasks.text_classification import stratified_subset


def test_each_class_keeps_its_share_by_largest_remainder():
    labels = [0] * 6 + [1] * 3 + [2] * 1
    picked = stratified_subset(labels, 5, seed=0)
    # shares 3, 1.5, 0.5: floors 3, 1, 0; the one left goes to the larger remainder, ties to the smaller label
    assert Counter(labels[i] for i in picked) == {0: 3, 1: 2}
    assert picked == sorted(picked) and len(set(picked)) == 5
    assert stratified_subset(labels, 5, seed=0) == picked  # seeded
    assert {tuple(stratified_subset(labels, 5, seed=s)) for s in range(6)} != {tuple(picked)}  # drawn, not fixed
    assert stratified_subset(labels, 10, seed=3) == list(range(10)) == stratified_subset(labels, 99)


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_a_size_that_is_not_a_positive_int_is_refused(n):
    with pytest.raises(graph_rma.GraphRMAError, match="n: expected a positive int"):
        stratified_subset([0, 1], n)


@needs_text
def test_on_mr_the_first_500_are_one_class_and_the_subset_is_both():
    from graph_rma.data.text import load_text_dataset

    ds = load_text_dataset("mr", "train", tokenize=False)
    labels = [y for i, y in enumerate(ds.labels) if i % 10 != 9]  # split_dev's training part
    assert len(set(labels[:500])) == 1  # what --max-train 500 trained on before
    counts = Counter(labels[i] for i in stratified_subset(labels, 500, seed=0))
    share = Counter(labels)
    assert sum(counts.values()) == 500 and all(abs(counts[y] - 500 * share[y] / len(labels)) <= 1 for y in share)


@pytest.mark.slow
@needs_text
def test_the_example_trains_on_the_stratified_subset(monkeypatch, capsys, tmp_path):
    path = REPO / "examples" / "text_classification.py"
    argv = ["--dataset", "mr", "--max-train", "60", "--epochs", "1", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", [str(path), *argv])
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "--max-train 60: 60 of " in out and "training sentences, stratified by class (seed 0)" in out
