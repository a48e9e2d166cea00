r"""GraphWriter on WebNLG 2017 (Gardent et al., ACL 2017) with plain or repulsive encoder heads.

From Python::

    from graph_rma.tasks.webnlg import PRESETS, evaluate, train
    train(dict(PRESETS["cpu"]), "runs/webnlg/svgd", variant="svgd:alpha=0.1")
    print(evaluate("runs/webnlg/svgd", "test"))          # multi-reference; all / seen / unseen
    print(evaluate("runs/webnlg/svgd", "test", scorer="webnlg2017"))   # as the WebNLG 2017 challenge scored

From the shell: ``graph-rma webnlg train|generate|evaluate`` (see ``graph-rma webnlg --help``).

Training is :func:`graph_rma.tasks.graph_to_text.train` (the same ``checkpoint.pt`` / ``best.pt``, progress bars and
exact resume as AGENDA) on :func:`graph_rma.data.webnlg.load_webnlg_splits`: one training example per (entry,
reference) pair, relations read from their words (open vocabulary), entities copied through ``<ent_i>``
placeholders. Evaluation reports ``all``, ``seen`` and ``unseen`` entries, each scored as one corpus, with one of two
scorers: ``scorer="coco"`` (default) scores every entry against **all** its references with
:func:`graph_rma.metrics.evaluate_generation` (coco-caption BLEU, METEOR 1.5, ROUGE; ``tokenize="nltk"``);
``scorer="webnlg2017"`` with :func:`graph_rma.metrics.score_webnlg2017`, the challenge's own BLEU
(``multi-bleu.perl -lc``), METEOR 1.5 ``-norm`` and TER on its tokenisation against the first three references.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from .._errors import GraphRMAError
from ..data.graph_text import GraphTextSplits
from ..data.webnlg import WebNLGEncoder, WebNLGRecord, build_webnlg_vocab, load_webnlg_splits
from ..engine import atomic_write_text, read_lines, write_json
from ..engine.interrupt import deferred_interrupt
from ..metrics import evaluate_generation, score_webnlg2017
from ..metrics.generation import SCORERS, Meteor15, java_available
from ..variants import Variant
from . import graph_to_text as g2t
from . import graph_to_text_model as g2m
from .defaults import WEBNLG_PRESETS

__all__ = ["PRESETS", "SUBSETS", "entries", "evaluate", "generate", "metrics_path", "score", "train"]

PathLike = Union[str, Path]

PRESETS: Dict[str, Dict[str, Any]] = WEBNLG_PRESETS  # cpu (2 CPU cores), full (GraphWriter's), webnlg2017
SUBSETS = ("all", "seen", "unseen")


def train(
    config: Dict[str, Any],
    out: PathLike,
    root: Optional[PathLike] = None,
    variant: Union[str, Variant] = "ma",
    seed: int = 0,
    max_train: Optional[int] = None,
    max_dev: Optional[int] = None,
    save_every: int = 0,
    stop_after: Optional[int] = None,
    progress: bool = True,
    splits: Optional[GraphTextSplits] = None,
    device: Optional[str] = None,
) -> Dict[str, Any]:
    """Train (or resume) into ``out`` with :func:`graph_rma.tasks.graph_to_text.train`; ``max_train`` counts
    *entries* (all their references), ``max_dev`` dev records."""
    g2t.check_variant(variant)  # before any data is read
    splits = splits or load_webnlg_splits(root, max_train=max_train)
    return g2t.train(
        config,
        out,
        splits,
        variant=variant,
        seed=seed,
        max_dev=max_dev,
        save_every=save_every,
        stop_after=stop_after,
        progress=progress,
        device=device,
        make_vocab=build_webnlg_vocab,
        make_encoder=WebNLGEncoder,
        dev_bleu=dev_bleu(config, splits, max_dev),
        dataset="webnlg",
    )


def dev_bleu(config: Dict[str, Any], splits: GraphTextSplits, max_dev: Optional[int] = None) -> Optional[g2m.DevScorer]:
    """``(model, vocab) -> BLEU``: the dev entries (the first ``max_dev``) decoded with ``config``'s decoding
    settings and scored with the challenge's BLEU (:func:`graph_rma.metrics.score_webnlg2017`, no METEOR, no TER), what
    ``keep="dev_bleu"`` keeps ``best.pt`` by; ``None`` under any other ``keep``. A missing ``text-metrics`` extra
    is said here, before training."""
    if config.get("keep", "dev_loss") != "dev_bleu":
        return None
    from ..metrics.generation import require_text_metrics
    from ..metrics.webnlg2017 import require_webnlg2017

    require_text_metrics()
    require_webnlg2017()
    recs = entries(splits, "dev")[:max_dev] if max_dev else entries(splits, "dev")
    refs = [r.references for r in recs]
    return g2m.dev_scorer(
        config,
        recs,
        WebNLGEncoder,
        splits.relation_names,
        lambda hyps: score_webnlg2017(hyps, refs, meteor="none", ter=False)["BLEU"],
    )


def entries(splits: GraphTextSplits, split: str) -> List[WebNLGRecord]:
    """One record per entry: test is stored that way; train/dev keep the first record of each entry."""
    recs = splits.split(split)
    if split == "test":
        return recs
    seen, out = set(), []
    for r in recs:
        if r.eid + r.category + r.source not in seen:
            seen.add(r.eid + r.category + r.source)
            out.append(r)
    return out


def generate(
    out: PathLike,
    split: str = "test",
    root: Optional[PathLike] = None,
    checkpoint: Optional[PathLike] = None,
    beam: Optional[int] = None,
    max_len: Optional[int] = None,
    length_penalty: Optional[float] = None,
    batch_size: int = 32,
    limit: Optional[int] = None,
    progress: bool = True,
    splits: Optional[GraphTextSplits] = None,
    device: Optional[str] = None,
    no_repeat_ngram: Optional[int] = None,
    coverage_reward: Optional[float] = None,
) -> Dict[str, Path]:
    """Decode one record per entry of ``split`` with the best model; writes ``hyp.<split>.txt`` (relexicalised,
    lower-cased tokens), ``hyp.<split>.delex.txt``, ``refs.<split>.json`` (per line of the hypotheses: eid,
    category, seen, all references) and ``side_by_side.<split>.tsv``. ``beam``, ``max_len``, ``length_penalty``,
    ``no_repeat_ngram`` (no output contains an ``n``-gram twice; 0: off), ``coverage_reward`` (added to an output's
    score per distinct input entity it copies; 0: off; both
    :meth:`~graph_rma.models.graphwriter.GraphWriter.beam_search`): ``None`` takes the run's configuration;
    ``decode.<split>.json`` records the values used."""
    return _write_decoded(
        Path(out),
        split,
        _decode(
            out,
            split,
            root,
            checkpoint,
            beam,
            max_len,
            length_penalty,
            batch_size,
            limit,
            progress,
            splits,
            device,
            no_repeat_ngram,
            coverage_reward,
        ),
    )


def _decode(
    out: PathLike,
    split: str,
    root: Optional[PathLike] = None,
    checkpoint: Optional[PathLike] = None,
    beam: Optional[int] = None,
    max_len: Optional[int] = None,
    length_penalty: Optional[float] = None,
    batch_size: int = 32,
    limit: Optional[int] = None,
    progress: bool = True,
    splits: Optional[GraphTextSplits] = None,
    device: Optional[str] = None,
    no_repeat_ngram: Optional[int] = None,
    coverage_reward: Optional[float] = None,
) -> Dict[str, Any]:
    """:func:`generate`'s decode, in memory: ``{"relex", "delex", "refs", "record"}`` (nothing written)."""
    out = Path(out)
    ckpt_path = g2m.check_run(out, checkpoint, "webnlg")  # before any data is read or file written
    splits = splits or load_webnlg_splits(root)
    recs = entries(splits, split)[:limit] if limit else entries(splits, split)
    relex, delex, record = g2m.decode_checkpoint(
        ckpt_path,
        WebNLGEncoder,
        recs,
        split,
        beam=beam,
        max_len=max_len,
        length_penalty=length_penalty,
        no_repeat_ngram=no_repeat_ngram,
        coverage_reward=coverage_reward,
        limit=limit,
        batch_size=batch_size,
        progress=progress,
        device=device,
    )
    refs = [
        {"eid": r.eid, "category": r.category, "seen": r.seen, "entities": r.entities, "references": r.references}
        for r in recs
    ]
    return {"relex": relex, "delex": delex, "refs": refs, "record": {**record, "entries": len(recs)}}


