r"""WebNLG 2017 challenge (Gardent et al., ACL 2017): DBpedia triples to English text.

Files under ``resolve_root("webnlg", root)`` (see ``datasets/webnlg.md``), as in the official release:

* ``train/<k>triples/*.xml`` (6,940 entries / 18,102 texts), ``dev/<k>triples/*.xml`` (872 / 2,268);
* ``test/testdata_with_lex.xml`` (1,862 / 4,928; 971 entries from the 10 *seen* categories of train/dev and 891
  from 5 *unseen* ones).

Each ``<entry category eid size>`` holds one ``<modifiedtripleset>`` of ``<mtriple>subject | property |
object</mtriple>`` (the standard model input; ``<originaltripleset>`` is ignored) and one ``<lex>`` per reference
text. :func:`read_xml` turns every entry into a :class:`WebNLGEntry` with

* ``triples``: the raw ``(subject, property, object)`` strings;
* ``entities``: the distinct subjects and objects as text, in order of first appearance (:func:`entity_text`:
  underscores become spaces, double quotes are dropped, ``52.0"(minutes)`` becomes ``52.0 (minutes)``);
* ``relations``: the property of each triple as text (:func:`relation_text`: camelCase and underscores split,
  lower-cased; relation names are open-vocabulary, 108 test relations never occur in train);
* ``triple_index``: ``(subject entity index, triple index, object entity index)`` per triple;
* ``references`` (all ``<lex>`` texts), ``category``, ``seen`` (category among the 10 training categories).

Malformed XML raises :class:`WebNLGFormatError` naming the file (and line/column); so does an entry without a
``<modifiedtripleset>`` or a triple that is not ``subject | property | object``.

:func:`build_graph` builds GraphWriter's graph for an entry (entity nodes, one global node, a relation node and an
inverse-relation node per triple, self-loops; the node order and edge directions of AGENDA's builder);
:func:`delexicalise` / :func:`relexicalise` swap entity mentions in tokenised text for ``<ent_i>`` placeholders and
back, for a copy mechanism.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch_geometric.data import Data

from .._errors import GraphRMAError
from .graph_text import (
    EncodedRecord,
    GraphTextEncoder,
    GraphTextRecord,
    GraphTextSplits,
    Vocab,
    build_graphwriter_graph,
    build_vocab,
    replace_mentions,
)
from .root import DataNotFoundError, missing_data_message, resolve_root

__all__ = [
    "SEEN_CATEGORIES",
    "UNSEEN_CATEGORIES",
    "WebNLGEncoder",
    "WebNLGEntry",
    "WebNLGFormatError",
    "WebNLGRecord",
    "build_graph",
    "build_webnlg_vocab",
    "delexicalise",
    "entity_text",
    "entry_records",
    "load_webnlg",
    "load_webnlg_splits",
    "read_xml",
    "relation_text",
    "relexicalise",
    "split_files",
]

#: The 10 DBpedia categories of train and dev ("seen"); the test set adds the 5 in :data:`UNSEEN_CATEGORIES`.
SEEN_CATEGORIES = (
    "Airport",
    "Astronaut",
    "Building",
    "City",
    "ComicsCharacter",
    "Food",
    "Monument",
    "SportsTeam",
    "University",
    "WrittenWork",
)
UNSEEN_CATEGORIES = ("Artist", "Athlete", "CelestialBody", "MeanOfTransportation", "Politician")
SPLITS = ("train", "dev", "test")

# node kinds, the same codes as the AGENDA graph builder
GLOBAL_TEXT = "<global>"
PLACEHOLDER = re.compile(r"^<ent_(\d+)>$")


class WebNLGFormatError(GraphRMAError):
    """A malformed WebNLG file; the message starts with the file name."""


@dataclass
class WebNLGEntry:
    """One WebNLG entry (one triple set and its reference texts)."""

    eid: str
    category: str
    size: int
    triples: List[Tuple[str, str, str]]
    entities: List[str]
    relations: List[str]
    triple_index: List[Tuple[int, int, int]]
    references: List[str]
    seen: bool
    source: str = field(default="", repr=False)

    def graph(self) -> Data:
        """:func:`build_graph` of this entry."""
        return build_graph(self.entities, self.relations, self.triple_index)


def entity_text(s: str) -> str:
    """``Alan_Bean`` -> ``Alan Bean``; ``"100305.0"(minutes)`` -> ``100305.0 (minutes)``; quotes dropped."""
    s = s.replace("_", " ")
    s = re.sub(r'"\s*\(', '" (', s)  # a unit glued to a quoted literal
    s = s.replace('"', "")
    return " ".join(s.split())


def relation_text(p: str) -> str:
    """``timeInSpace`` -> ``time in space``; ``ICAO_Location_Identifier`` -> ``icao location identifier``."""
    p = p.replace("_", " ")
    p = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", p)
    return " ".join(p.split()).lower()


def _fail(path: Path, msg: str) -> WebNLGFormatError:
    return WebNLGFormatError(f"{path}: {msg}")


def read_xml(path: Union[str, Path]) -> List[WebNLGEntry]:
    """All entries of one WebNLG XML file; :class:`WebNLGFormatError` (naming the file) if it is malformed."""
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        line, col = getattr(exc, "position", (None, None))
        raise _fail(path, f"malformed XML at line {line}, column {col}: {exc}") from exc
    if root.tag != "benchmark":
        raise _fail(path, f"expected a <benchmark> root element, got <{root.tag}>")
    entries: List[WebNLGEntry] = []
    for e in root.iter("entry"):
        eid = e.get("eid", "?")
        where = f"entry eid={eid!r}"
        category = e.get("category")
        if not category:
            raise _fail(path, f"{where} has no category attribute")
        tsets = e.findall("modifiedtripleset")
        if len(tsets) != 1:
            raise _fail(path, f"{where} has {len(tsets)} <modifiedtripleset> elements, expected 1")
        triples: List[Tuple[str, str, str]] = []
        for m in tsets[0].findall("mtriple"):
            parts = [x.strip() for x in (m.text or "").split(" | ")]
            if len(parts) != 3 or not all(parts):
                raise _fail(path, f"{where}: triple {m.text!r} is not 'subject | property | object'")
            triples.append((parts[0], parts[1], parts[2]))
        if not triples:
            raise _fail(path, f"{where} has no <mtriple>")
        try:
            size = int(e.get("size", len(triples)))
        except ValueError:
            raise _fail(path, f"{where} has a non-integer size {e.get('size')!r}") from None
        if size != len(triples):
            raise _fail(path, f"{where} has size={size} but {len(triples)} triples")
        index: Dict[str, int] = {}
        entities: List[str] = []
        tidx: List[Tuple[int, int, int]] = []
        for k, (s, p, o) in enumerate(triples):
            ids = []
            for x in (s, o):
                t = entity_text(x)
                if t not in index:
                    index[t] = len(entities)
                    entities.append(t)
                ids.append(index[t])
            tidx.append((ids[0], k, ids[1]))
        refs = [" ".join((lex.text or "").split()) for lex in e.findall("lex")]
        entries.append(
            WebNLGEntry(
                eid=eid,
                category=category,
                size=size,
                triples=triples,
                entities=entities,
                relations=[relation_text(p) for _, p, _ in triples],
                triple_index=tidx,
                references=[r for r in refs if r],
                seen=category in SEEN_CATEGORIES,
                source=str(path),
            )
        )
    return entries


def split_files(root: Union[str, Path], split: str) -> List[Path]:
    """The XML files of ``split`` under ``root``, in a fixed order (triple-set size, then file name)."""
    if split not in SPLITS:
        raise GraphRMAError(f"split: expected one of {SPLITS}, got {split!r}")
    root = Path(root)
    if split == "test":
        return [root / "test" / "testdata_with_lex.xml"]

    def size_of(p: Path) -> int:
        m = re.match(r"(\d+)", p.parent.name)
        return int(m.group(1)) if m else 0

    return sorted((root / split).glob("*/*.xml"), key=lambda p: (size_of(p), p.name))


def load_webnlg(split: str, root: Optional[Union[str, Path]] = None, seen: Optional[bool] = None) -> List[WebNLGEntry]:
    """Entries of ``split`` (``"train"``, ``"dev"`` or ``"test"``) from ``root`` or ``$GRAPH_RMA_DATA/webnlg``.

    ``seen=True``/``False`` keeps only entries of seen/unseen categories (useful on test); ``None`` keeps all.
    """
    base = resolve_root("webnlg", root)
    files = split_files(base, split)
    if not files or not all(f.is_file() for f in files):
        want = [f.relative_to(base) for f in files if not f.is_file()] or [f"{split}/<k>triples/*.xml"]
        raise DataNotFoundError(
            missing_data_message(
                "webnlg",
                base,
                want,
                hint="The WebNLG 2017 release is described in datasets/webnlg.md.",
                family="webnlg",
            )
        )
    entries = [e for f in files for e in read_xml(f)]
    if seen is not None:
        entries = [e for e in entries if e.seen == seen]
    return entries


# ------------------------------------------------------------------------------------------------------ graph
def build_graph(
    entities: Sequence[str], relations: Sequence[str], triple_index: Sequence[Tuple[int, int, int]]
) -> Data:
    r"""GraphWriter's graph (Koncel-Kedziorski et al., 2019) for one entry, with node texts.

    Node order for ``n`` entities and ``m`` triples (the same as AGENDA's builder):

    * ``0 .. n-1``: the entities;
    * ``n``: one global node (text ``"<global>"``), linked both ways to every entity;
    * ``n + 1 + 2k`` (relation) and ``n + 2 + 2k`` (inverse relation) for triple ``k = (a, r, b)``, with edges
      ``a -> r -> b`` and ``b -> r_inv -> a``; both nodes carry the relation's text, ``node_kind`` tells them
      apart;
    * a self-loop on every node.

    Edges follow PyG's convention (``edge_index[0]`` sources, ``edge_index[1]`` targets). Order within
    ``edge_index``: entity <-> global pairs, then per triple ``a->r, r->b, b->r_inv, r_inv->a``, then self-loops.

    Args:
        entities: entity texts.
        relations: relation texts (indexed by the middle element of ``triple_index``).
        triple_index: ``(head entity, relation, tail entity)`` indices.

    Returns:
        A ``Data`` with ``edge_index`` ``[2, E]``, ``num_nodes``, ``node_kind`` ``[N]`` (0 entity, 1 global,
        2 relation, 3 inverse), ``node_text`` (a list of N strings) and ``num_entities``.
    """
    if len(relations) == 0:
        raise GraphRMAError("relations: expected at least one relation text")
    data = build_graphwriter_graph(entities, triple_index, relations)
    text = list(entities) + [GLOBAL_TEXT]
    for a, r, b in triple_index:
        text += [relations[int(r)], relations[int(r)]]
    return Data(
        edge_index=data.edge_index,
        num_nodes=data.num_nodes,
        node_kind=data.node_kind,
        node_text=text,
        num_entities=data.num_entities,
    )


# ------------------------------------------------------------------------------------------------------ copy
@functools.lru_cache(maxsize=1 << 16)
def _nltk_tokens(text: str) -> Tuple[str, ...]:
    from ..metrics.generation import tokenize

    return tuple(tokenize(text, "nltk"))


def _default_tokenize(text: str) -> List[str]:
    return list(_nltk_tokens(text))


def delexicalise(
    text: str, entities: Sequence[str], tokenize: Optional[Callable[[str], List[str]]] = None
) -> Tuple[List[str], List[bool]]:
    """Tokenise ``text`` and replace entity mentions by ``<ent_i>`` placeholders (AGENDA's ``<type_i>`` scheme).

    ``text`` and every entity are tokenised by ``tokenize`` (default: the metrics' tokenizer, ``nltk.word_tokenize``
    lower-cased). A mention is an exact, contiguous, case-insensitive match of an entity's tokens; at each position
    the longest matching entity wins, scanning left to right (matches do not overlap). Mentions worded differently
    from the entity (``UT Austin, B.S. 1955`` written as "University of Texas") stay as words.

    Returns:
        the delexicalised tokens and, per entity, whether it was found.
    """
    tok = tokenize or _default_tokenize
    toks = [t.lower() for t in tok(text)]
    return replace_mentions(toks, [[t.lower() for t in tok(e)] for e in entities], lambda i: f"<ent_{i}>")


def relexicalise(
    tokens: Sequence[str], entities: Sequence[str], tokenize: Optional[Callable[[str], List[str]]] = None
) -> List[str]:
    """Replace each ``<ent_i>`` by entity ``i``'s tokens (lower-cased, as :func:`delexicalise` matched them).

    A placeholder with an index outside the entity list raises ``GraphRMAError``.
    """
    tok = tokenize or _default_tokenize
    out: List[str] = []
    for t in tokens:
        m = PLACEHOLDER.match(t)
        if m:
            i = int(m.group(1))
            if i >= len(entities):
                raise GraphRMAError(f"tokens: placeholder {t} but only {len(entities)} entities")
            out += [x.lower() for x in tok(entities[i])]
        else:
            out.append(t)
    return out


# ------------------------------------------------------------------------------------------------ GraphWriter
# Records in the generic graph-to-text form (graph_rma.data.graph_text), so that the shared trainer, collate and the
# GraphWriter model run on WebNLG unchanged. Relations are open-vocabulary: every triple uses the one relation type
# ``"<rel>"`` (its relation and inverse nodes keep distinct learned start vectors) and the graph carries each node's
# text as token ids (``node_tokens``), which the model reads with the same BiLSTM as the entity strings, so a
# relation never seen in training still gets a meaningful start vector from its words.
ENTITY_TAG = "<ent>"
RELATION_NAMES = ("<rel>",)
MAX_RELATION_TOKENS = 8


@dataclass
class WebNLGRecord(GraphTextRecord):
    """One (entry, reference) pair as a :class:`~graph_rma.data.graph_text.GraphTextRecord`: ``entities`` and
    ``relations`` (one text per triple) are lower-cased nltk tokens joined by spaces, ``types`` is ``"<ent>"`` for
    every entity, ``triples`` use relation index 0, ``title`` is empty and ``text`` is the delexicalised reference
    (``<ent_i>`` placeholders). ``references`` holds all the entry's raw reference texts (multi-reference scoring)."""

    references: List[str] = field(default_factory=list)
    eid: str = ""
    category: str = ""
    seen: bool = True


def entry_records(entry: WebNLGEntry, per_reference: bool = True) -> List[WebNLGRecord]:
    """The records of one entry: one per reference (training) or, with ``per_reference=False``, a single one whose
    ``text`` is the first reference (decoding; score against ``references``)."""
    ents = [" ".join(t.lower() for t in _default_tokenize(e)) for e in entry.entities]
    rels = [" ".join(t.lower() for t in _default_tokenize(r)) for r in entry.relations]
    refs = entry.references if per_reference else entry.references[:1]
    out = []
    for ref in refs or [""]:
        toks, _ = delexicalise(ref, entry.entities) if ref else ([], [])
        out.append(
            WebNLGRecord(
                title="",
                entities=ents,
                types=[ENTITY_TAG] * len(ents),
                triples=[(a, 0, b) for a, _, b in entry.triple_index],
                text=" ".join(toks),
                source=entry.source,
                relations=[rels[k] for _, k, _ in entry.triple_index],
                references=list(entry.references),
                eid=entry.eid,
                category=entry.category,
                seen=entry.seen,
            )
        )
    return out


def load_webnlg_splits(root: Optional[Union[str, Path]] = None, max_train: Optional[int] = None) -> GraphTextSplits:
    """WebNLG as :class:`~graph_rma.data.graph_text.GraphTextSplits` of :class:`WebNLGRecord`: train and dev with one
    record per (entry, reference) pair (train 18,102, dev 2,268), test with one record per entry (1,862).
    ``max_train`` keeps the first ``max_train`` training *entries* (all their references)."""
    train = load_webnlg("train", root)[:max_train] if max_train else load_webnlg("train", root)
    dev = load_webnlg("dev", root)
    test = load_webnlg("test", root)
    tr = [r for e in train for r in entry_records(e)]
    dv = [r for e in dev for r in entry_records(e)]
    te = [r for e in test for r in entry_records(e, per_reference=False)]
    desc = (
        f"webnlg2017: train {len(train)} entries / {len(tr)} texts, dev {len(dev)} / {len(dv)}, "
        f"test {len(te)} entries ({sum(r.seen for r in te)} seen, {sum(not r.seen for r in te)} unseen)"
    )
    return GraphTextSplits(tr, dv, te, list(RELATION_NAMES), "webnlg2017", desc)


def build_webnlg_vocab(records: Sequence[WebNLGRecord], min_freq: int = 2, max_size: Optional[int] = None) -> Vocab:
    """One vocabulary for entity words, relation words and (delexicalised) reference words, after ``"<ent>"``:
    :func:`graph_rma.data.graph_text.build_vocab` with ``extra=("<ent>",)``."""
    return build_vocab(records, min_freq=min_freq, max_size=max_size, extra=(ENTITY_TAG,))


class WebNLGEncoder(GraphTextEncoder):
    """:class:`~graph_rma.data.graph_text.GraphTextEncoder` whose graphs also carry ``node_tokens [N, L]``: the
    token ids of each relation and inverse-relation node's text (at most ``L = MAX_RELATION_TOKENS``; 0 =
    padding), zero rows for entity and global nodes."""

    def encode(self, rec: WebNLGRecord) -> EncodedRecord:
        item = super().encode(rec)
        g = item.graph
        tokens = torch.zeros(g.num_nodes, MAX_RELATION_TOKENS, dtype=torch.long)
        n = len(rec.entities)
        for k, rel in enumerate(rec.relations):
            ids = self.vocab.encode(rel.split()[:MAX_RELATION_TOKENS]) or [self.vocab.unk_id]
            for node in (n + 1 + 2 * k, n + 2 + 2 * k):
                tokens[node, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        g.node_tokens = tokens
        return item
