r"""The graph-to-text configuration: the size of the GraphWriter generator, how it is trained and how it decodes, as
one dataclass whose presets a reader can diff (``graph-rma agenda train`` and ``graph-rma webnlg train``).

A :class:`GeneratorConfig` says the model's size (``hidden``, ``layers``, ``heads``, ``decoder_heads``, the two
dropouts), its training (``epochs``, the global ``batch_size``, the optimizer and its learning rate, momentum and
gradient clipping, an optional learning-rate schedule, optional label smoothing), its data (the vocabulary's
``min_freq``, the training texts' ``max_target_len``) and its decoding (``beam``, ``max_len``, ``length_penalty``,
``no_repeat_ngram``, ``coverage_reward``). Each field carries its help text and the kind of value it takes
(``metadata``, :mod:`graph_rma.tasks.config_fields`): the ``train`` commands build one option per field from them,
and :meth:`GeneratorConfig.__post_init__` validates every value once, where it enters. This module imports neither
torch nor PyG, so ``--help`` shows the presets without loading the tasks.

The trainer (:func:`graph_rma.tasks.graph_to_text.train`) and the saved runs keep the configuration as a plain
mapping, :meth:`GeneratorConfig.to_dict`: the keys every configuration has had, plus an optional setting
(``no_repeat_ngram``, ``keep``, ``lr_schedule``, ``label_smoothing``, ``coverage_reward``) only where it is set. A
mapping enters through :meth:`GeneratorConfig.from_mapping` (a user's configuration: every setting but the optional
ones must be given) or :func:`saved_config` (a run folder's ``config.json`` or checkpoint, of any version: a missing
setting takes the dataclass's default).

The presets (:data:`AGENDA_CONFIGS`, :data:`WEBNLG_CONFIGS`; as mappings :data:`graph_rma.tasks.defaults.AGENDA_PRESETS`
and ``WEBNLG_PRESETS``, the tasks' ``PRESETS``):

* ``cpu``: trains and scores on 2 CPU cores in minutes (AGENDA: the offline protocol; run times in docs/agenda.md
  and docs/webnlg.md);
* ``full``: GraphWriter's configuration (rikdz/GraphWriter's pargs.py / train.py), for a GPU; WebNLG's with a
  smaller vocabulary cut and shorter texts;
* ``webnlg2017`` (WebNLG): aimed at the WebNLG 2017 challenge baseline's BLEU on the seen test categories.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .._errors import GraphRMAError
from .config_fields import check_value, config_field

__all__ = [
    "AGENDA_CONFIGS",
    "DECODING_FIELDS",
    "GeneratorConfig",
    "KEEP_RULES",
    "LR_SCHEDULES",
    "OPTIMIZERS",
    "OPTIONAL_FIELDS",
    "REQUIRED_FIELDS",
    "WEBNLG_CONFIGS",
    "check_lr_schedule",
    "generator_fields",
    "preset_dicts",
    "resolve_config",
    "saved_config",
]

OPTIMIZERS: Tuple[str, ...] = ("adam", "sgd")
#: What ``best.pt`` keeps: the epoch with the lowest dev loss, or the one with the highest dev BLEU.
KEEP_RULES: Tuple[str, ...] = ("dev_loss", "dev_bleu")
#: The kinds of ``lr_schedule`` and the settings each takes (all required).
LR_SCHEDULES: Dict[str, Tuple[str, ...]] = {"plateau": ("factor", "patience", "min_lr")}


@dataclass(frozen=True)
class GeneratorConfig:
    """One graph-to-text configuration (see the module): every field with its help text and kind in ``metadata``
    (:func:`generator_fields`). The defaults are AGENDA's ``cpu`` preset; a field added later must default to what
    runs did before it existed (old saved runs take that value) and is listed in :data:`OPTIONAL_FIELDS`."""

    hidden: int = config_field(128, "positive_int", "model width")
    layers: int = config_field(2, "positive_int", "graph-transformer blocks")
    heads: int = config_field(4, "positive_int", "encoder heads (the particles of the repulsive variants)")
    dropout: float = config_field(0.1, "probability", "dropout")
    attention_dropout: float = config_field(0.1, "probability", "dropout on attention weights")
    decoder_heads: int = config_field(4, "positive_int", "heads of the decoder's attention over the graph and title")
    epochs: int = config_field(8, "positive_int", "epochs (more epochs on an existing run continue it)")
    batch_size: int = config_field(24, "positive_int", "global batch size (records per optimizer step)")
    optimizer: str = config_field("adam", "choice", "optimizer", OPTIMIZERS)
    lr: float = config_field(2e-3, "positive_float", "learning rate")
    momentum: float = config_field(0.9, "nonnegative_float", "SGD momentum")
    clip: float = config_field(1.0, "nonnegative_float", "gradient norm clipping (0: none)")
    label_smoothing: float = config_field(
        0.0,
        "probability",
        "training loss: label smoothing (each token's loss mixed with this weight of its mean over every output the "
        "record can produce; the dev loss stays the plain NLL)",
    )
    min_freq: int = config_field(3, "positive_int", "vocabulary: words seen at least this often")
    max_target_len: Optional[int] = config_field(
        120, "optional_positive_int", "truncate training texts to this many tokens"
    )
    beam: int = config_field(2, "positive_int", "beam size for decoding (1 = greedy)")
    max_len: int = config_field(150, "positive_int", "longest decoded text")
    length_penalty: float = config_field(1.0, "finite_float", "beam search length penalty")
    no_repeat_ngram: int = config_field(
        0, "nonnegative_int", "decoding: no output holds the same n-gram twice, for this n (0: off)"
    )
    coverage_reward: float = config_field(
        0.0,
        "nonnegative_float",
        "decoding: added to an output's score for each distinct input entity it copies, so that outputs naming more "
        "of their input win (0: off)",
    )
    keep: str = config_field(
        "dev_loss",
        "choice",
        "the epoch best.pt keeps: the lowest dev loss, or the highest dev BLEU (dev decoded after every epoch with "
        "the run's decoding settings and scored as the task's evaluate does, without METEOR)",
        KEEP_RULES,
    )
    lr_schedule: Optional[Dict[str, Any]] = config_field(
        None,
        "lr_schedule",
        "None (a constant learning rate) or {'kind': 'plateau', 'factor': f, 'patience': p, 'min_lr': m}: the rate "
        "times f (down to m) after p + 1 epochs in a row without a lower dev loss than the best so far",
        option=False,  # a dict: set by a preset or from Python, not on the command line
    )

    def __post_init__(self) -> None:
        for f in generator_fields():
            if f.metadata["kind"] == "lr_schedule":
                check_lr_schedule(getattr(self, f.name))
            else:
                check_value(f.name, getattr(self, f.name), f.metadata)

    def to_dict(self) -> Dict[str, Any]:
        """The plain mapping the trainer and the saved runs keep: every field in order, but an optional field
        (:data:`OPTIONAL_FIELDS`) only where it differs from its default (so a configuration without a schedule is
        the mapping it always was, and resuming compares like with like)."""
        values = asdict(self)
        defaults = {f.name: f.default for f in generator_fields()}
        return {k: v for k, v in values.items() if k not in OPTIONAL_FIELDS or v != defaults[k]}

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> "GeneratorConfig":
        """The configuration of ``config`` (a preset's mapping, a user's dict), validated: an unknown key, a missing
        required one (:data:`REQUIRED_FIELDS`) or a bad value is a one-line ``GraphRMAError`` naming it."""
        _check_keys(config)
        missing = [k for k in REQUIRED_FIELDS if k not in config]
        if missing:
            raise GraphRMAError(f"config: missing {', '.join(missing)}")
        return cls(**config)


def generator_fields() -> List[Any]:
    """The fields of :class:`GeneratorConfig`, in order (:func:`dataclasses.fields`)."""
    return list(fields(GeneratorConfig))


#: Fields a configuration may leave out (absent = the default, which is what runs did before the field existed).
OPTIONAL_FIELDS: Tuple[str, ...] = ("no_repeat_ngram", "keep", "lr_schedule", "label_smoothing", "coverage_reward")
#: Fields every configuration gives (:meth:`GeneratorConfig.from_mapping` refuses a mapping without one).
REQUIRED_FIELDS: Tuple[str, ...] = tuple(f.name for f in generator_fields() if f.name not in OPTIONAL_FIELDS)
#: The decoding settings (``generate`` / ``evaluate`` take them as options over the run's).
DECODING_FIELDS: Tuple[str, ...] = ("beam", "max_len", "length_penalty", "no_repeat_ngram", "coverage_reward")


def _check_keys(config: Mapping[str, Any]) -> None:
    if not isinstance(config, Mapping):
        raise GraphRMAError(f"config: expected a mapping of settings, got {type(config).__name__}")
    known = [f.name for f in generator_fields()]
    unknown = [k for k in config if k not in known]
    if unknown:
        raise GraphRMAError(
            f"config: unknown setting {', '.join(map(str, unknown))} (expected the fields of GeneratorConfig: "
            f"{', '.join(REQUIRED_FIELDS)} and optionally {', '.join(OPTIONAL_FIELDS)})"
        )


def check_lr_schedule(spec: Any) -> None:
    """A one-line ``GraphRMAError`` (``lr_schedule: ...``) unless ``spec`` is ``None`` or a schedule of
    :data:`LR_SCHEDULES` with exactly its settings, each in range."""
    if spec is None:
        return
    if not isinstance(spec, dict) or spec.get("kind") not in LR_SCHEDULES:
        raise GraphRMAError(f"lr_schedule: expected None or a dict with kind in {sorted(LR_SCHEDULES)}, got {spec!r}")
    want = set(LR_SCHEDULES[spec["kind"]])
    have = set(spec) - {"kind"}
    if have != want:
        raise GraphRMAError(
            f"lr_schedule: kind {spec['kind']} takes exactly {', '.join(sorted(want))}; got "
            f"{', '.join(sorted(have)) or 'none'}"
        )
    if not 0 < spec["factor"] < 1:
        raise GraphRMAError(f"lr_schedule: factor expected in (0, 1), got {spec['factor']!r}")
    if not isinstance(spec["patience"], int) or isinstance(spec["patience"], bool) or spec["patience"] < 0:
        raise GraphRMAError(f"lr_schedule: patience expected a non-negative integer, got {spec['patience']!r}")
    if not isinstance(spec["min_lr"], (int, float)) or spec["min_lr"] < 0:
        raise GraphRMAError(f"lr_schedule: min_lr expected a non-negative number, got {spec['min_lr']!r}")


def saved_config(config: Mapping[str, Any]) -> Dict[str, Any]:
    """A saved run's configuration (``config.json``'s ``"config"``, a checkpoint's ``"config"``) as the mapping the
    trainer uses now: validated, every missing setting the dataclass's default, optional ones at their default left
    out (:meth:`GeneratorConfig.to_dict`). Runs saved by every earlier version load this way."""
    _check_keys(config)
    return GeneratorConfig(**config).to_dict()


def resolve_config(preset: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """``preset`` (a mapping of :func:`preset_dicts`) with ``overrides`` put over it (a value ``None`` leaves the
    preset's), validated; the trainer's mapping (:meth:`GeneratorConfig.to_dict`)."""
    changes = {k: v for k, v in (overrides or {}).items() if v is not None}
    _check_keys(changes)
    return replace(GeneratorConfig.from_mapping(preset), **changes).to_dict()


def preset_dicts(configs: Mapping[str, GeneratorConfig]) -> Dict[str, Dict[str, Any]]:
    """Each preset as the trainer's mapping (:meth:`GeneratorConfig.to_dict`), by name."""
    return {name: config.to_dict() for name, config in configs.items()}


AGENDA_CONFIGS: Dict[str, GeneratorConfig] = {
    # small enough to train and evaluate on 2 CPU cores in minutes (offline protocol; run time in docs/agenda.md)
    "cpu": GeneratorConfig(),
    # GraphWriter's configuration (pargs.py / train.py of rikdz/GraphWriter): hidden 500, 6 blocks, 4 heads,
    # SGD lr 0.1 momentum 0.9, gradient clipping 1, batch 32, 20 epochs, vocabulary cut at 5 occurrences
    "full": GeneratorConfig(
        hidden=500,
        layers=6,
        epochs=20,
        batch_size=32,
        optimizer="sgd",
        lr=0.1,
        min_freq=5,
        max_target_len=None,
        beam=4,
        max_len=200,
    ),
}
WEBNLG_CONFIGS: Dict[str, GeneratorConfig] = {
    # trains and evaluates on 2 CPU cores in minutes (its measured run time is in docs/webnlg.md)
    "cpu": GeneratorConfig(epochs=2, batch_size=32, min_freq=2, max_target_len=60, beam=1, max_len=60),
    # GraphWriter's configuration (AGENDA's "full" preset), with WebNLG's smaller vocabulary cut and shorter texts
    "full": replace(AGENDA_CONFIGS["full"], min_freq=2, max_len=100),
    # Aimed at the WebNLG 2017 challenge's baseline: measured against the BLEU table of Gardent et al., INLG 2017 ("The
    # WebNLG Challenge: Generating Text from RDF Data"; the baseline's seen-category BLEU, checked against the
    # organisers' own output file eval/bleu3ref-Baseline_old-cat.txt of webnlg-automatic-evaluation) and against GCN_EC
    # (Marcheggiani & Perez-Beltrachini, INLG 2018), scored with `--scorer webnlg2017`. Nothing in it was chosen on
    # test: a wider model than `cpu` that still trains on one CPU thread, the challenge baseline's dropout (OpenNMT's
    # default), every training text kept whole (the longest has 70 tokens), enough epochs for the learning rate to be
    # halved several times on dev loss (OpenNMT's decay rule), best.pt by dev loss; beam search with GNMT's length
    # penalty, whose beam and penalty are decoding options to set on dev (`generate --split dev`) after training.
    "webnlg2017": GeneratorConfig(
        hidden=256,
        layers=3,
        dropout=0.3,
        epochs=30,
        batch_size=32,
        lr=1e-3,
        min_freq=2,
        max_target_len=None,
        beam=5,
        max_len=80,
        lr_schedule={"kind": "plateau", "factor": 0.5, "patience": 0, "min_lr": 1e-5},
    ),
}