def _write_decoded(out: Path, split: str, decoded: Dict[str, Any]) -> Dict[str, Path]:
    """Write a :func:`_decode` result (each file atomically; ``decode.<split>.json``, which says the others are
    whole, last) and return the paths."""
    relex, refs = decoded["relex"], decoded["refs"]
    paths = {
        "hyp": out / f"hyp.{split}.txt",
        "delex": out / f"hyp.{split}.delex.txt",
        "refs": out / f"refs.{split}.json",
        "side_by_side": out / f"side_by_side.{split}.tsv",
    }
    atomic_write_text(paths["hyp"], "\n".join(relex) + "\n")
    atomic_write_text(paths["delex"], "\n".join(decoded["delex"]) + "\n")
    write_json(paths["refs"], refs)
    rows = ["eid\tcategory\tseen\thypothesis\treferences"] + [
        f"{r['eid']}\t{r['category']}\t{r['seen']}\t{h}\t{' ||| '.join(r['references'])}" for r, h in zip(refs, relex)
    ]
    atomic_write_text(paths["side_by_side"], "\n".join(rows) + "\n")
    write_json(out / f"decode.{split}.json", decoded["record"])
    return paths


def _check_scorer(scorer: str, meteor: str) -> None:
    if scorer not in SCORERS:
        raise GraphRMAError(f"scorer: expected one of {', '.join(SCORERS)}, got {scorer!r}")
    if scorer == "webnlg2017" and meteor == "nltk":
        raise GraphRMAError("meteor: the webnlg2017 scorer uses METEOR 1.5 only (auto, meteor-1.5 or none), got 'nltk'")


