r"""Sentence-classification sets of Kim (2014): TREC, MR, SST, SUBJ, CR, MPQA, with nltk tokenisation and a vocabulary.

Files (Kim's / harvardnlp's ``*.all`` and ``stsa.*``, one ``<label> <text>`` per line) are read from ``root``,
else ``$GRAPH_RMA_DATA/text`` (see ``datasets/text.md``):

==========  =========================================  ===================================================
dataset     files                                      splits
==========  =========================================  ===================================================
TREC        ``TREC/TREC.{train,test}.all``             train 5,452 / test 500, 6 coarse classes
MR          ``MR/rt-polarity.all``                     10,662 sentences, no official split: 10 folds
                                                       (sentence ``i`` in fold ``i % 10``); ``test`` is fold
                                                       ``fold`` (1,067 or 1,066), ``train`` the other nine
SST-2/1     ``SST-{2,1}/stsa.{binary,fine}.{train,dev,test}``   sentence level (no phrase-level training data)
SUBJ        ``SUBJ/subj.all``                          10,000 (5,000 subjective = 0, then 5,000 objective = 1)
CR          ``CR/custrev.all``                         3,775 (1,368 negative = 0, then 2,407 positive = 1)
MPQA        ``MPQA/mpqa.all``                          10,606 (7,294 negative = 0, then 3,312 positive = 1)
==========  =========================================  ===================================================

MR, SUBJ, CR and MPQA have no official split (Kim 2014 reports 10-fold cross-validation). They share one fixed,
RNG-free protocol: line ``i`` (0-based) of the ``.all`` file is in fold ``i % 10``; ``split="test"`` is fold
``fold``, ``"train"`` the other nine, ``"all"`` everything. The files list all of class 0 and then all of class 1,
so every fold has the class proportions of the whole file to within one sentence per class.

Encoding is declared per file in :data:`ENCODINGS` and decoded strictly, with no fallback: a byte that is not
valid in the declared encoding raises a ``GraphRMAError`` naming ``file:line``. ``TREC.train.all``, ``MR/*`` and
``SUBJ/subj.all`` are Windows-1252 (``0x85``, ``0x91``, ``0x96``, ``0x97`` are "…", "‘", "–", "—"; cp1252 leaves
five bytes undefined, and none occurs in these files); the SST files, ``TREC.test.all``, ``CR`` and ``MPQA``
(pure ASCII) are UTF-8. Lines are split on ``"\n"`` only, never ``str.splitlines()``, which would also break
lines at U+0085 (what Latin-1 would make of byte ``0x85``).

Tokenisation: :func:`nltk.word_tokenize` (Punkt sentence splitting from ``punkt_tab``, looked up in
``$GRAPH_RMA_DATA/nltk_data`` as well as nltk's usual paths), lower-cased.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .._errors import GraphRMAError
from .root import DataNotFoundError, missing_data_message, resolve_root

__all__ = [
    "TextDataset",
    "Vocabulary",
    "load_trec",
    "load_mr",
    "load_sst",
    "load_subj",
    "load_cr",
    "load_mpqa",
    "load_text_dataset",
    "read_lines",
    "tokenize",
    "TREC_CLASSES",
    "DATASETS",
    "ENCODINGS",
]

TREC_CLASSES = ("DESC", "ENTY", "ABBR", "HUM", "LOC", "NUM")
MR_CLASSES = ("negative", "positive")
SST2_CLASSES = ("negative", "positive")
SST1_CLASSES = ("very negative", "negative", "neutral", "positive", "very positive")
SUBJ_CLASSES = ("subjective", "objective")
CR_CLASSES = ("negative", "positive")
MPQA_CLASSES = ("negative", "positive")
MR_FOLDS = 10
NUM_FOLDS = MR_FOLDS

# The encoding of every file the loaders read, checked byte by byte against the shared copies (see datasets/text.md).
ENCODINGS: Dict[str, str] = {
    "TREC/TREC.train.all": "cp1252",  # one byte 0xF0 ("ð")
    "TREC/TREC.test.all": "utf-8",
    "MR/rt-polarity.all": "cp1252",  # 316 non-ASCII bytes, 23 of them 0x85 ("…")
    "SST-2/stsa.binary.train": "utf-8",
    "SST-2/stsa.binary.dev": "utf-8",
    "SST-2/stsa.binary.test": "utf-8",
    "SST-1/stsa.fine.train": "utf-8",
    "SST-1/stsa.fine.dev": "utf-8",
    "SST-1/stsa.fine.test": "utf-8",
    "SUBJ/subj.all": "cp1252",  # 179 non-ASCII bytes, 21 of them 0x85 ("…")
    "CR/custrev.all": "utf-8",  # pure ASCII
    "MPQA/mpqa.all": "utf-8",  # pure ASCII
}


@dataclass
class TextDataset:
    """One split of a sentence-classification set: raw sentences, nltk tokens and integer labels."""

    name: str
    split: str
    sentences: List[str]
    labels: List[int]
    classes: Tuple[str, ...]
    tokens: List[List[str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def label_counts(self) -> Dict[int, int]:
        return dict(sorted(Counter(self.labels).items()))

    def __repr__(self) -> str:
        return f"TextDataset({self.name!r}, split={self.split!r}, size={len(self)}, classes={self.num_classes})"


def numbered_lines(path: Union[str, os.PathLike], encoding: str) -> List[Tuple[int, str]]:
    """``(1-based line number, stripped text)`` of the non-empty lines of ``path``, decoded strictly as ``encoding``.

    Lines are split on ``"\\n"`` only. A byte sequence that is not valid ``encoding`` raises ``GraphRMAError``
    naming ``path:line`` and the byte; nothing is replaced or guessed.
    """
    out = []
    for n, raw in enumerate(Path(path).read_bytes().split(b"\n"), 1):
        try:
            line = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            bad = raw[exc.start : exc.end]
            raise GraphRMAError(
                f"{path}:{n}: not valid {encoding} (byte {bad.hex(' ')} at column {exc.start + 1}); "
                f"the file is declared {encoding} in graph_rma.data.text.ENCODINGS"
            ) from None
        line = line.rstrip("\r").strip()
        if line:
            out.append((n, line))
    return out


def read_lines(path: Union[str, os.PathLike], encoding: Optional[str] = None) -> List[str]:
    """Non-empty lines of ``path``, split on ``"\\n"`` only.

    With ``encoding`` the file is decoded strictly (see :func:`numbered_lines`). Without it (kept for callers that
    read files of unknown origin) the first of UTF-8, cp1252, latin-1 that decodes the whole file is used; the
    dataset loaders always pass the encoding declared in :data:`ENCODINGS`.
    """
    if encoding is not None:
        return [line for _, line in numbered_lines(path, encoding)]
    raw = Path(path).read_bytes()
    for enc in ("utf-8", "cp1252", "latin-1"):
        try:
            text = raw.decode(enc)
            break
        except UnicodeDecodeError:
            continue
    return [line.rstrip("\r").strip() for line in text.split("\n") if line.strip()]


_NLTK_READY: Optional[bool] = None


def _nltk_ready() -> bool:
    global _NLTK_READY
    if _NLTK_READY is None:
        import nltk

        extra = resolve_root("nltk_data")
        if extra.is_dir() and str(extra) not in nltk.data.path:
            nltk.data.path.insert(0, str(extra))
        try:
            nltk.data.find("tokenizers/punkt_tab/english/")
            _NLTK_READY = True
        except LookupError:
            warnings.warn(
                "nltk punkt_tab not found ($GRAPH_RMA_DATA/nltk_data or nltk's paths): tokenising each "
                "sentence as one line (word_tokenize(preserve_line=True))"
            )
            _NLTK_READY = False
    return _NLTK_READY


def tokenize(sentence: str, lower: bool = True) -> List[str]:
    """nltk's ``word_tokenize`` (Treebank words within Punkt sentences), lower-cased by default."""
    import nltk

    toks = nltk.word_tokenize(sentence, preserve_line=not _nltk_ready())
    return [t.lower() for t in toks] if lower else toks


