"""Text loaders (graph_rma.data.text) on the real files: counts, labels, encodings, splits, tokens, vocabulary."""

import pytest
from conftest import needs_text as real

from graph_rma.data.root import DataNotFoundError
from graph_rma.data.text import (
    TREC_CLASSES,
    Vocabulary,
    load_mr,
    load_sst,
    load_text_dataset,
    load_trec,
    read_lines,
    tokenize,
)


@real
def test_trec_counts_labels_and_encoding():
    tr, te = load_trec("train", tokenize=False), load_trec("test")
    assert (len(tr), len(te)) == (5452, 500)
    assert tr.label_counts() == {0: 1162, 1: 1250, 2: 86, 3: 1223, 4: 835, 5: 896}
    assert te.label_counts() == {0: 138, 1: 94, 2: 9, 3: 65, 4: 81, 5: 113}
    assert tr.classes == TREC_CLASSES and tr.sentences[0] == "How did serfdom develop in and then leave Russia ?"
    assert sum("\u00f0" in s for s in tr.sentences) == 1  # the one non-ASCII byte 0xF0, decoded, not dropped
    assert te.tokens[0] == ["how", "far", "is", "it", "from", "denver", "to", "aspen", "?"]


@real
def test_mr_split_and_cp1252():
    full = load_mr("all", tokenize=False)
    assert len(full) == 10662 and full.label_counts() == {0: 5331, 1: 5331}
    # 0x85 is cp1252's ellipsis: 23 of them, none left as the U+0085 line-break character
    assert sum(s.count("\u2026") for s in full.sentences) == 23
    assert not any("\x85" in s for s in full.sentences)
    test, train = load_mr("test", fold=0, tokenize=False), load_mr("train", fold=0, tokenize=False)
    assert (len(test), len(train)) == (1067, 9595)
    assert test.sentences[0] == full.sentences[0] and test.sentences[1] == full.sentences[10]
    assert sorted(test.sentences + train.sentences) == sorted(full.sentences)  # a partition of the file
    assert len(load_mr("test", fold=9, tokenize=False)) == 1066
    with pytest.raises(ValueError, match="fold"):
        load_mr("test", fold=10)


@real
def test_sst_counts_and_errors(tmp_path):
    assert len(load_sst("train", tokenize=False)) == 6920
    assert load_sst("test", fine=True, tokenize=False).label_counts() == {0: 279, 1: 633, 2: 389, 3: 510, 4: 399}
    assert load_text_dataset("sst2", "dev", tokenize=False).num_classes == 2
    with pytest.raises(ValueError, match="split"):
        load_trec("dev")
    with pytest.raises(ValueError, match="name"):
        load_text_dataset("imdb", "train")
    with pytest.raises(DataNotFoundError, match="TREC"):
        load_trec("train", root=tmp_path)


def test_read_lines_split_on_newline_only(tmp_path):
    p = tmp_path / "mr.txt"
    p.write_bytes(b"0 a \x85 b\n1 caf\xe9\n")  # cp1252 bytes, not UTF-8
    assert read_lines(p) == ["0 a \u2026 b", "1 caf\u00e9"]
    assert tokenize("It's fine.") == ["it", "'s", "fine", "."]


def test_vocabulary_batch():
    v = Vocabulary.build([["a", "b", "a"], ["c"]])
    assert v.itos[:3] == ["<pad>", "<unk>", "a"] and len(v) == 5
    x = v.batch([["a", "zzz"], ["c"], []])
    assert x.tolist() == [[2, 1], [4, 0], [1, 0]]