def metrics_path(out: PathLike, split: str, scorer: str = "coco") -> Path:
    """Where :func:`evaluate` writes the scores: ``metrics.<split>.json`` (coco) or
    ``metrics.<split>.<scorer>.json``, so that the two scorers' results stand side by side."""
    return Path(out) / (f"metrics.{split}.json" if scorer == "coco" else f"metrics.{split}.{scorer}.json")


def score(
    hypotheses: Sequence[str], refs: Sequence[Dict[str, Any]], meteor: str = "auto", scorer: str = "coco"
) -> Dict[str, Any]:
    """Multi-reference scores of ``hypotheses`` (one per entry; ``refs[i]`` has ``references``, ``entities``,
    ``seen``) for ``all``, ``seen`` and ``unseen`` entries (``None`` for an empty subset), each subset scored as one
    corpus. ``scorer``: ``"coco"`` (:func:`graph_rma.metrics.evaluate_generation` against all references) or
    ``"webnlg2017"`` (:func:`graph_rma.metrics.score_webnlg2017`: the challenge's BLEU, METEOR 1.5 and TER against
    the first three references; ``meteor="nltk"`` is refused). A subset that holds every entry (dev: every entry is
    of a seen category) is the same corpus as ``all``: its scores are ``all``'s, computed once."""
    _check_scorer(scorer, meteor)
    _check_refs(refs, len(hypotheses), ("seen", "references") + (("entities",) if scorer == "coco" else ()))
    result: Dict[str, Any] = {}
    shared = None
    if meteor == "meteor-1.5" or (meteor == "auto" and java_available()):
        shared = Meteor15()  # one JVM for the three subsets (with -norm, as both scorers want)
    try:
        for name in SUBSETS:
            keep = [i for i, r in enumerate(refs) if name == "all" or r["seen"] == (name == "seen")]
            if not keep:
                result[name] = None
            elif name != "all" and len(keep) == len(refs):  # every entry (dev: all seen): the same corpus as all
                result[name] = copy.deepcopy(result["all"])
            elif scorer == "webnlg2017":
                result[name] = score_webnlg2017(
                    [hypotheses[i] for i in keep],
                    [refs[i]["references"] for i in keep],
                    meteor=shared or ("none" if meteor == "auto" else meteor),
                )
            else:
                result[name] = evaluate_generation(
                    [hypotheses[i] for i in keep],
                    [refs[i]["references"] for i in keep],
                    entities=[refs[i]["entities"] for i in keep],
                    meteor=shared or meteor,
                    tokenize="nltk",
                )
    finally:
        if shared is not None:
            shared.close()
    return result


