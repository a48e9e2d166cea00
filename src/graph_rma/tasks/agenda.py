r"""GraphWriter on AGENDA (Koncel-Kedziorski et al., NAACL 2019) with plain or repulsive encoder heads.

From Python::

    from graph_rma.tasks.agenda import PRESETS, evaluate, train
    train(dict(PRESETS["cpu"]), "runs/agenda/svgd", variant="svgd:alpha=0.1")   # resumes if interrupted
    print(evaluate("runs/agenda/svgd", "test"))                                  # decodes, then scores

From the shell: ``graph-rma agenda train|generate|evaluate|heads`` (see ``graph-rma agenda --help``).

Training is :func:`graph_rma.tasks.graph_to_text.train` (``checkpoint.pt`` / ``best.pt``, exact resume, DDP under
``torchrun``) on :func:`graph_rma.data.agenda.load_agenda`. Generation writes relexicalised hypotheses next to the
gold abstracts; evaluation scores them as GraphWriter did (lower-cased, whitespace tokens).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from ..data.agenda import AgendaEncoder, AgendaRecord, AgendaSplits, build_vocab, load_agenda
from ..engine import atomic_write_text, read_lines, write_json
from ..metrics import evaluate_generation
from ..variants import Variant
from . import graph_to_text as g2t
from . import graph_to_text_model as g2m
from .defaults import AGENDA_PRESETS

__all__ = ["PRESETS", "evaluate", "generate", "head_diversity", "load_agenda", "score", "train"]

PathLike = Union[str, Path]

PRESETS: Dict[str, Dict[str, Any]] = AGENDA_PRESETS  # cpu (2 CPU cores, < 15 min) and full (GraphWriter's)


def train(
    config: Dict[str, Any],
    out: PathLike,
    root: Optional[PathLike] = None,
    protocol: str = "auto",
    variant: Union[str, Variant] = "ma",
    seed: int = 0,
    max_train: Optional[int] = None,
    max_dev: Optional[int] = None,
    save_every: int = 0,
    stop_after: Optional[int] = None,
    progress: bool = True,
    splits: Optional[AgendaSplits] = None,
    device: Optional[str] = None,
) -> Dict[str, Any]:
    """Train (or resume) into ``out`` with :func:`graph_rma.tasks.graph_to_text.train` on AGENDA (``splits``, else
    :func:`~graph_rma.data.agenda.load_agenda` of ``root`` under ``protocol``); ``max_train``/``max_dev`` count
    records."""
    g2t.check_variant(variant)  # before any data is read
    splits = splits or load_agenda(root, protocol)
    return g2t.train(
        config,
        out,
        splits,
        variant=variant,
        seed=seed,
        max_train=max_train,
        max_dev=max_dev,
        save_every=save_every,
        stop_after=stop_after,
        progress=progress,
        device=device,
        make_vocab=build_vocab,
        make_encoder=AgendaEncoder,
        dev_bleu=dev_bleu(config, splits, max_dev),
        dataset="agenda",
    )


def dev_bleu(config: Dict[str, Any], splits: AgendaSplits, max_dev: Optional[int] = None) -> Optional[g2m.DevScorer]:
    """``(model, vocab) -> BLEU``: the dev records (the first ``max_dev``) decoded with ``config``'s decoding
    settings and scored as :func:`evaluate` scores (coco-caption BLEU-4 on whitespace tokens, no METEOR), what
    ``keep="dev_bleu"`` keeps ``best.pt`` by; ``None`` under any other ``keep``. A missing ``text-metrics`` extra
    is said here, before training."""
    if config.get("keep", "dev_loss") != "dev_bleu":
        return None
    from ..metrics.generation import require_text_metrics

    require_text_metrics()
    recs = splits.dev[:max_dev] if max_dev else splits.dev
    refs, entities = [r.relexicalised() for r in recs], [r.entities for r in recs]
    return g2m.dev_scorer(
        config,
        recs,
        AgendaEncoder,
        splits.relation_names,
        lambda hyps: score(hyps, refs, entities, meteor="none")["BLEU-4"],
    )


def generate(
    out: PathLike,
    split: str = "test",
    root: Optional[PathLike] = None,
    protocol: str = "auto",
    checkpoint: Optional[PathLike] = None,
    beam: Optional[int] = None,
    max_len: Optional[int] = None,
    length_penalty: Optional[float] = None,
    batch_size: int = 32,
    limit: Optional[int] = None,
    progress: bool = True,
    splits: Optional[AgendaSplits] = None,
    device: Optional[str] = None,
    no_repeat_ngram: Optional[int] = None,
    coverage_reward: Optional[float] = None,
) -> Dict[str, Path]:
    """Decode ``split`` with the best model and write ``hyp.<split>.txt``, ``gold.<split>.txt`` (relexicalised,
    line-aligned), ``hyp.<split>.delex.txt`` (with ``<type_i>`` placeholders) and ``side_by_side.<split>.tsv``.
    ``beam``, ``max_len``, ``length_penalty``, ``no_repeat_ngram`` (no output holds an ``n``-gram twice; 0: off),
    ``coverage_reward`` (added to an output's score per distinct input entity it copies; 0: off;
    :meth:`~graph_rma.models.graphwriter.GraphWriter.beam_search`): ``None`` takes the run's configuration."""
    out = Path(out)
    ckpt_path = g2m.check_run(out, checkpoint, "agenda")  # before any data is read or file written
    splits = splits or load_agenda(root, protocol)
    recs: List[AgendaRecord] = splits.split(split)[:limit] if limit else splits.split(split)
    relex, delex, record = g2m.decode_checkpoint(
        ckpt_path,
        AgendaEncoder,
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
    gold = [r.relexicalised() for r in recs]
    paths = {
        "hyp": out / f"hyp.{split}.txt",
        "gold": out / f"gold.{split}.txt",
        "delex": out / f"hyp.{split}.delex.txt",
        "side_by_side": out / f"side_by_side.{split}.tsv",
    }
    atomic_write_text(paths["hyp"], "\n".join(relex) + "\n")
    atomic_write_text(paths["gold"], "\n".join(gold) + "\n")
    atomic_write_text(paths["delex"], "\n".join(delex) + "\n")
    rows = ["title\thypothesis\treference"] + [f"{r.title}\t{h}\t{g}" for r, h, g in zip(recs, relex, gold)]
    atomic_write_text(paths["side_by_side"], "\n".join(rows) + "\n")
    write_json(out / f"decode.{split}.json", {**record, "records": len(recs)})
    return paths


def score(
    hypotheses: Sequence[str], references: Sequence[str], entities: Sequence[Sequence[str]], meteor: str = "auto"
) -> Dict[str, Any]:
    """Scores of relexicalised outputs against one reference each (already lower-cased and tokenised, as
    GraphWriter scored them: whitespace tokens)."""
    return evaluate_generation(
        list(hypotheses), list(references), entities=[list(e) for e in entities], meteor=meteor, tokenize="split"
    )


def evaluate(
    out: PathLike,
    split: str = "test",
    root: Optional[PathLike] = None,
    protocol: str = "auto",
    regenerate: bool = False,
    splits: Optional[AgendaSplits] = None,
    meteor: str = "auto",
    **gen_kwargs: Any,
) -> Dict[str, Any]:
    """Score ``hyp.<split>.txt`` against ``gold.<split>.txt``, decoding them first when they are not the decode
    ``gen_kwargs`` ask for (:func:`graph_rma.tasks.graph_to_text_model.stale_outputs`: missing, another given
    setting, or other weights); writes and returns ``metrics.<split>.json``.

    ``meteor``: ``"auto"`` (METEOR 1.5 when Java is found, else nltk), ``"meteor-1.5"``, ``"nltk"`` or ``"none"``;
    the result's ``METEOR_impl`` says which one produced ``METEOR``. ``gen_kwargs`` go to :func:`generate`."""
    from ..metrics.generation import require_text_metrics

    require_text_metrics()  # before any decoding: a missing extra is said at once, not after minutes of work
    out = Path(out)
    g2m.check_run(out, gen_kwargs.get("checkpoint"), "agenda", require=False)  # before any data is read or written
    splits = splits or load_agenda(root, protocol)
    hyp_path = out / f"hyp.{split}.txt"
    if regenerate or g2m.stale_outputs(out, split, gen_kwargs):
        generate(out, split, splits=splits, **gen_kwargs)
    hyps = read_lines(hyp_path)
    refs = read_lines(out / f"gold.{split}.txt")
    recs = splits.split(split)[: len(hyps)]
    result = {
        "split": split,
        "records": len(hyps),
        "data": splits.description,
        **score(hyps, refs, [r.entities for r in recs], meteor=meteor),
    }
    write_json(out / f"metrics.{split}.json", result)
    return result


def head_diversity(
    out: PathLike,
    split: str = "test",
    root: Optional[PathLike] = None,
    protocol: str = "auto",
    limit: int = 200,
    checkpoint: Optional[PathLike] = None,
    splits: Optional[AgendaSplits] = None,
    device: Optional[str] = None,
) -> Dict[str, Any]:
    """:func:`graph_rma.tasks.graph_to_text_model.head_diversity` of ``OUT/best.pt`` on the first ``limit`` graphs of
    ``split``; writes ``heads.<split>.json``."""
    path = g2m.check_run(out, checkpoint, "agenda")  # before any data is read or file written
    splits = splits or load_agenda(root, protocol)
    result = g2m.head_diversity(path, splits.split(split)[:limit], AgendaEncoder, device=device)
    write_json(Path(out) / f"heads.{split}.json", result)
    return result
