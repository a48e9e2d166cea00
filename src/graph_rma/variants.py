r"""Training variants as configuration: plain, regularised, SGLD, SVGD, SPOS and DropAttention, for any model.

A variant is a short spec string, parsed by :func:`parse_variant`::

    ma                                   plain multi-head attention
    reg:kind=frobenius,weight=0.01       Lin et al. (2017) penalty on attention  (kind=disagreement: Li et al. 2018)
    sgld:eps=1,beta=1000                 SGLD on every head (the paper's Table 8 baseline)
    svgd:alpha=0.1,eps=1                 SVGD over heads (Eq. 4)
    spos:alpha=0.1,eps=1,beta=1000       SPOS over heads (Eq. 5)
    svgd:roles=query/key                 only the query and key projections are particles (paper Table 10)
    svgd:layers=conv1                    only the module named ``conv1``
    svgd:warmup=50                       plain gradients for the first 50 steps, then SVGD
    dropattn:p=0.1,w=1,mode=column       DropAttention (column mode; ``mode=element`` is the default)
    svgd:alpha=0.1+dropattn:p=0.1        combined with ``+``
    svgd:alpha=0.01,update=authors       the authors' published code, not the paper (compatibility option:
                                         graph_rma.particles.authors; alpha is their d_kernel_weight w;
                                         view=heads: one particle per head instead of W.t().reshape(H, -1))

Tasks and examples never re-implement a variant: :func:`apply_variant` is the one function that applies it to a
built model and its optimizer (DropAttention into every attention layer that supports it, one instance per layer;
the sampler attached to the optimizer) and returns a :class:`VariantSetup` whose :meth:`~VariantSetup.penalty` is
the regularisation term to add to the loss::

    model = build_model(...)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    setup = apply_variant("svgd:alpha=0.01,eps=8", model, optimizer, seed=0)
    for batch in data:
        loss = task_loss(...)
        if setup.needs_attention:           # only the regularised variants need the attention weights
            loss = loss + setup.penalty(model, attention=attention)
        loss.backward(); optimizer.step()
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from ._errors import GraphRMAError
from .particles import SGLD, SPOS, SVGD, ParticleSampler
from .particles.authors import AuthorsSPOS, AuthorsSVGD
from .particles.layouts import load_plugins
from .particles.samplers import DEFAULT_ALPHA
from .regularizers import disagreement, frobenius_penalty, frobenius_penalty_sparse, parameter_disagreement

__all__ = [
    "Variant",
    "VariantSetup",
    "apply_variant",
    "parse_variant",
    "make_sampler",
    "make_drop_attention",
    "register_drop_attention_installer",
    "regularization_loss",
]

SAMPLERS = ("ma", "sgld", "svgd", "spos")
REG_KINDS = ("frobenius", "disagreement")
UPDATES = ("paper", "authors")
_MODE_ALIASES = {"e": "element", "element": "element", "c": "column", "column": "column"}


@dataclass(frozen=True)
class Variant:
    """A parsed variant. ``sampler`` is one of ``ma``, ``sgld``, ``svgd``, ``spos``; ``update`` is ``paper`` (Eqs.
    4-5) or ``authors`` (the authors' published code, :mod:`graph_rma.particles.authors`; svgd/spos only)."""

    sampler: str = "ma"
    alpha: float = DEFAULT_ALPHA  # the samplers' default: "svgd" means SVGD(model)
    eps: float = 1.0
    beta: float = 1.0
    bandwidth: Union[str, float] = "median"
    kernel_grad: bool = True
    roles: Optional[Tuple[str, ...]] = None
    layers: Optional[Tuple[str, ...]] = None
    reg: Optional[str] = None
    reg_weight: float = 0.0
    reg_target: str = "attention"
    drop_attention: Optional[Tuple[Tuple[str, Any], ...]] = None
    update: str = "paper"
    view: str = "mixing"
    warmup: int = 0

    @property
    def name(self) -> str:
        """Short family name, e.g. ``svgd+dropattn``."""
        parts = [] if self.sampler == "ma" and (self.reg or self.drop_attention) else [self.sampler]
        if self.reg:
            parts.insert(0, "reg")
        if self.drop_attention:
            parts.append("dropattn")
        return "+".join(parts)

    @property
    def drop_attention_kwargs(self) -> Optional[Dict[str, Any]]:
        return dict(self.drop_attention) if self.drop_attention else None

    @property
    def spec(self) -> str:
        """Canonical spec string; ``parse_variant(v.spec) == v``."""
        default = Variant()
        parts: List[str] = []
        if self.reg:
            opts = [f"kind={self.reg}", f"weight={_fmt(float(self.reg_weight))}"]
            if self.reg_target != default.reg_target:
                opts.append(f"target={self.reg_target}")
            parts.append("reg:" + ",".join(opts))
        if self.sampler != "ma" or not parts and not self.drop_attention:
            keys = {
                "sgld": ("eps", "beta", "warmup"),
                "svgd": ("alpha", "eps", "bandwidth", "kernel_grad", "update", "view", "warmup"),
                "spos": ("alpha", "eps", "beta", "bandwidth", "kernel_grad", "update", "view", "warmup"),
                "ma": (),
            }[self.sampler]
            # alpha always: its default changed once (1 -> 0.1), and a spec string must mean the same thing later
            opts = [
                f"{k}={_fmt(getattr(self, k))}"
                for k in keys
                if getattr(self, k) != getattr(default, k) or k == "alpha" and self.update == "paper"
            ]
            if self.sampler != "ma" and self.roles:
                opts.append("roles=" + "/".join(self.roles))
            if self.sampler != "ma" and self.layers:
                opts.append("layers=" + "/".join(self.layers))
            parts.append(self.sampler + (":" + ",".join(opts) if opts else ""))
        if self.drop_attention:
            d = dict(self.drop_attention)
            parts.append("dropattn:" + ",".join(f"{k}={_fmt(v)}" for k, v in d.items()))
        return "+".join(parts)

    def __str__(self) -> str:
        return self.spec


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        # the shortest %g form that reads back as exactly v (6 digits when they suffice): lossless, so the run
        # trains with the user's value and its name and resume key are that value
        for digits in range(6, 18):
            text = f"{v:.{digits}g}"
            if float(text) == v:
                break
        return text.replace("e+", "e")  # no "+": it separates the parts of a spec
    return str(v)


#: A number as a spec writes it: ASCII digits, an optional sign, point and exponent (no "1_000").
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _float(
    spec: str, key: str, value: str, low: Optional[float] = None, strict: bool = False, high: Optional[float] = None
) -> float:
    """``value`` as a finite float (``> low`` when ``strict``, else ``>= low``; ``< high``), or a ValueError
    naming ``key``."""
    try:
        x = float(value)
    except ValueError:
        raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} is not a number") from None
    if math.isfinite(x) and not _NUMBER.fullmatch(value):  # float() also reads "1_000"
        raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} is not a number in ASCII digits (e.g. 0.1, 1e-3)")
    if not math.isfinite(x):
        raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} is not a finite number")
    if low is not None and (x <= low if strict else x < low):
        raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} must be {'>' if strict else '>='} {low:g}")
    if high is not None and x >= high:
        raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} must be < {high:g}")
    return x


