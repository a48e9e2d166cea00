r"""AGENDA (Koncel-Kedziorski et al., NAACL 2019): scientific-abstract generation from knowledge graphs.

Files (under ``resolve_root("agenda", root)``; see ``datasets/agenda.md``):

* ``preprocessed.{train,val,test}.tsv``: one record per line, 6 tab-separated fields: title; entities separated
  by ``" ; "``; one type tag per entity (``<task>``, ``<method>``, ...); triples ``"h r t"`` separated by ``" ; "``
  (entity and ``relations.vocab`` indices); the abstract with entity mentions as ``<type_i>`` placeholders; a
  sentence order field, which is ignored.
* ``relations.vocab``: one relation name per line (``USED-FOR``, ``CONJUNCTION``, ...).
* optionally ``unprocessed.{train,val,test}.json`` (the raw release): a list of objects with ``title``,
  ``entities`` (list), ``types`` (space-separated), ``relations`` (``"head -- REL -- tail"`` strings) and
  ``abstract`` (with ``<type_i>`` placeholders) or ``abstract_og`` (plain text, delexicalised here).

Protocols (:func:`load_agenda`):

* ``official``: ``preprocessed.train.tsv`` (38,720) / ``preprocessed.val.tsv`` (1,000) / ``preprocessed.test.tsv``
  (1,000), as published.
* ``offline`` (the default when the train file is absent): train on ``fake.train.tsv`` (100 records) plus 800 val
  records, select on the remaining 200 val records (a fixed permutation, seed 0), test on the untouched official
  test split. Scores under this protocol are **not comparable** to published AGENDA results (about 2.3% of the
  training data).

Malformed records raise :class:`AgendaFormatError` naming the file and line number.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import torch

from .._errors import GraphRMAError
from .graph_text import (
    PLACEHOLDER,
    GraphTextEncoder,
    GraphTextRecord,
    GraphTextSplits,
    Vocab,
    collate,
    relexicalise,
    replace_mentions,
)
from .graph_text import build_vocab as _build_vocab
from .root import DataNotFoundError, missing_data_message, resolve_root

__all__ = [
    "AgendaFormatError",
    "AgendaRecord",
    "AgendaSplits",
    "ENTITY_TYPES",
    "read_relations",
    "read_tsv",
    "read_json",
    "load_agenda",
    "relexicalise",
    "build_vocab",
    "AgendaEncoder",
    "collate",
]

ENTITY_TYPES = ("<task>", "<method>", "<metric>", "<material>", "<otherscientificterm>")
OFFLINE_DEV_SIZE = 200


class AgendaFormatError(GraphRMAError):
    """A malformed AGENDA record; the message starts with ``file:line:``."""


@dataclass
class AgendaRecord(GraphTextRecord):
    """One AGENDA record (a :class:`~graph_rma.data.graph_text.GraphTextRecord`): ``text`` is the abstract,
    tokenised, with ``<type_i>`` placeholders (``i`` an entity index); ``title`` the paper's title."""

    @property
    def abstract(self) -> str:
        """The abstract with placeholders (``text``)."""
        return self.text

    @property
    def abstract_tokens(self) -> List[str]:
        return self.text_tokens


def read_relations(path: Union[str, Path]) -> List[str]:
    """Relation names, one per line (``relations.vocab``)."""
    names = [line.strip() for line in Path(path).read_text(encoding="utf-8").split("\n") if line.strip()]
    if not names:
        raise AgendaFormatError(f"{path}: no relation names")
    return names


def _check_record(where: str, rec: AgendaRecord, num_relations: Optional[int]) -> None:
    n = len(rec.entities)
    if n == 0 or any(not e for e in rec.entities):
        raise AgendaFormatError(f"{where}: empty entity list or empty entity string")
    if len(rec.types) != n:
        raise AgendaFormatError(f"{where}: {n} entities but {len(rec.types)} type tags")
    for t in rec.types:
        if t not in ENTITY_TYPES:
            raise AgendaFormatError(f"{where}: unknown type tag {t!r} (expected one of {', '.join(ENTITY_TYPES)})")
    for h, r, t in rec.triples:
        if not (0 <= h < n and 0 <= t < n):
            raise AgendaFormatError(f"{where}: triple '{h} {r} {t}' names an entity outside 0..{n - 1}")
        if r < 0 or (num_relations is not None and r >= num_relations):
            top = (num_relations or 1) - 1
            raise AgendaFormatError(f"{where}: triple '{h} {r} {t}' names a relation outside 0..{top}")
    if not rec.abstract.strip():
        raise AgendaFormatError(f"{where}: empty abstract")
    for tok in rec.abstract_tokens:
        m = PLACEHOLDER.match(tok)
        if m:
            i = int(m.group(2))
            if i >= n:
                raise AgendaFormatError(f"{where}: placeholder {tok} but only {n} entities")
            if f"<{m.group(1)}>" != rec.types[i]:
                raise AgendaFormatError(f"{where}: placeholder {tok} but entity {i} has type {rec.types[i]}")


