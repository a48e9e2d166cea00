"""The GraphWriter of a graph-to-text configuration and what uses it outside the training loop: building it
(:func:`build_model`), restoring a trained one (:func:`load_model`, from ``best.pt`` or ``checkpoint.pt``), the dev
loss (:func:`dev_loss`, token-level teacher-forced NLL, also what :func:`~graph_rma.tasks.graph_to_text.train`
selects ``best.pt`` by), batched greedy or beam-search decoding (:func:`decode_records`; a checkpoint's, with its
run's settings unless given: :func:`decode_checkpoint`) and how alike the encoder's heads are
(:func:`head_diversity`). The trainer is :mod:`graph_rma.tasks.graph_to_text`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from tqdm.auto import tqdm

from .._errors import GraphRMAError
from ..data.graph_text import EncodedRecord, GraphTextEncoder, GraphTextRecord, Vocab, collate
from ..engine import load_checkpoint, read_json
from ..engine.distributed import all_reduce_sum, rank_and_world
from ..models.graphwriter import GraphWriter
from ..regularizers import disagreement, parameter_disagreement
from .generator_config import DECODING_FIELDS, GeneratorConfig, generator_fields, saved_config

__all__ = [
    "DECODE_OPTIONS",
    "build_model",
    "check_run",
    "checkpoint_dataset",
    "decode_checkpoint",
    "decode_record",
    "decode_records",
    "decode_settings",
    "dev_loss",
    "dev_scorer",
    "head_diversity",
    "load_model",
    "stale_outputs",
]

PathLike = Union[str, Path]
EncoderFactory = Callable[..., GraphTextEncoder]  # (vocab, relation_names, max_target_len=None) -> encoder
DevScorer = Callable[[GraphWriter, Vocab], float]  # (model, vocab) -> dev BLEU


def _device(device: Optional[str]) -> torch.device:
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def _to(batch: Dict[str, Any], device: torch.device) -> Dict[str, Any]:
    return {k: v.to(device) for k, v in batch.items()}


def _batches(n: int, size: int, generator: Optional[torch.Generator] = None) -> List[List[int]]:
    order = torch.randperm(n, generator=generator).tolist() if generator is not None else list(range(n))
    return [order[i : i + size] for i in range(0, n, size)]


def build_model(config: Dict[str, Any], vocab_size: int, num_relations: int) -> GraphWriter:
    """GraphWriter of ``config``'s size, without any variant (apply one with :func:`graph_rma.apply_variant`)."""
    return GraphWriter(
        vocab_size,
        num_relations,
        hidden=config["hidden"],
        num_layers=config["layers"],
        heads=config["heads"],
        dropout=config["dropout"],
        attention_dropout=config["attention_dropout"],
        decoder_heads=config["decoder_heads"],
    )


@torch.no_grad()
def dev_loss(model: GraphWriter, items: Sequence[EncodedRecord], batch_size: int) -> float:
    """Token-level teacher-forced NLL on ``items`` (eval mode); under torch.distributed each rank scores its share
    of the batches and the sums are all-reduced."""
    was = model.training
    model.eval()
    total, tokens = 0.0, 0
    device = next(model.parameters()).device
    rank, world = rank_and_world()
    for b, idx in enumerate(_batches(len(items), batch_size)):
        if b % world != rank:
            continue
        batch = _to(collate([items[i] for i in idx]), device)
        n = int((batch["target_out"] != 0).sum())
        total += float(model.loss(batch)) * n
        tokens += n
    if world > 1:
        total, tokens = all_reduce_sum(torch.tensor([total, float(tokens)], dtype=torch.float64)).tolist()
    model.train(was)
    return total / max(tokens, 1)


# ----------------------------------------------------------------------------------------------------------------
# Decoding and evaluation helpers
# ----------------------------------------------------------------------------------------------------------------
def load_model(path: PathLike, device: Optional[str] = None) -> Tuple[GraphWriter, Vocab, Dict[str, Any]]:
    """``(model in eval mode, vocabulary, checkpoint dict)`` from ``best.pt`` or ``checkpoint.pt``."""
    ck = load_checkpoint(path)
    ck["config"] = saved_config(ck["config"])  # saved by any version: a setting it lacks takes its default
    vocab = Vocab.from_list(ck["vocab"])
    model = build_model(ck["config"], len(vocab), len(ck["relations"]))
    model.load_state_dict(ck["model"])
    model.to(_device(device)).eval()
    return model, vocab, ck


def decode_settings(cfg: Dict[str, Any], **given: Any) -> Dict[str, Any]:
    """The decoding settings, one per name of :data:`~graph_rma.tasks.generator_config.DECODING_FIELDS` (beam,
    maximum length, length penalty, blocked n-gram size, coverage reward): each ``given`` value that is not
    ``None``, else the training configuration's (a configuration saved before an optional setting existed: that
    setting's default, off)."""
    unknown = sorted(set(given) - set(DECODING_FIELDS))
    if unknown:
        raise TypeError(f"decode_settings: not decoding settings: {', '.join(unknown)}")
    defaults = _decoding_defaults()
    return {name: cfg.get(name, defaults[name]) if given.get(name) is None else given[name] for name in DECODING_FIELDS}