def _int(spec: str, key: str, value: str, low: int) -> int:
    if not _INTEGER.fullmatch(value):  # int() also reads "1_000"
        raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} is not an integer in ASCII digits")
    x = int(value)
    if x < low:
        raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} must be >= {low}")
    return x


def _bool(spec: str, key: str, value: str) -> bool:
    v = value.lower()
    if v in ("1", "true", "yes"):
        return True
    if v in ("0", "false", "no"):
        return False
    raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} is not a boolean (1/0, true/false, yes/no)")


def _names(spec: str, key: str, value: str) -> Tuple[str, ...]:
    names = tuple(v for v in value.split("/") if v)
    if not names:
        raise GraphRMAError(f"variant: {key}={value!r} in {spec!r} names nothing (expected e.g. {key}=a/b)")
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise GraphRMAError(f"variant: {key}={_short(value)} in {_short(spec)} names {twice!r} twice")
    return names


def _short(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut to about ``limit`` characters (a spec of 10,000 roles stays one readable line)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def _check_characters(spec: str) -> None:
    """A spec is printable ASCII without spaces: Unicode digits ("١", "１"), no-break spaces and newlines or spaces
    around ``=``, ``,`` and ``:`` are refused (float() reads some of them as other numbers)."""
    for i, c in enumerate(spec):
        if not (c.isascii() and c.isprintable()) or c.isspace():
            raise GraphRMAError(
                f"variant: {_short(spec)} holds {c!r} at position {i}; a spec is written in ASCII without spaces "
                f"(e.g. 'svgd:alpha=0.1,eps=1')"
            )


def parse_variant(spec: Union[str, Variant]) -> Variant:
    """Parse a spec string (see the module docstring) into a :class:`Variant`.

    Strict: every value is checked here, before any model or data exists. A spec is printable ASCII without
    spaces, its numbers in ASCII digits (no ``1_000``). Unknown or duplicate keys (``w`` and ``window`` are one
    key), a part given twice, a role or layer named twice, non-numbers, non-finite numbers, out-of-range values
    (``alpha < 0``, ``eps``/``beta``/``bandwidth <= 0``, an ``update`` other than ``paper``/``authors``,
    ``bandwidth`` or ``kernel_grad`` with ``update=authors``, ``view`` (``mixing``/``heads``) without it, ``p``
    outside ``[0, 1)``, a ``window`` that is not an integer ``>= 1``, a ``weight < 0``) and booleans other than
    ``1/0/true/false/yes/no`` raise a ``GraphRMAError`` (:class:`~graph_rma.GraphRMAError`) naming the key.
    """
    if isinstance(spec, Variant):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise GraphRMAError(f"variant: expected a spec string such as 'svgd:alpha=0.1', got {spec!r}")
    _check_characters(spec.strip())
    fields: Dict[str, Any] = {}
    seen_parts: set = set()
    for part in spec.strip().split("+"):
        name, _, rest = part.strip().partition(":")
        if name in seen_parts:
            raise GraphRMAError(f"variant: part {name!r} appears twice in {spec!r}")
        seen_parts.add(name)
        opts = _options(spec, name, rest)
        if name in SAMPLERS:
            _sampler_fields(spec, name, opts, fields)
        elif name == "reg":
            fields.update(_reg_fields(spec, opts))
        elif name == "dropattn":
            fields["drop_attention"] = _dropattn_fields(spec, opts)
        else:
            raise GraphRMAError(
                f"variant: unknown part {name!r} in {spec!r}; expected one of "
                f"{', '.join(SAMPLERS + ('reg', 'dropattn'))}"
            )
    return Variant(**fields)


def _options(spec: str, name: str, rest: str) -> Dict[str, str]:
    """A part's ``key=value`` options (``w`` and ``window`` of ``dropattn`` are one key, given once)."""
    opts: Dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise GraphRMAError(f"variant: option {item!r} in {spec!r} is not key=value")
        key = key.strip()
        canonical = "window" if name == "dropattn" and key in ("w", "window") else key
        if any(("window" if name == "dropattn" and k in ("w", "window") else k) == canonical for k in opts):
            raise GraphRMAError(f"variant: duplicate key {key!r} in {spec!r}")
        opts[key] = value.strip()
    return opts


#: the options each sampler part takes
_SAMPLER_OPTIONS: Dict[str, Tuple[str, ...]] = {
    "ma": (),
    "sgld": ("eps", "beta", "roles", "layers", "warmup"),
    "svgd": ("alpha", "eps", "bandwidth", "kernel_grad", "roles", "layers", "update", "view", "warmup"),
    "spos": ("alpha", "eps", "beta", "bandwidth", "kernel_grad", "roles", "layers", "update", "view", "warmup"),
}


def _sampler_fields(spec: str, name: str, opts: Dict[str, str], fields: Dict[str, Any]) -> None:
    """A sampler part (``ma``, ``sgld``, ``svgd``, ``spos``) checked into ``fields``."""
    if "sampler" in fields and name != "ma":
        raise GraphRMAError(f"variant: {spec!r} names two samplers")
    if name != "ma":
        fields["sampler"] = name
    allowed = set(_SAMPLER_OPTIONS[name])
    if opts.get("update") == "authors":
        for key in ("bandwidth", "kernel_grad"):
            if key in opts:
                raise GraphRMAError(
                    f"variant: option {key!r} does not apply with update=authors (their code "
                    f"fixes the bandwidth and smooths the gradients) in {spec!r}"
                )
    elif "view" in opts:
        raise GraphRMAError(f"variant: option 'view' applies only with update=authors in {spec!r}")
    for key, value in opts.items():
        if key not in allowed:
            raise GraphRMAError(f"variant: unknown option {key!r} for {name!r} (allowed: {sorted(allowed)})")
        fields[key] = _sampler_value(spec, key, value)


def _sampler_value(spec: str, key: str, value: str) -> Any:
    """One sampler option's value, checked."""
    if key == "alpha":
        return _float(spec, key, value, low=0.0)
    if key in ("eps", "beta"):
        return _float(spec, key, value, low=0.0, strict=True)
    if key == "bandwidth":
        return value if value in ("median", "liu") else _float(spec, key, value, low=0.0, strict=True)
    if key == "kernel_grad":
        return _bool(spec, key, value)
    if key == "warmup":
        return _int(spec, key, value, low=0)
    if key == "update":
        if value not in UPDATES:
            raise GraphRMAError(f"variant: update={value!r} in {spec!r} must be one of {', '.join(UPDATES)}")
        return value
    if key == "view":
        if value not in ("mixing", "heads"):
            raise GraphRMAError(f"variant: view={value!r} in {spec!r} must be mixing or heads")
        return value
    return _names(spec, key, value)  # roles, layers


def _reg_fields(spec: str, opts: Dict[str, str]) -> Dict[str, Any]:
    """The ``reg`` part: its kind, weight and target."""
    kind = opts.pop("kind", "frobenius")
    if kind not in REG_KINDS:
        raise GraphRMAError(f"variant: reg kind must be one of {REG_KINDS}, got {kind!r}")
    weight = _float(spec, "weight", opts.pop("weight", "0.01"), low=0.0)
    target = opts.pop("target", "attention")
    if target not in ("attention", "parameters", "outputs"):
        raise GraphRMAError(f"variant: reg target must be attention, parameters or outputs, got {target!r}")
    if opts:
        raise GraphRMAError(f"variant: unknown option(s) {sorted(opts)} for 'reg' (kind, weight, target)")
    return {"reg": kind, "reg_weight": weight, "reg_target": target}


def _dropattn_fields(spec: str, opts: Dict[str, str]) -> Tuple[Tuple[str, Any], ...]:
    """The ``dropattn`` part: ``p``, ``window``, ``mode``, ``rescale``."""
    d: Dict[str, Any] = {"p": _float(spec, "p", opts.pop("p", "0.1"), low=0.0, high=1.0)}
    d["window"] = _int(spec, "window", opts.pop("w", opts.pop("window", "1")), low=1)
    mode = opts.pop("mode", "element")
    if mode not in _MODE_ALIASES:
        raise GraphRMAError(f"variant: dropattn mode must be element (e) or column (c), got {mode!r}")
    d["mode"] = _MODE_ALIASES[mode]
    d["rescale"] = opts.pop("rescale", "normalized")
    if d["rescale"] not in ("normalized", "inverse"):
        raise GraphRMAError(f"variant: dropattn rescale must be normalized or inverse, got {d['rescale']!r}")
    if opts:
        raise GraphRMAError(f"variant: unknown option(s) {sorted(opts)} for 'dropattn' (p, w, mode, rescale)")
    return tuple(d.items())


def make_sampler(variant: Union[str, Variant], model: nn.Module, seed: int = 0) -> Optional[ParticleSampler]:
    """The particle sampler of ``variant`` for ``model`` (``None`` for ``ma``/``reg``/``dropattn``)."""
    v = parse_variant(variant)
    common = dict(eps=v.eps, roles=v.roles, layers=list(v.layers) if v.layers else None, seed=seed, warmup=v.warmup)
    if v.update == "authors":  # parse_variant allows it for svgd/spos only
        if v.sampler == "svgd":
            return AuthorsSVGD(model, w=v.alpha, view=v.view, **common)
        return AuthorsSPOS(model, w=v.alpha, beta=v.beta, view=v.view, **common)
    if v.sampler == "svgd":
        return SVGD(model, alpha=v.alpha, bandwidth=v.bandwidth, kernel_grad=v.kernel_grad, **common)
    if v.sampler == "spos":
        return SPOS(model, alpha=v.alpha, beta=v.beta, bandwidth=v.bandwidth, kernel_grad=v.kernel_grad, **common)
    if v.sampler == "sgld":
        return SGLD(model, beta=v.beta, **common)
    return None


def make_drop_attention(variant: Union[str, Variant]):
    """A :class:`graph_rma.DropAttention` module for ``variant``, or ``None`` when it has no ``dropattn`` part."""
    v = parse_variant(variant)
    if not v.drop_attention:
        return None
    from .dropattention import DropAttention

    return DropAttention(**dict(v.drop_attention))


AttentionLike = Union[Tensor, Tuple[Tensor, Tensor]]


def regularization_loss(
    variant: Union[str, Variant],
    model: Optional[nn.Module] = None,
    attention: Sequence[AttentionLike] = (),
    head_outputs: Sequence[Tensor] = (),
) -> Optional[Tensor]:
    """The weighted regularisation term of ``variant`` (``None`` when it has none).

    Args:
        model: needed for ``target=parameters`` (Li et al.'s parameter disagreement).
        attention: per layer, dense attention ``[..., H, S]`` or a sparse pair ``(alpha [E, H], index [E])`` with
            ``index`` the destination of each edge.
        head_outputs: per layer, head outputs ``[N, H, C]`` (for ``kind=disagreement, target=outputs``).
    """
    v = parse_variant(variant)
    if v.reg is None:
        return None
    terms: List[Tensor] = []
    if v.reg_target == "parameters":
        if model is None:
            raise GraphRMAError("model: needed for the parameter-disagreement regulariser")
        terms.append(parameter_disagreement(model))
    elif v.reg_target == "outputs":
        if not head_outputs:
            raise GraphRMAError("head_outputs: needed for target=outputs")
        terms += [disagreement(o, head_dim=-2) for o in head_outputs]
    else:
        if not attention:
            raise GraphRMAError("attention: needed for target=attention (dense [..., H, S] or (alpha, index) pairs)")
        for a in attention:
            if isinstance(a, (tuple, list)):
                alpha, index = a
                if v.reg == "frobenius":
                    terms.append(frobenius_penalty_sparse(alpha, index))
                else:
                    terms.append(disagreement(alpha.t(), head_dim=0))
            else:
                terms.append(frobenius_penalty(a) if v.reg == "frobenius" else disagreement(a.flatten(-2), head_dim=-2))
    return v.reg_weight * torch.stack(terms).mean()


Installer = Callable[[nn.Module, nn.Module], Optional[List[nn.Module]]]
_INSTALLERS: List[Installer] = []


def register_drop_attention_installer(installer: Installer) -> None:
    """Register ``installer(model, drop_attention) -> installed modules or None`` for models whose attention layers
    do not take a ``drop_attention`` attribute (``None``: not this installer's kind of model). :mod:`graph_rma.hf`
    registers one for HuggingFace models."""
    if installer not in _INSTALLERS:
        _INSTALLERS.append(installer)


@dataclass
class VariantSetup:
    """What :func:`apply_variant` did to a model, and what the training loop still needs from the variant.

    Attributes:
        variant: the parsed variant.
        sampler: the particle sampler attached to the optimizer (``None`` for ``ma``/``reg``/``dropattn``).
        drop_attention: the DropAttention modules installed, one per attention layer (empty without ``dropattn``).
    """

    variant: Variant
    sampler: Optional[ParticleSampler] = None
    drop_attention: List[nn.Module] = field(default_factory=list)

    @property
    def needs_attention(self) -> bool:
        """The penalty needs the attention weights (``reg`` with ``target=attention``)."""
        return self.variant.reg is not None and self.variant.reg_target == "attention"

    def penalty(
        self,
        model: Optional[nn.Module] = None,
        attention: Sequence[AttentionLike] = (),
        head_outputs: Sequence[Tensor] = (),
    ) -> Optional[Tensor]:
        """The weighted regularisation term to add to the loss (:func:`regularization_loss`); ``None`` without
        ``reg``."""
        return regularization_loss(self.variant, model, attention=attention, head_outputs=head_outputs)

    def state_dict(self) -> Dict[str, Any]:
        """The sampler's state (``{}`` without a sampler), for checkpoints."""
        return self.sampler.state_dict() if self.sampler is not None else {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if self.sampler is not None and state:
            self.sampler.load_state_dict(state)


def apply_variant(
    variant: Union[str, Variant], model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None, seed: int = 0
) -> VariantSetup:
    """Apply ``variant`` to a built ``model`` (and its ``optimizer``): the one place a spec becomes behaviour.

    * ``dropattn``: a fresh :class:`graph_rma.DropAttention` is installed as the ``drop_attention`` of every module
      whose class sets ``accepts_drop_attention = True`` (this package's layers; convert stock layers first with
      :func:`graph_rma.convert`); a model without such a layer goes to the registered installers
      (:func:`register_drop_attention_installer`; HuggingFace models: :func:`graph_rma.hf.use_drop_attention`). A
      ``GraphRMAError`` says so when nothing accepts it.
    * ``sgld``/``svgd``/``spos``: the sampler is built over the model's heads and attached to ``optimizer`` (when
      given), so that it runs right before every ``optimizer.step()``.
    * ``reg``: nothing changes in the model; add :meth:`VariantSetup.penalty` to the loss.

    Args:
        variant: a spec string (see the module docstring) or a :class:`Variant`.
        model: the model to train.
        optimizer: the optimizer the sampler attaches to; without one, call ``setup.sampler.step()`` yourself
            after ``loss.backward()``.
        seed: seed of the sampler's own noise generator (SPOS/SGLD).
    """
    v = parse_variant(variant)
    if not isinstance(model, nn.Module):
        raise GraphRMAError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    setup = VariantSetup(v)
    if v.drop_attention:
        layers = [m for m in model.modules() if getattr(m, "accepts_drop_attention", False)]
        if not layers:
            load_plugins(model)
            for installer in _INSTALLERS:
                installed = installer(model, make_drop_attention(v))
                if installed is not None:
                    setup.drop_attention.extend(installed)
                    break
        if not layers and not setup.drop_attention:
            raise GraphRMAError(
                f"variant: {v.spec!r} asks for DropAttention, but no layer of {type(model).__name__} "
                "accepts it (convert stock attention layers first with graph_rma.convert)"
            )
        for layer in layers:
            module = make_drop_attention(v)
            layer.drop_attention = module
            setup.drop_attention.append(module)
    setup.sampler = make_sampler(v, model, seed=seed)
    if setup.sampler is not None and optimizer is not None:
        setup.sampler.attach(optimizer)
    return setup