def read_tsv(path: Union[str, Path], num_relations: Optional[int] = None) -> List[AgendaRecord]:
    """Read a preprocessed AGENDA TSV file (6 tab-separated fields per line; see the module docstring)."""
    path = Path(path)
    records: List[AgendaRecord] = []
    with open(path, "rb") as f:  # bytes: physical lines (split at \n only) and exact positions of bad bytes
        for lineno, raw in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise AgendaFormatError(
                    f"{where}: invalid UTF-8 (byte 0x{raw[exc.start]:02x} at byte "
                    f"{exc.start + 1} of the line); AGENDA files are UTF-8"
                ) from None
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 6:
                raise AgendaFormatError(
                    f"{where}: expected 6 tab-separated fields "
                    f"(title, entities, types, relations, abstract, sorder), got {len(fields)}"
                )
            title, ents, types, rels, abstract, _sorder = fields
            triples: List[Tuple[int, int, int]] = []
            for item in filter(None, (s.strip() for s in rels.split(";"))):
                parts = item.split()
                if len(parts) != 3 or not all(p.lstrip("-").isdigit() for p in parts):
                    raise AgendaFormatError(f"{where}: relation {item!r} is not 'head relation tail' integers")
                triples.append((int(parts[0]), int(parts[1]), int(parts[2])))
            rec = AgendaRecord(
                title=title.strip(),
                entities=[e.strip() for e in ents.split(" ; ")] if ents.strip() else [],
                types=types.split(),
                triples=triples,
                text=abstract.strip(),
                source=where,
            )
            _check_record(where, rec, num_relations)
            records.append(rec)
    return records


_TOKEN = re.compile(r"\w+(?:[-'.]\w+)*|[^\w\s]")


def _tokenise(text: str) -> List[str]:
    return _TOKEN.findall(text.lower())


def _delexicalise(text: str, entities: Sequence[str], types: Sequence[str]) -> str:
    """Replace entity mentions (longest first, whole tokens) in ``text`` by ``<type_i>`` placeholders."""
    out, _ = replace_mentions(_tokenise(text), [_tokenise(e) for e in entities], lambda i: f"<{types[i][1:-1]}_{i}>")
    return " ".join(out)