def _decoding_defaults() -> Dict[str, Any]:
    """Each decoding setting's default (the value of a setting a configuration or record predates: off)."""
    return {f.name: f.default for f in generator_fields() if f.name in DECODING_FIELDS}


#: The decoding settings a caller of the tasks' ``generate`` / ``evaluate`` may give (``None``: the run's), beside
#: ``checkpoint``; ``decode.<split>.json`` records each with the value used.
DECODE_OPTIONS: Tuple[str, ...] = (*DECODING_FIELDS, "limit")


def decode_record(checkpoint: PathLike, settings: Dict[str, Any]) -> Dict[str, Any]:
    """What ``decode.<split>.json`` records of a decode: ``settings`` (every name of :data:`DECODE_OPTIONS`, as
    used), the checkpoint's path and the SHA-256 of its bytes."""
    from ..data.root import sha256sum

    return {
        **{k: settings[k] for k in DECODE_OPTIONS},
        "checkpoint": str(checkpoint),
        "checkpoint_sha256": sha256sum(checkpoint),
    }


def decode_checkpoint(
    checkpoint: PathLike,
    make_encoder: EncoderFactory,
    recs: Sequence[GraphTextRecord],
    split: str,
    limit: Optional[int] = None,
    batch_size: int = 32,
    progress: bool = True,
    device: Optional[str] = None,
    **decoding: Any,
) -> Tuple[List[str], List[str], Dict[str, Any]]:
    """A task's ``generate`` without its files: ``recs`` (the first ``limit`` records of ``split``) decoded by the
    model in ``checkpoint`` with the ``decoding`` settings given (names of
    :data:`~graph_rma.tasks.generator_config.DECODING_FIELDS`; ``None`` or absent: the run's,
    :func:`decode_settings`). Returns the relexicalised and delexicalised texts and the decode's
    :func:`decode_record`."""
    model, vocab, ck = load_model(checkpoint, device)
    settings = decode_settings(ck["config"], **decoding)
    relex, delex = decode_records(
        model,
        make_encoder(vocab, ck["relations"]),
        recs,
        settings,
        batch_size,
        progress,
        desc=f"decoding {split}",
    )
    return relex, delex, decode_record(checkpoint, {**settings, "limit": limit})


def stale_outputs(out: PathLike, split: str, options: Dict[str, Any]) -> Optional[str]:
    """Why ``out/hyp.<split>.txt`` is not the decode that ``options`` (the keyword arguments of a task's
    ``generate``) ask for, or ``None`` when it is: the file is missing, ``decode.<split>.json`` does not say how it
    was made, a setting given in ``options`` (not ``None``) differs from the recorded one, or the checkpoint to
    decode with (``options["checkpoint"]``, else ``out/best.pt``, when it exists) holds other bytes than the one
    the file came from. Settings not given are not compared: scoring the file as it is is what was asked."""
    from ..data.root import sha256sum
    from ..engine import read_json

    out = Path(out)
    if not (out / f"hyp.{split}.txt").is_file():
        return f"no hyp.{split}.txt"
    try:
        record = read_json(out / f"decode.{split}.json")
    except (OSError, ValueError):
        return f"no readable decode.{split}.json"
    record = {**_decoding_defaults(), **record.get("key", {}), **record}  # records of earlier versions
    for key in DECODE_OPTIONS:
        if options.get(key) is not None and record.get(key) != options[key]:
            return f"decoded with {key} {record.get(key)!r}, asked for {options[key]!r}"
    checkpoint = Path(options.get("checkpoint") or out / "best.pt")
    if checkpoint.is_file() and record.get("checkpoint_sha256") != sha256sum(checkpoint):
        return f"decoded from other weights than {checkpoint}"
    return None


def dev_scorer(
    config: Dict[str, Any],
    recs: Sequence[GraphTextRecord],
    make_encoder: EncoderFactory,
    relation_names: Sequence[str],
    bleu: Callable[[List[str]], float],
) -> DevScorer:
    """``(model, vocab) -> bleu(hypotheses)``: ``recs`` decoded (relexicalised) with ``config``'s decoding settings,
    scored by the task's ``bleu``; what a task's ``dev_bleu`` gives the trainer for ``keep="dev_bleu"``. A bad
    ``config`` is the trainer's one-line error, raised here before any training."""
    settings = decode_settings(GeneratorConfig.from_mapping(config).to_dict())

    def score(model: GraphWriter, vocab: Vocab) -> float:
        hyps, _ = decode_records(model, make_encoder(vocab, relation_names), recs, settings, progress=False)
        return bleu(hyps)

    return score


