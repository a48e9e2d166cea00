"""SUBJ, CR, MPQA on the real files (sizes of Kim 2014 Table 1 / shared/data/README.md section 8, the 10 folds, label
order, cp1252) and strict per-file encodings on hand-made files (a bad byte is an error naming file:line)."""

from pathlib import Path

import pytest

from graph_rma.data.root import DataNotFoundError, resolve_root
from graph_rma.data.text import (
    DATASETS,
    ENCODINGS,
    load_cr,
    load_mpqa,
    load_subj,
    load_text_dataset,
    numbered_lines,
    read_lines,
)

TEXT = resolve_root("text")
HAVE = all((TEXT / rel).is_file() for rel in ("SUBJ/subj.all", "CR/custrev.all", "MPQA/mpqa.all"))
real = pytest.mark.skipif(not HAVE, reason="SUBJ/CR/MPQA not found under $GRAPH_RMA_DATA/text (datasets/text.md)")


def _snapshot(folder: Path):
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*"))


# name, loader, size, class counts, fold sizes (fold k = lines i with i % 10 == k), 0-based indices of empty texts
REAL = {
    "subj": (load_subj, 10000, {0: 5000, 1: 5000}, [1000] * 10, []),
    "cr": (load_cr, 3775, {0: 1368, 1: 2407}, [378] * 5 + [377] * 5, [768, 1367, 3690, 3774]),
    "mpqa": (load_mpqa, 10606, {0: 7294, 1: 3312}, [1061] * 6 + [1060] * 4, [6414, 7293, 10605]),
}


@real
@pytest.mark.parametrize("name", list(REAL))
def test_sizes_labels_and_fixed_folds(name):
    loader, size, counts, fold_sizes, empty = REAL[name]
    before = _snapshot(TEXT)
    full = loader("all", tokenize=False)
    assert len(full) == size and full.label_counts() == counts and full.num_classes == 2
    assert [i for i, s in enumerate(full.sentences) if s == ""] == empty  # upstream's label-only lines, kept
    # the file lists class 0, then class 1
    n0 = counts[0]
    assert set(full.labels[:n0]) == {0} and set(full.labels[n0:]) == {1}
    tests = [load_text_dataset(name, "test", fold=k, tokenize=False) for k in range(10)]
    assert [len(t) for t in tests] == fold_sizes
    for k, t in enumerate(tests):
        assert t.sentences == full.sentences[k::10] and t.labels == full.labels[k::10]
        # class proportions of the whole file to within one sentence per class
        for c, n in counts.items():
            assert abs(t.label_counts()[c] - n / 10) <= 1
    train = load_text_dataset(name, "train", fold=3, tokenize=False)
    assert len(train) == size - fold_sizes[3]
    assert sorted(train.sentences + tests[3].sentences) == sorted(full.sentences)
    assert train.split == "train[fold=3]"
    assert _snapshot(TEXT) == before  # loaders only read


@real
def test_subj_is_cp1252_and_all_file_is_subjective_then_objective():
    full = load_subj("all", tokenize=False)
    assert full.classes == ("subjective", "objective")
    text = "\n".join(full.sentences)
    assert text.count("\u2026") == 21 and "\x85" not in text  # 0x85 is "...", not a U+0085 line break
    assert full.sentences[20].startswith("si el siglo xxi necesita de h\u00e9roes")  # 0xE9 on line 21
    assert text.count("\u2013") == 15 and text.count("\u2014") == 7  # 0x96, 0x97
    subjective = read_lines(TEXT / "SUBJ/raw/subj.subjective", "cp1252")
    objective = read_lines(TEXT / "SUBJ/raw/subj.objective", "utf-8")  # pure ASCII
    assert full.sentences == subjective + objective
    # Declared UTF-8, the same file fails at its first non-UTF-8 line, named.
    with pytest.raises(ValueError, match=r"subj\.all:21: not valid utf-8 \(byte e9"):
        numbered_lines(TEXT / "SUBJ/subj.all", "utf-8")


@real
def test_every_declared_encoding_decodes_its_file():
    checked = 0
    for rel, enc in ENCODINGS.items():
        if (TEXT / rel).is_file():
            assert numbered_lines(TEXT / rel, enc), rel
            checked += 1
    assert checked == len(ENCODINGS)
    assert {ENCODINGS[r] for r in ("CR/custrev.all", "MPQA/mpqa.all", "SUBJ/subj.all")} == {"utf-8", "cp1252"}


@real
def test_cr_tokens_and_dispatch():
    te = load_text_dataset("CR", "test", fold=0)
    assert te.name == "CR" and len(te.tokens) == 378
    assert te.sentences[1] == "apex does n 't answer the phone ."  # line 11 of custrev.all, in fold 0
    assert te.tokens[1] == ["apex", "does", "n", "'t", "answer", "the", "phone", "."]
    assert set(DATASETS) >= {"subj", "cr", "mpqa"}
    with pytest.raises(ValueError, match="fold"):
        load_mpqa("test", fold=10)
    with pytest.raises(ValueError, match="split"):
        load_subj("dev")


def test_bad_byte_in_a_utf8_file_names_file_and_line(tmp_path):
    (tmp_path / "CR").mkdir()
    path = tmp_path / "CR" / "custrev.all"
    path.write_bytes(b"0 fine\n\n1 caf\xe9 ok\n")  # line 3 holds Latin-1 0xE9, not UTF-8
    with pytest.raises(ValueError, match=r"custrev\.all:3: not valid utf-8 \(byte e9 at column 6\)"):
        load_cr("all", root=tmp_path, tokenize=False)
    path.write_bytes(b"0 fine\n\n1 caf\xc3\xa9 ok\n")  # the same text in UTF-8 loads; blank line skipped
    assert load_cr("all", root=tmp_path, tokenize=False).sentences == ["fine", "caf\u00e9 ok"]


def test_cp1252_is_strict_too(tmp_path):
    (tmp_path / "SUBJ").mkdir()
    path = tmp_path / "SUBJ" / "subj.all"
    path.write_bytes(b"0 a \x85 b \x93q\x94\n1 bad \x81 byte\n")  # 0x81 is undefined in cp1252
    with pytest.raises(ValueError, match=r"subj\.all:2: not valid cp1252 \(byte 81"):
        load_subj("all", root=tmp_path, tokenize=False)
    path.write_bytes(b"0 a \x85 b \x93q\x94\n1 ok\n")
    ds = load_subj("all", root=tmp_path, tokenize=False)
    assert ds.sentences == ["a \u2026 b \u201cq\u201d", "ok"] and ds.labels == [0, 1]


def test_missing_files_and_bad_labels(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"MPQA/mpqa\.all"):
        load_mpqa("train", root=tmp_path)
    (tmp_path / "MPQA").mkdir()
    (tmp_path / "MPQA" / "mpqa.all").write_bytes(b"0 good\n2 three classes?\n")
    with pytest.raises(ValueError, match=r"mpqa\.all:2: label 2 outside \[0, 2\)"):
        load_mpqa("all", root=tmp_path, tokenize=False)