def _labelled(path: Path, num_classes: int, encoding: str) -> Tuple[List[str], List[int]]:
    sentences, labels = [], []
    for n, line in numbered_lines(path, encoding):
        head, _, text = line.partition(" ")
        try:
            y = int(head)
        except ValueError:
            raise GraphRMAError(f"{path}:{n}: expected '<label> <text>', got {line[:40]!r}") from None
        if not 0 <= y < num_classes:
            raise GraphRMAError(f"{path}:{n}: label {y} outside [0, {num_classes})")
        sentences.append(text.strip())
        labels.append(y)
    return sentences, labels


def _files(name: str, root: Optional[Union[str, os.PathLike]], rels: Sequence[str]) -> List[Path]:
    base = resolve_root("text", root)
    paths = [base / r for r in rels]
    missing = [r for r, p in zip(rels, paths) if not p.is_file()]
    if missing:
        raise DataNotFoundError(
            missing_data_message(
                name,
                base,
                missing,
                "The files and their checksums: the documentation's Datasets > Text page (datasets/text.md in "
                "the source repository).",
                family="text",
            )
        )
    return paths


def _make(name, split, sentences, labels, classes, do_tokenize) -> TextDataset:
    ds = TextDataset(name, split, sentences, labels, tuple(classes))
    if do_tokenize:
        ds.tokens = [tokenize(s) for s in sentences]
    return ds