def decode_records(
    model: GraphWriter,
    enc: GraphTextEncoder,
    recs: Sequence[GraphTextRecord],
    settings: Dict[str, Any],
    batch_size: int = 32,
    progress: bool = True,
    desc: str = "decoding",
) -> Tuple[List[str], List[str]]:
    """Batched greedy (``settings["beam"] == 1``) or beam-search decoding of ``recs`` with ``settings`` (every name
    of :data:`~graph_rma.tasks.generator_config.DECODING_FIELDS`, :func:`decode_settings`; their meaning:
    :meth:`GraphWriter.beam_search`); returns (relexicalised, delexicalised) texts, one per record."""
    dev = next(model.parameters()).device
    items = enc.encode_all(recs)
    decoding = {k: settings[k] for k in DECODING_FIELDS}
    common = {k: v for k, v in decoding.items() if k not in ("beam", "length_penalty")}  # greedy takes these
    hyps: List[List[int]] = []
    for idx in tqdm(_batches(len(items), batch_size), desc=desc, disable=not progress, leave=False):
        batch = _to(collate([items[i] for i in idx]), dev)
        if settings["beam"] == 1:
            hyps += model.greedy(batch, **common)
        else:
            hyps += model.beam_search(batch, **decoding)
    relex = [enc.decode(h, r) for h, r in zip(hyps, recs)]
    delex = [enc.decode(h, r, relex=False) for h, r in zip(hyps, recs)]
    return relex, delex


@torch.no_grad()
def head_diversity(
    checkpoint: PathLike,
    records: Sequence[GraphTextRecord],
    make_encoder: EncoderFactory = GraphTextEncoder,
    device: Optional[str] = None,
) -> Dict[str, Any]:
    """How alike the encoder's heads are (mean pairwise cosine similarity over head pairs, as in
    :func:`graph_rma.regularizers.disagreement`): of the head parameters (query/key/value rows), averaged over
    layers, and of the attention weights ``[E, H]`` on ``records``, per layer."""
    model, vocab, ck = load_model(checkpoint, device)
    items = make_encoder(vocab, ck["relations"]).encode_all(records)
    memory = model.encode(_to(collate(items), next(model.parameters()).device), return_attention=True)
    return {
        "variant": ck["variant"],
        "epoch": ck["epoch"],
        "records": len(items),
        "head_parameter_cosine": float(parameter_disagreement(model.encoder)),
        "attention_cosine": [float(disagreement(alpha.t(), head_dim=0)) for alpha, _ in memory["attention"]],
    }


#: What a graph-to-text run's ``config.json``, ``checkpoint.pt`` and ``best.pt`` record as their ``task``.
TASK = "graph_to_text"
_COMMANDS = {"agenda": "graph-rma agenda", "webnlg": "graph-rma webnlg", "node": "graph-rma node / graph-rma report"}


def checkpoint_dataset(ck: Dict[str, Any]) -> Optional[str]:
    """The dataset a graph-to-text checkpoint was trained on: its ``dataset`` entry, else (runs saved before the
    entry existed) ``"webnlg"`` when its one relation is WebNLG's ``<rel>`` and ``"agenda"`` otherwise."""
    if "dataset" in ck:
        return ck["dataset"]
    return "webnlg" if list(ck.get("relations", [])) == ["<rel>"] else "agenda"


def _folder_dataset(out: Path) -> Optional[str]:
    """The dataset ``out/config.json`` records (older runs: read from their protocol), or ``None``."""
    try:
        saved = read_json(out / "config.json")
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or "protocol" not in saved:
        return None
    return saved.get("dataset") or ("webnlg" if saved["protocol"] == "webnlg2017" else "agenda")


def check_run(out: PathLike, checkpoint: Optional[PathLike], dataset: str, require: bool = True) -> Path:
    """The checkpoint a ``dataset`` command decodes (``checkpoint``, else ``out/best.pt``), checked before any data
    is read or file written: a graph-to-text checkpoint of ``dataset``, into a run folder that is not another
    dataset's run. A one-line :class:`graph_rma.GraphRMAError` otherwise (a node checkpoint, a text file, a run of
    the other dataset). ``require=False`` (scoring outputs already decoded): a missing checkpoint is not an error,
    and only the run folder is checked then."""
    out = Path(out)
    path = Path(checkpoint) if checkpoint else out / "best.pt"
    if not path.is_file():
        if require:
            raise GraphRMAError(f"checkpoint: no such file {path}")
        _check_folder(out, dataset)
        return path
    ck = load_checkpoint(path)
    if not isinstance(ck, dict) or not {"config", "vocab", "relations", "model"} <= set(ck):
        task = ck.get("task") if isinstance(ck, dict) else None
        what = f"a {task!r} checkpoint (use {_COMMANDS.get(task, 'its own command')})" if task else "not one"
        raise GraphRMAError(f"checkpoint: {path} is not a graph-to-text run's checkpoint; it is {what}")
    trained = checkpoint_dataset(ck)
    if trained is not None and trained != dataset:
        raise GraphRMAError(
            f"checkpoint: {path} was trained on {trained}, not {dataset}; decode it with "
            f"{_COMMANDS.get(trained, trained)} (nothing was written)"
        )
    _check_folder(out, dataset)
    return path


def _check_folder(out: Path, dataset: str) -> None:
    folder = _folder_dataset(out)
    if folder is not None and folder != dataset:
        raise GraphRMAError(
            f"out: {out} is a {folder} run; {dataset} outputs would overwrite its files: give another --out "
            f"(nothing was written)"
        )