def evaluate(
    out: PathLike,
    split: str = "test",
    root: Optional[PathLike] = None,
    regenerate: bool = False,
    splits: Optional[GraphTextSplits] = None,
    meteor: str = "auto",
    scorer: str = "coco",
    **gen_kwargs: Any,
) -> Dict[str, Any]:
    """Score ``hyp.<split>.txt`` against the references in ``refs.<split>.json`` (decoding them first when they are
    not the decode ``gen_kwargs`` ask for: :func:`graph_rma.tasks.graph_to_text_model.stale_outputs`) with
    ``scorer`` (see :func:`score`); writes (:func:`metrics_path`) and returns ``{"split", "entries", "scorer",
    "all": {...}, "seen": {...}, "unseen": {...}}``."""
    from ..metrics.generation import require_text_metrics

    _check_scorer(scorer, meteor)
    require_text_metrics()  # before any decoding: a missing extra is said at once, not after minutes of work
    if scorer == "webnlg2017":
        from ..metrics.webnlg2017 import require_webnlg2017

        require_webnlg2017()
    out = Path(out)
    g2m.check_run(out, gen_kwargs.get("checkpoint"), "webnlg", require=False)  # before any data is read or written
    decoded = None
    if regenerate or g2m.stale_outputs(out, split, gen_kwargs):
        decoded = _decode(out, split, root, splits=splits, **gen_kwargs)
        hyps, refs = decoded["relex"], decoded["refs"]
    else:
        hyps = read_lines(out / f"hyp.{split}.txt")
        refs = _read_refs(out / f"refs.{split}.json")
    result = {"split": split, "entries": len(hyps), "scorer": scorer, **score(hyps, refs, meteor=meteor, scorer=scorer)}
    with deferred_interrupt():  # the decode's files and its metrics are written together, or (Ctrl-C before) none
        if decoded is not None:
            _write_decoded(out, split, decoded)
        write_json(metrics_path(out, split, scorer), result)
    return result


def _read_refs(path: Path) -> List[Dict[str, Any]]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise GraphRMAError(f"{path}: not a references file ({exc.msg} at line {exc.lineno})") from None


def _check_refs(refs: Any, count: int, keys: Sequence[str] = ("seen", "references", "entities")) -> None:
    """One line naming the first entry of ``refs`` that is not ``{"seen": bool, "references": [str, ...],
    "entities": ...}`` (the ``keys`` the scorer reads; a ``refs.<split>.json`` edited by hand, or of another
    tool)."""
    if not isinstance(refs, (list, tuple)):
        raise GraphRMAError(f"refs: expected a list of entries, got {type(refs).__name__}")
    if len(refs) != count:
        raise GraphRMAError(f"hypotheses: expected {len(refs)} (one per entry), got {count}")
    for i, r in enumerate(refs):
        if not isinstance(r, dict):
            raise GraphRMAError(f"refs: entry {i} is not a mapping ({type(r).__name__})")
        for key in keys:
            if key not in r:
                raise GraphRMAError(f"refs: entry {i} (eid {r.get('eid', '?')}) has no {key!r}")
        if not isinstance(r["seen"], bool):
            raise GraphRMAError(f"refs: entry {i}'s 'seen' is not true or false: {r['seen']!r}")
        if not isinstance(r["references"], list) or not all(isinstance(t, str) for t in r["references"]):
            raise GraphRMAError(f"refs: entry {i}'s 'references' is not a list of texts")