def _check_split(split: str, allowed: Sequence[str]) -> None:
    if split not in allowed:
        raise GraphRMAError(f"split: expected one of {tuple(allowed)}, got {split!r}")


def load_trec(split: str = "train", root=None, tokenize: bool = True) -> TextDataset:
    """TREC question classification, 6 coarse classes (:data:`TREC_CLASSES`): train 5,452, test 500."""
    _check_split(split, ("train", "test"))
    rel = f"TREC/TREC.{split}.all"
    (path,) = _files("TREC", root, [rel])
    s, y = _labelled(path, len(TREC_CLASSES), ENCODINGS[rel])
    return _make("TREC", split, s, y, TREC_CLASSES, tokenize)


def load_mr(split: str = "train", fold: int = 0, root=None, tokenize: bool = True) -> TextDataset:
    """Movie-review polarity (Pang & Lee 2005), 10,662 sentences; fixed 10-fold split by line number.

    Sentence ``i`` (0-based line of ``rt-polarity.all``, negatives first) belongs to fold ``i % 10``;
    ``split="test"`` is fold ``fold``, ``"train"`` the other nine, ``"all"`` everything.
    """
    return _load_folds("MR", "MR/rt-polarity.all", MR_CLASSES, split, fold, root, tokenize)


def _load_folds(
    name: str, rel: str, classes: Sequence[str], split: str, fold: int, root, tokenize: bool
) -> TextDataset:
    """The fixed 10-fold protocol of MR, SUBJ, CR, MPQA: line ``i`` of ``rel`` is in fold ``i % 10``."""
    _check_split(split, ("train", "test", "all"))
    if isinstance(fold, bool) or not isinstance(fold, int) or not 0 <= fold < NUM_FOLDS:
        raise GraphRMAError(f"fold: expected an int in [0, {NUM_FOLDS}), got {fold!r}")
    (path,) = _files(name, root, [rel])
    s, y = _labelled(path, len(classes), ENCODINGS[rel])
    if split != "all":
        keep = [i for i in range(len(s)) if (i % NUM_FOLDS == fold) == (split == "test")]
        s, y = [s[i] for i in keep], [y[i] for i in keep]
    return _make(name, split if split == "all" else f"{split}[fold={fold}]", s, y, classes, tokenize)


def load_subj(split: str = "train", fold: int = 0, root=None, tokenize: bool = True) -> TextDataset:
    """Subjectivity (Pang & Lee 2004), 10,000 sentences, 0 = subjective, 1 = objective; cp1252; MR's 10 folds.

    Every fold holds 1,000 sentences (500 per class); ``split="test"`` is fold ``fold``, ``"train"`` the other nine.
    """
    return _load_folds("SUBJ", "SUBJ/subj.all", SUBJ_CLASSES, split, fold, root, tokenize)


