r"""Graph-to-text data shared by AGENDA and WebNLG: records, GraphWriter's graph, vocabulary, encoding, batching.

A :class:`GraphTextRecord` is one example: ``entities`` (text), one type tag per entity (``<task>``, ``<ent>``, ...),
``(head, relation, tail)`` ``triples`` and a target ``text`` whose entity mentions are placeholders ``<tag_i>``
(copy entity ``i``; ``tag`` is the entity's type tag without brackets), plus an optional ``title`` and optional
per-triple relation texts. :class:`GraphTextSplits` holds train/dev/test records and the relation names;
:func:`build_vocab`, :class:`GraphTextEncoder` and :func:`collate` turn records into the tensors of
:class:`graph_rma.models.GraphWriter`. The dataset modules (:mod:`graph_rma.data.agenda`, :mod:`graph_rma.data.webnlg`)
read their files into these types and keep only what differs (AGENDA's readers and protocols; WebNLG's XML, open
relation vocabulary and multiple references).

:func:`build_graphwriter_graph` turns ``entities`` and ``(head, relation, tail)`` triples into GraphWriter's
graph (Koncel-Kedziorski et al., 2019, Sec. 3), in PyG's convention that an edge ``j -> i`` carries a message from
``j`` to ``i`` (``edge_index[0]`` sources, ``edge_index[1]`` targets). Node order, for ``n`` entities and ``m``
triples:

* ``0 .. n-1``: the entities, in input order;
* ``n``: one global node, linked both ways to every entity;
* ``n + 1 + 2k`` and ``n + 2 + 2k``: triple ``k = (a, r, b)`` becomes a relation node ``r`` and an inverse node
  ``r_inv`` with edges ``a -> r -> b`` and ``b -> r_inv -> a``;
* every node has a self-loop.

Node labels (``node_label``) say which embedding a non-entity node starts from: ``r`` for a relation node,
``R + r`` for an inverse node (``R`` relation types) and ``2R`` for the global node; entity nodes carry their entity
index (their start vector comes from encoding the entity's text).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

from .._errors import GraphRMAError

__all__ = [
    "ENTITY",
    "GLOBAL",
    "RELATION",
    "INVERSE",
    "PLACEHOLDER",
    "build_graphwriter_graph",
    "Vocab",
    "replace_mentions",
    "relexicalise",
    "GraphTextRecord",
    "GraphTextSplits",
    "build_vocab",
    "EncodedRecord",
    "GraphTextEncoder",
    "collate",
]

#: A copy placeholder in a target text: ``<tag_i>`` copies entity ``i`` (``tag``: its type without brackets).
PLACEHOLDER = re.compile(r"^<([a-z]+)_(\d+)>$")

# node kinds
ENTITY, GLOBAL, RELATION, INVERSE = 0, 1, 2, 3


def build_graphwriter_graph(
    entities: Sequence[str],
    triples: Sequence[Tuple[int, int, int]],
    relation_names: Sequence[str],
) -> Data:
    """GraphWriter's graph for one record (see the module docstring for the node order and edges).

    Args:
        entities: entity strings (only their number is used here; ``entities`` is stored on the result).
        triples: ``(head entity index, relation index, tail entity index)``.
        relation_names: the relation vocabulary (``R = len(relation_names)``).

    Returns:
        ``Data`` with ``edge_index [2, E]``, ``num_nodes``, ``node_kind [N]`` (0 entity, 1 global, 2 relation,
        3 inverse), ``node_label [N]`` (entity index, or relation-embedding index as above), ``num_entities`` and
        ``num_relations``.
    """
    n, R = len(entities), len(relation_names)
    if n == 0:
        raise GraphRMAError("entities: expected at least one entity")
    if R == 0:
        raise GraphRMAError("relation_names: expected at least one relation name")
    m = len(triples)
    N = n + 1 + 2 * m
    g = n
    src: List[int] = []
    dst: List[int] = []
    for e in range(n):
        src += [e, g]
        dst += [g, e]
    kind = [ENTITY] * n + [GLOBAL] + [RELATION, INVERSE] * m
    label = list(range(n)) + [2 * R]
    for k, t in enumerate(triples):
        if len(t) != 3:
            raise GraphRMAError(f"triples: triple {k} is {t!r}, expected (head, relation, tail)")
        a, r, b = (int(v) for v in t)
        if not (0 <= a < n and 0 <= b < n):
            raise GraphRMAError(f"triples: triple {k} {t!r} names an entity outside 0..{n - 1}")
        if not 0 <= r < R:
            raise GraphRMAError(f"triples: triple {k} {t!r} names a relation outside 0..{R - 1}")
        rn, ri = n + 1 + 2 * k, n + 2 + 2 * k
        src += [a, rn, b, ri]
        dst += [rn, b, ri, a]
        label += [r, R + r]
    src += list(range(N))
    dst += list(range(N))
    return Data(
        edge_index=torch.tensor([src, dst], dtype=torch.long),
        num_nodes=N,
        node_kind=torch.tensor(kind, dtype=torch.long),
        node_label=torch.tensor(label, dtype=torch.long),
        num_entities=n,
        num_relations=R,
    )


class Vocab:
    """A token <-> id table with special tokens first (``<pad>`` = 0, ``<unk>`` = 1, ``<s>`` = 2, ``</s>`` = 3).

    Build it from training text with :meth:`build`; store it in a checkpoint with :meth:`to_list` (a plain list of
    strings) and restore it with :meth:`from_list`.
    """

    PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
    SPECIALS = (PAD, UNK, BOS, EOS)

    def __init__(self, itos: Sequence[str]) -> None:
        itos = list(itos)
        if itos[: len(self.SPECIALS)] != list(self.SPECIALS):
            raise GraphRMAError(f"itos: must start with {list(self.SPECIALS)}, got {itos[:4]}")
        if len(set(itos)) != len(itos):
            raise GraphRMAError("itos: duplicate tokens")
        self.itos = itos
        self.stoi: Dict[str, int] = {t: i for i, t in enumerate(itos)}

    @classmethod
    def build(
        cls,
        sentences: Iterable[Sequence[str]],
        min_freq: int = 1,
        extra: Sequence[str] = (),
        max_size: Optional[int] = None,
    ) -> "Vocab":
        """Tokens seen at least ``min_freq`` times (most frequent first, ties alphabetical), after ``extra``."""
        if min_freq < 1:
            raise GraphRMAError(f"min_freq: expected >= 1, got {min_freq}")
        counts = Counter(tok for sent in sentences for tok in sent)
        head = list(cls.SPECIALS) + [t for t in dict.fromkeys(extra) if t not in cls.SPECIALS]
        seen = set(head)
        rest = sorted((t for t, c in counts.items() if c >= min_freq and t not in seen), key=lambda t: (-counts[t], t))
        if max_size is not None:
            rest = rest[: max(0, max_size - len(head))]
        return cls(head + rest)

    @classmethod
    def from_list(cls, itos: Sequence[str]) -> "Vocab":
        return cls(itos)

    def to_list(self) -> List[str]:
        return list(self.itos)

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def unk_id(self) -> int:
        return 1

    @property
    def bos_id(self) -> int:
        return 2

    @property
    def eos_id(self) -> int:
        return 3

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: Sequence[str]) -> List[int]:
        return [self.stoi.get(t, 1) for t in tokens]

    def decode(self, ids: Sequence[int]) -> List[str]:
        return [self.itos[i] for i in ids]

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens)"


def replace_mentions(
    tokens: Sequence[str], entities: Sequence[Sequence[str]], placeholder
) -> Tuple[List[str], List[bool]]:
    """Delexicalisation shared by AGENDA and WebNLG: scanning ``tokens`` left to right, replace each exact,
    contiguous mention of an entity's tokens by ``placeholder(i)``; at each position the longest matching entity
    wins (ties: the lower index) and matches do not overlap. Returns the new tokens and, per entity, whether it was
    found."""
    ents = sorted(enumerate(entities), key=lambda p: (-len(p[1]), p[0]))
    found = [False] * len(entities)
    out: List[str] = []
    j = 0
    while j < len(tokens):
        for i, et in ents:
            if et and list(tokens[j : j + len(et)]) == list(et):
                out.append(placeholder(i))
                found[i] = True
                j += len(et)
                break
        else:
            out.append(tokens[j])
            j += 1
    return out, found


def relexicalise(tokens: Sequence[str], entities: Sequence[str]) -> str:
    """Replace each ``<tag_i>`` placeholder by ``entities[i]`` (unknown indices are kept as they are)."""
    out = []
    for tok in tokens:
        m = PLACEHOLDER.match(tok)
        if m and int(m.group(2)) < len(entities):
            out.append(entities[int(m.group(2))])
        else:
            out.append(tok)
    return " ".join(out)


# ------------------------------------------------------------------------------------------------------------------
# Records and splits
# ------------------------------------------------------------------------------------------------------------------
@dataclass
class GraphTextRecord:
    """One graph-to-text example.

    Attributes:
        title: an optional text the decoder also attends over (AGENDA's paper title; ``""`` for none).
        entities: entity texts (words separated by spaces).
        types: one type tag per entity, e.g. ``"<task>"``; fed to the decoder after a copy of that entity.
        triples: ``(head entity, relation index, tail entity)``.
        text: the tokenised target with ``<tag_i>`` placeholders for entity mentions.
        source: where the record came from (``file:line``), for error messages.
        relations: optional per-triple relation *texts* (open-vocabulary relations; read by the encoder of
            :mod:`graph_rma.data.webnlg`); they also enter the vocabulary.
    """

    title: str
    entities: List[str]
    types: List[str]
    triples: List[Tuple[int, int, int]]
    text: str
    source: str = ""
    relations: List[str] = field(default_factory=list)

    @property
    def title_tokens(self) -> List[str]:
        return self.title.lower().split()

    @property
    def text_tokens(self) -> List[str]:
        return self.text.split()

    def relexicalised(self) -> str:
        """The target text with every ``<tag_i>`` replaced by entity ``i``'s text."""
        return relexicalise(self.text_tokens, self.entities)


@dataclass
class GraphTextSplits:
    """Train / dev / test records of one protocol, with the relation names and a one-line description."""

    train: List[GraphTextRecord]
    dev: List[GraphTextRecord]
    test: List[GraphTextRecord]
    relation_names: List[str]
    protocol: str
    description: str = ""

    def split(self, name: str) -> List[GraphTextRecord]:
        """``"train"``, ``"dev"`` (alias ``"val"``) or ``"test"``."""
        if name not in ("train", "dev", "val", "test"):
            raise GraphRMAError(f"split: expected train, dev (val) or test, got {name!r}")
        return getattr(self, "dev" if name == "val" else name)


# ------------------------------------------------------------------------------------------------------------------
# Tensors
# ------------------------------------------------------------------------------------------------------------------
def build_vocab(
    records: Sequence[GraphTextRecord], min_freq: int = 2, max_size: Optional[int] = None, extra: Sequence[str] = ()
) -> Vocab:
    """One vocabulary for title words, entity words, relation-text words and target words (placeholders
    excluded), after the type tags ``extra``."""

    def sents():
        for r in records:
            yield r.title_tokens
            for e in r.entities:
                yield e.split()
            for rel in r.relations:
                yield rel.split()
            yield [t for t in r.text_tokens if not PLACEHOLDER.match(t)]

    return Vocab.build(sents(), min_freq=min_freq, extra=extra, max_size=max_size)


@dataclass
class EncodedRecord:
    """A record as ids: its graph, entity words, type tags, title and the decoder's input and output ids."""

    graph: Data
    entity_ids: List[List[int]]
    type_ids: List[int]
    title_ids: List[int]
    target_in: List[int]
    target_out: List[int]
    record: Optional[GraphTextRecord] = field(repr=False, default=None)


class GraphTextEncoder:
    """Turns records into ids: words through ``vocab``; a placeholder ``<tag_i>`` in the target becomes output
    id ``len(vocab) + i`` (copy entity ``i``) and decoder input id ``vocab[types[i]]`` (its type tag).

    Args:
        vocab: the word vocabulary.
        relation_names: the relation types (``R`` of :func:`build_graphwriter_graph`).
        max_target_len: cut targets to this many tokens (the cut target then has no ``</s>``); ``None`` keeps all.
    """

    def __init__(self, vocab: Vocab, relation_names: Sequence[str], max_target_len: Optional[int] = None) -> None:
        self.vocab = vocab
        self.relation_names = list(relation_names)
        self.max_target_len = max_target_len

    def encode(self, rec: GraphTextRecord) -> EncodedRecord:
        v = self.vocab
        V = len(v)
        toks = rec.text_tokens
        cut = self.max_target_len is not None and len(toks) > self.max_target_len
        if cut:
            toks = toks[: self.max_target_len]
        tin, tout = [v.bos_id], []
        for tok in toks:
            m = PLACEHOLDER.match(tok)
            if m:
                i = int(m.group(2))
                tout.append(V + i)
                tin.append(v.stoi.get(rec.types[i], v.unk_id))
            else:
                idx = v.stoi.get(tok, v.unk_id)
                tout.append(idx)
                tin.append(idx)
        if cut:
            tin = tin[:-1]
        else:
            tout.append(v.eos_id)
        return EncodedRecord(
            graph=build_graphwriter_graph(rec.entities, rec.triples, self.relation_names),
            entity_ids=[v.encode(e.split()) or [v.unk_id] for e in rec.entities],
            type_ids=[v.stoi.get(t, v.unk_id) for t in rec.types],
            title_ids=v.encode(rec.title_tokens) or [v.unk_id],
            target_in=tin,
            target_out=tout,
            record=rec,
        )

    def encode_all(self, records: Sequence[GraphTextRecord]) -> List[EncodedRecord]:
        return [self.encode(r) for r in records]

    def decode(self, ids: Sequence[int], rec: GraphTextRecord, relex: bool = True) -> str:
        """Output ids -> text; copy ids become ``<tag_i>`` or, with ``relex``, entity ``i``'s text."""
        V = len(self.vocab)
        toks = []
        for i in ids:
            if i == self.vocab.eos_id:
                break
            if i >= V:
                e = i - V
                toks.append(rec.entities[e] if relex else f"{rec.types[e][:-1]}_{e}>")
            elif i not in (self.vocab.pad_id, self.vocab.bos_id):
                toks.append(self.vocab.itos[i])
        return " ".join(toks)


def _pad(seqs: Sequence[Sequence[int]], value: int = 0) -> Tuple[Tensor, Tensor]:
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    out = torch.full((len(seqs), int(lengths.max()) if len(seqs) else 0), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out, lengths


def collate(items: Sequence[EncodedRecord]) -> Dict[str, Tensor]:
    """A batch: the graphs as one PyG :class:`~torch_geometric.data.Batch` plus padded id tensors.

    Keys: ``graph``; ``entity_tokens [sum n_b, Le]``, ``entity_lengths``; ``entity_types [B, Emax]``;
    ``num_entities [B]``; ``title [B, Lt]``, ``title_lengths``; ``target_in``/``target_out [B, T]`` (0 = pad).
    """
    if not items:
        raise GraphRMAError("items: expected at least one encoded record")
    ent_tokens, ent_lengths = _pad([e for it in items for e in it.entity_ids])
    types, num_entities = _pad([it.type_ids for it in items])
    title, title_lengths = _pad([it.title_ids for it in items])
    tin, _ = _pad([it.target_in for it in items])
    tout, _ = _pad([it.target_out for it in items])
    return {
        "graph": Batch.from_data_list([it.graph for it in items]),
        "entity_tokens": ent_tokens,
        "entity_lengths": ent_lengths,
        "entity_types": types,
        "num_entities": num_entities,
        "title": title,
        "title_lengths": title_lengths,
        "target_in": tin,
        "target_out": tout,
    }