def read_json(path: Union[str, Path], relation_names: Sequence[str]) -> List[AgendaRecord]:
    """Read the unprocessed AGENDA JSON form (a list of objects; see the module docstring).

    Entities are lower-cased; relations ``"head -- REL -- tail"`` are resolved to indices by entity text and
    relation name. ``abstract`` (with placeholders) is used when present, else ``abstract_og`` is tokenised and
    delexicalised. Errors name the file and the record's position (``file:record N``).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise AgendaFormatError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise AgendaFormatError(f"{path}:1: expected a JSON list of records")
    rel_index = {r.upper(): i for i, r in enumerate(relation_names)}
    records = []
    for k, obj in enumerate(data):
        where = f"{path}:record {k}"
        try:
            entities = [" ".join(_tokenise(e)) if "<" not in e else e.lower().strip() for e in obj["entities"]]
            types = obj["types"].split() if isinstance(obj["types"], str) else list(obj["types"])
            ent_index = {e: i for i, e in enumerate(entities)}
            triples = []
            for rel in obj.get("relations", []):
                parts = [p.strip() for p in rel.split(" -- ")]
                if len(parts) != 3:
                    raise AgendaFormatError(f"{where}: relation {rel!r} is not 'head -- REL -- tail'")
                h, r, t = " ".join(_tokenise(parts[0])), parts[1].upper(), " ".join(_tokenise(parts[2]))
                if h not in ent_index or t not in ent_index or r not in rel_index:
                    raise AgendaFormatError(f"{where}: relation {rel!r} names an unknown entity or relation")
                triples.append((ent_index[h], rel_index[r], ent_index[t]))
            if "abstract_og" in obj and obj["abstract_og"]:
                abstract = _delexicalise(obj["abstract_og"], entities, types)
            else:
                abstract = obj["abstract"].strip()
            title = " ".join(_tokenise(obj["title"])) if "title" in obj else ""
        except (KeyError, TypeError, AttributeError) as exc:
            raise AgendaFormatError(f"{where}: missing or malformed field ({exc!r})") from None
        rec = AgendaRecord(title, entities, types, triples, abstract, source=where)
        _check_record(where, rec, len(relation_names))
        records.append(rec)
    return records


#: AGENDA's splits are the generic :class:`~graph_rma.data.graph_text.GraphTextSplits`.
AgendaSplits = GraphTextSplits


def _read_split(root: Path, name: str, relation_names: Sequence[str]) -> Optional[List[AgendaRecord]]:
    tsv, js = root / f"preprocessed.{name}.tsv", root / f"unprocessed.{name}.json"
    if tsv.exists():
        return read_tsv(tsv, len(relation_names))
    if js.exists():
        return read_json(js, relation_names)
    return None


def load_agenda(root=None, protocol: str = "auto", dev_size: int = OFFLINE_DEV_SIZE, seed: int = 0) -> AgendaSplits:
    """Load AGENDA under ``protocol`` ``"official"``, ``"offline"`` or ``"auto"`` (official when the train file
    exists). See the module docstring for the protocols; ``dev_size`` and ``seed`` fix the offline val split."""
    if protocol not in ("auto", "official", "offline"):
        raise GraphRMAError(f"protocol: expected auto, official or offline, got {protocol!r}")
    root = resolve_root("agenda", root)
    rel_path = root / "relations.vocab"
    if not rel_path.exists():
        raise DataNotFoundError(
            missing_data_message(
                "agenda", root, ["relations.vocab", "preprocessed.val.tsv", "preprocessed.test.tsv"], family="agenda"
            )
        )
    relation_names = read_relations(rel_path)
    val = _read_split(root, "val", relation_names)
    test = _read_split(root, "test", relation_names)
    if val is None or test is None:
        raise DataNotFoundError(
            missing_data_message("agenda", root, ["preprocessed.val.tsv", "preprocessed.test.tsv"], family="agenda")
        )
    train = _read_split(root, "train", relation_names)
    if protocol == "auto":
        protocol = "official" if train is not None else "offline"
    if protocol == "official":
        if train is None:
            raise DataNotFoundError(
                missing_data_message(
                    "agenda",
                    root,
                    ["preprocessed.train.tsv"],
                    hint="Use protocol='offline' without it.",
                    family="agenda",
                )
            )
        return AgendaSplits(
            train,
            val,
            test,
            relation_names,
            "official",
            f"official: train {len(train)}, val {len(val)}, test {len(test)}",
        )
    fake = root / "fake.train.tsv"
    sample = read_tsv(fake, len(relation_names)) if fake.exists() else []
    if not 0 < dev_size < len(val):
        raise GraphRMAError(f"dev_size: expected 0 < dev_size < {len(val)}, got {dev_size}")
    order = torch.randperm(len(val), generator=torch.Generator().manual_seed(seed)).tolist()
    dev_idx = set(order[len(val) - dev_size :])
    train_val = [r for i, r in enumerate(val) if i not in dev_idx]
    dev = [r for i, r in enumerate(val) if i in dev_idx]
    desc = (
        f"offline: train = fake.train ({len(sample)}) + {len(train_val)} val records, dev = {len(dev)} val "
        f"records (seed {seed}), test = official test ({len(test)}); not comparable to published scores"
    )
    return AgendaSplits(sample + train_val, dev, test, relation_names, "offline", desc)


# ------------------------------------------------------------------------------------------------------------------
# Tensors: the generic graph-to-text vocabulary, encoder and batching, with AGENDA's type tags
# ------------------------------------------------------------------------------------------------------------------
def build_vocab(records: Sequence[AgendaRecord], min_freq: int = 2, max_size: Optional[int] = None) -> Vocab:
    """One vocabulary for titles, entity words and abstract words (placeholders excluded; the five type tags
    first): :func:`graph_rma.data.graph_text.build_vocab` with ``extra=ENTITY_TYPES``."""
    return _build_vocab(records, min_freq=min_freq, max_size=max_size, extra=ENTITY_TYPES)


#: AGENDA needs nothing beyond the generic encoder (``<type_i>`` placeholders copy entity ``i``).
AgendaEncoder = GraphTextEncoder