def load_cr(split: str = "train", fold: int = 0, root=None, tokenize: bool = True) -> TextDataset:
    """Customer reviews (Hu & Liu 2004), 3,775 sentences, 0 = negative, 1 = positive; MR's 10 folds.

    Folds 0-4 hold 378 sentences, folds 5-9 hold 377. Four lines have a label and no text (kept, as upstream).
    """
    return _load_folds("CR", "CR/custrev.all", CR_CLASSES, split, fold, root, tokenize)


def load_mpqa(split: str = "train", fold: int = 0, root=None, tokenize: bool = True) -> TextDataset:
    """MPQA opinion polarity (Wiebe et al. 2005), 10,606 phrases, 0 = negative, 1 = positive; MR's 10 folds.

    Folds 0-5 hold 1,061 phrases, folds 6-9 hold 1,060. Three lines have a label and no text (kept, as upstream).
    """
    return _load_folds("MPQA", "MPQA/mpqa.all", MPQA_CLASSES, split, fold, root, tokenize)


def load_sst(split: str = "train", fine: bool = False, root=None, tokenize: bool = True) -> TextDataset:
    """Stanford Sentiment Treebank at sentence level: SST-2 (``fine=False``) or SST-1 (5 classes)."""
    _check_split(split, ("train", "dev", "test"))
    folder, stem, classes = ("SST-1", "fine", SST1_CLASSES) if fine else ("SST-2", "binary", SST2_CLASSES)
    rel = f"{folder}/stsa.{stem}.{split}"
    (path,) = _files(folder, root, [rel])
    s, y = _labelled(path, len(classes), ENCODINGS[rel])
    return _make(folder, split, s, y, classes, tokenize)


DATASETS = ("trec", "mr", "sst2", "sst1", "subj", "cr", "mpqa")


def load_text_dataset(name: str, split: str, root=None, tokenize: bool = True, fold: int = 0) -> TextDataset:
    """By name: ``trec``, ``mr``, ``sst2``, ``sst1``, ``subj``, ``cr``, ``mpqa`` (``fold`` for MR, SUBJ, CR, MPQA)."""
    key = name.lower().replace("-", "")
    if key == "trec":
        return load_trec(split, root, tokenize)
    if key == "mr":
        return load_mr(split, fold, root, tokenize)
    if key == "subj":
        return load_subj(split, fold, root, tokenize)
    if key == "cr":
        return load_cr(split, fold, root, tokenize)
    if key == "mpqa":
        return load_mpqa(split, fold, root, tokenize)
    if key in ("sst2", "sst1"):
        return load_sst(split, key == "sst1", root, tokenize)
    raise GraphRMAError(f"name: expected one of {DATASETS}, got {name!r}")


class Vocabulary:
    """Token -> id map with ``<pad>`` = 0 and ``<unk>`` = 1, built from training tokens."""

    PAD, UNK = 0, 1

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        self.itos: List[str] = ["<pad>", "<unk>"]
        self.stoi: Dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        for t in tokens:
            if t not in self.stoi:
                self.stoi[t] = len(self.itos)
                self.itos.append(t)

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1) -> "Vocabulary":
        """Tokens occurring at least ``min_freq`` times, most frequent first (ties by first occurrence)."""
        if min_freq < 1:
            raise GraphRMAError(f"min_freq: expected >= 1, got {min_freq}")
        counts = Counter(t for s in sentences for t in s)
        return cls(t for t, c in counts.most_common() if c >= min_freq)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Sequence[str]) -> List[int]:
        return [self.stoi.get(t, self.UNK) for t in tokens]

    def batch(self, sentences: Sequence[Sequence[str]], max_len: Optional[int] = None) -> Tensor:
        """``[B, n]`` LongTensor of ids, right-padded with 0 (``n`` = longest sentence, capped at ``max_len``)."""
        ids = [self.encode(s)[:max_len] if max_len else self.encode(s) for s in sentences]
        n = max(1, max((len(i) for i in ids), default=1))
        out = torch.zeros(len(ids), n, dtype=torch.long)
        for r, row in enumerate(ids):
            if row:
                out[r, : len(row)] = torch.tensor(row, dtype=torch.long)
            else:  # an empty sentence becomes one <unk> so that attention has a key
                out[r, 0] = self.UNK
        return out
