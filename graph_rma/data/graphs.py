r"""Graph construction shared by the graph-to-text loaders (AGENDA, WebNLG), and a small token vocabulary.

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

from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch_geometric.data import Data

__all__ = ["ENTITY", "GLOBAL", "RELATION", "INVERSE", "build_graphwriter_graph", "Vocab"]

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
        raise ValueError("entities: expected at least one entity")
    if R == 0:
        raise ValueError("relation_names: expected at least one relation name")
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
            raise ValueError(f"triples: triple {k} is {t!r}, expected (head, relation, tail)")
        a, r, b = (int(v) for v in t)
        if not (0 <= a < n and 0 <= b < n):
            raise ValueError(f"triples: triple {k} {t!r} names an entity outside 0..{n - 1}")
        if not 0 <= r < R:
            raise ValueError(f"triples: triple {k} {t!r} names a relation outside 0..{R - 1}")
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
            raise ValueError(f"itos: must start with {list(self.SPECIALS)}, got {itos[:4]}")
        if len(set(itos)) != len(itos):
            raise ValueError("itos: duplicate tokens")
        self.itos = itos
        self.stoi: Dict[str, int] = {t: i for i, t in enumerate(itos)}

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1, extra: Sequence[str] = (),
              max_size: Optional[int] = None) -> "Vocab":
        """Tokens seen at least ``min_freq`` times (most frequent first, ties alphabetical), after ``extra``."""
        if min_freq < 1:
            raise ValueError(f"min_freq: expected >= 1, got {min_freq}")
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


def replace_mentions(tokens: Sequence[str], entities: Sequence[Sequence[str]],
                     placeholder) -> Tuple[List[str], List[bool]]:
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

