r"""How a layer splits into heads: :class:`HeadParam`, :class:`ParticleGroup`, the layout registry and the stock
layouts (PyG ``GATConv``/``GATv2Conv``/``TransformerConv``, torch ``nn.MultiheadAttention``). The one registry of
where head ``i`` lives: the samplers read its parameter slices (:func:`head_layout`), the diagnostics where the heads'
outputs meet (:func:`projection_heads`), and the HuggingFace integration registers one finder that answers both.

A particle is always exactly one head's slices. A layout may give parameters with different head counts (grouped-query
attention: ``H`` query heads share ``G`` key/value heads); :func:`find_particle_groups` then makes one particle group
per head count, so that every particle is still one head's slices.

Libraries whose attention modules are many classes recognised by their structure (HuggingFace ``transformers``)
register a *layout finder* (:func:`register_layout_finder`) instead of one layout per class: ``finder(module)``
returns ``None`` or a :class:`FoundLayout` (its ``head_params()`` and ``projection_heads()``). Such a finder lives in an
optional subpackage (``graph_rma.hf``), which is imported the first time a model holding one of that library's
modules is searched (:func:`load_plugins`): a table of names, so the core never imports it.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple, Type, Union

import torch
from torch import Tensor, nn

from .._errors import GraphRMAError


@dataclass(frozen=True)
class HeadParam:
    """One parameter's share of the heads.

    ``param`` holds ``num_heads`` equal, contiguous, head-major chunks along ``axis`` (optionally only within
    ``param.narrow(axis, start, length)``, e.g. the query third of ``in_proj_weight``). Head ``i``'s slice is
    chunk ``i``, flattened.
    """

    name: str
    role: str
    param: nn.Parameter
    num_heads: int
    axis: int = 0
    start: int = 0
    length: Optional[int] = None

    def _region(self, t: Tensor) -> Tensor:
        if self.length is not None:
            t = t.narrow(self.axis, self.start, self.length)
        return t.movedim(self.axis, 0)

    def heads(self, t: Tensor) -> Tensor:
        """``t`` (the parameter or its gradient) as ``[num_heads, d]``."""
        region = self._region(t)
        if region.size(0) % self.num_heads != 0:
            raise GraphRMAError(
                f"{self.name}: axis {self.axis} has {region.size(0)} entries, not divisible by {self.num_heads} heads"
            )
        return region.reshape(self.num_heads, -1)

    def write(self, t: Tensor, value: Tensor) -> None:
        """Write ``value`` (``[num_heads, d]``) into the head slices of ``t`` in place."""
        region = self._region(t)
        region.copy_(value.reshape(region.shape))

    @property
    def size(self) -> int:
        return self.heads(self.param.data).size(1)


@dataclass
class ParticleGroup:
    """The ``M`` heads of one layer as ``M`` particles: head ``i`` = concatenation of its slices of ``params``."""

    name: str
    module: nn.Module
    num_heads: int
    params: List[HeadParam] = field(default_factory=list)

    @property
    def roles(self) -> List[str]:
        return sorted({p.role for p in self.params})

    @property
    def dim(self) -> int:
        return sum(p.size for p in self.params)

    def theta(self) -> Tensor:
        """Current particles ``[M, D]`` (a copy)."""
        return torch.cat([p.heads(p.param.detach()) for p in self.params], dim=1)

    def grad(self) -> Tensor:
        """Loss gradients ``[M, D]`` (zeros for a parameter with no gradient)."""
        parts = []
        for p in self.params:
            g = p.param.grad
            parts.append(p.heads(g.detach()) if g is not None else p.heads(torch.zeros_like(p.param)))
        return torch.cat(parts, dim=1)

    def set_grad(self, value: Tensor) -> None:
        """Overwrite the head slices of the parameters' gradients with ``value`` (``[M, D]``)."""
        offset = 0
        for p in self.params:
            d = p.size
            if p.param.grad is None:
                p.param.grad = torch.zeros_like(p.param)
            p.write(p.param.grad, value[:, offset : offset + d].to(p.param.grad.dtype))
            offset += d

    def __repr__(self) -> str:
        return f"ParticleGroup({self.name!r}, heads={self.num_heads}, dim={self.dim}, roles={self.roles})"


@dataclass(frozen=True)
class ProjectionHeads:
    """Where a layer's heads meet: ``projection``'s input is the concatenation ``[..., heads * head_dim]`` of the
    heads' outputs (head ``h``: features ``h*head_dim:(h+1)*head_dim``); ``attention`` (optional) is the module whose
    output's second element is the attention ``[B, heads, L, S]`` (or ``None`` when not computed). What
    :class:`graph_rma.diagnostics.HeadCapture` reads and masks a found layer's heads by."""

    heads: int
    head_dim: int
    projection: nn.Module
    attention: Optional[nn.Module] = None


class FoundLayout(Protocol):
    """What a layout finder returns for a module it recognises (e.g. :class:`graph_rma.hf.AttentionLayout`)."""

    def head_params(self) -> List[HeadParam]:
        """The module's head slices (the particles)."""

    def projection_heads(self) -> Optional[ProjectionHeads]:
        """Where the module's heads' outputs meet, or ``None`` when it has no such projection."""


Layout = Callable[[nn.Module], List[HeadParam]]
_LAYOUTS: Dict[Type[nn.Module], Layout] = {}


def register_head_layout(cls: Type[nn.Module], layout: Layout) -> None:
    """Register ``layout(module) -> [HeadParam, ...]`` for ``cls`` and its subclasses (nearest class wins)."""
    _LAYOUTS[cls] = layout


Finder = Callable[[nn.Module], Optional[FoundLayout]]
_FINDERS: List[Finder] = []

# Third-party library (top-level module name) -> the optional subpackage that registers its layouts and finders,
# imported by load_plugins the first time a model holds one of that library's modules.
_PLUGINS: Dict[str, str] = {"transformers": "graph_rma.hf"}


def register_layout_finder(finder: Finder) -> None:
    """Register ``finder(module) -> FoundLayout or None``, asked for modules that no class layout covers."""
    if finder not in _FINDERS:
        _FINDERS.append(finder)


def load_plugins(model: nn.Module) -> None:
    """Import the optional subpackage for each third-party library whose modules ``model`` holds (once each).

    A plugin that cannot be imported (its library too old, say) is reported by one warning; the library's modules
    are then not searched.
    """
    if not _PLUGINS:
        return
    tops = {type(m).__module__.partition(".")[0] for m in model.modules()}
    for top in sorted(tops & set(_PLUGINS)):
        plugin = _PLUGINS.pop(top)
        try:
            importlib.import_module(plugin)
        except ImportError as exc:
            warnings.warn(
                f"{plugin} could not be imported ({exc}); the {top} modules of the model are not searched for heads"
            )


def head_layout(module: nn.Module) -> Optional[Layout]:
    """The layout registered for ``type(module)`` or its nearest base class, else the first registered finder's
    layout for ``module``, or ``None``."""
    for cls in type(module).__mro__:
        if cls in _LAYOUTS:
            return _LAYOUTS[cls]
    found = _found(module)
    return None if found is None else lambda m: found.head_params()


def _found(module: nn.Module) -> Optional[FoundLayout]:
    for finder in _FINDERS:
        found = finder(module)
        if found is not None:
            return found
    return None


def projection_heads(module: nn.Module) -> Optional[ProjectionHeads]:
    """Where the heads of ``module`` meet, as its registered layout finder says (loading the library's plugin
    first), or ``None`` when no finder knows ``module``."""
    load_plugins(module)
    found = _found(module)
    return None if found is None else found.projection_heads()


def _hp(
    module: nn.Module, attr: str, role: str, heads: int, axis: int = 0, start: int = 0, length: Optional[int] = None
) -> List[HeadParam]:
    obj: object = module
    for part in attr.split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    if obj is None or not isinstance(obj, nn.Parameter):
        return []
    if isinstance(obj, nn.parameter.UninitializedParameter):
        raise GraphRMAError(
            f"{type(module).__name__}.{attr} is not initialised yet (lazy in_channels=-1): run one forward pass "
            f"before building the sampler"
        )
    return [HeadParam(attr, role, obj, heads, axis, start, length)]


def _gat_layout(m: nn.Module) -> List[HeadParam]:
    H = m.heads
    out = (
        _hp(m, "lin.weight", "lin", H) + _hp(m, "lin_src.weight", "lin_src", H) + _hp(m, "lin_dst.weight", "lin_dst", H)
    )
    out += _hp(m, "att_src", "att_src", H, axis=1) + _hp(m, "att_dst", "att_dst", H, axis=1)
    out += _hp(m, "lin_edge.weight", "lin_edge", H) + _hp(m, "att_edge", "att_edge", H, axis=1)
    return out


def _gatv2_layout(m: nn.Module) -> List[HeadParam]:
    H = m.heads
    out = _hp(m, "lin_l.weight", "lin_l", H) + _hp(m, "lin_l.bias", "lin_l", H)
    if not getattr(m, "share_weights", False):
        out += _hp(m, "lin_r.weight", "lin_r", H) + _hp(m, "lin_r.bias", "lin_r", H)
    out += _hp(m, "att", "att", H, axis=1) + _hp(m, "lin_edge.weight", "lin_edge", H)
    return out


def _transformer_conv_layout(m: nn.Module) -> List[HeadParam]:
    H = m.heads
    out: List[HeadParam] = []
    for attr, role in (("lin_query", "query"), ("lin_key", "key"), ("lin_value", "value"), ("lin_edge", "edge")):
        out += _hp(m, f"{attr}.weight", role, H) + _hp(m, f"{attr}.bias", role, H)
    return out


def _mha_layout(m: nn.MultiheadAttention) -> List[HeadParam]:
    H, E = m.num_heads, m.embed_dim
    out: List[HeadParam] = []
    if m.in_proj_weight is not None:
        for k, role in enumerate(("query", "key", "value")):
            out += _hp(m, "in_proj_weight", role, H, 0, k * E, E)
    else:
        out += _hp(m, "q_proj_weight", "query", H) + _hp(m, "k_proj_weight", "key", H)
        out += _hp(m, "v_proj_weight", "value", H)
    if m.in_proj_bias is not None:
        for k, role in enumerate(("query", "key", "value")):
            out += _hp(m, "in_proj_bias", role, H, 0, k * E, E)
    out += _hp(m, "bias_k", "key", H, axis=2) + _hp(m, "bias_v", "value", H, axis=2)
    out += _hp(m, "out_proj.weight", "out", H, axis=1)
    return out


def _register_stock_layouts() -> None:
    register_head_layout(nn.MultiheadAttention, _mha_layout)
    try:
        from torch_geometric.nn import GATConv, GATv2Conv, TransformerConv
    except ImportError:  # pragma: no cover
        return
    register_head_layout(GATConv, _gat_layout)
    register_head_layout(GATv2Conv, _gatv2_layout)
    register_head_layout(TransformerConv, _transformer_conv_layout)


_register_stock_layouts()

LayerSpec = Union[None, str, nn.Module, Sequence[Union[str, nn.Module]], Callable[[str, nn.Module], bool]]


def find_particle_groups(
    model: nn.Module,
    layers: LayerSpec = None,
    roles: Optional[Iterable[str]] = None,
    min_heads: int = 2,
) -> List[ParticleGroup]:
    """The particle groups of ``model``: one per attention layer, one particle per head.

    A layer whose parameters have two head counts (grouped-query attention: ``H`` query heads, ``G`` key/value
    heads) gives one group per count: the one with the most heads is named after the layer, the other after the
    layer and its roles (``"model.layers.0.self_attn:key/value"``).

    Args:
        model: any module; attention layers are found by their registered head layouts (and layout finders, see
            :func:`register_layout_finder`).
        layers: which layers: ``None`` (all), qualified module names (``"conv1"``, ``"layers.0.self_attn"``),
            module objects, or a predicate ``(name, module) -> bool``.
        roles: which parameter roles form the particles (e.g. ``{"query"}`` or ``{"att_src", "att_dst"}``);
            ``None`` for all of a layer's roles. See each layout for its role names.
        min_heads: layers with fewer heads are skipped (one head has nothing to repel): silently when the whole model
            is searched (a GAT's one-head output layer is the usual case), with a warning when ``layers`` names them.
    """
    if not isinstance(model, nn.Module):
        raise GraphRMAError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    load_plugins(model)
    selected = _selected_layers(model, layers)
    wanted = None if roles is None else ({roles} if isinstance(roles, str) else set(roles))
    named_explicitly = layers is not None and not callable(layers) or isinstance(layers, nn.Module)
    groups: List[ParticleGroup] = []
    known_roles: set = set()
    for name, module in selected:
        params = head_layout(module)(module)
        known_roles.update(p.role for p in params)
        if wanted is not None:
            params = [p for p in params if p.role in wanted]
        groups += _layer_groups(name, module, params, min_heads, warn=named_explicitly)
    if wanted is not None and not wanted <= known_roles:
        raise GraphRMAError(
            f"roles: unknown role(s) {sorted(wanted - known_roles)}; the selected layers have {sorted(known_roles)}"
        )
    return groups


def _layer_groups(
    name: str, module: nn.Module, params: List[HeadParam], min_heads: int, warn: bool
) -> List[ParticleGroup]:
    """One layer's particle groups: one per head count (grouped-query attention's query and key/value heads), the
    one with the most heads named after the layer; a count under ``min_heads`` is skipped (with a warning when the
    layer was asked for by name)."""
    groups: List[ParticleGroup] = []
    counts = sorted({p.num_heads for p in params}, reverse=True)
    for H in counts:
        share = [p for p in params if p.num_heads == H]
        label = name if H == counts[0] else f"{name}:{'/'.join(sorted({p.role for p in share}))}"
        if H < min_heads:
            if warn:
                warnings.warn(
                    f"{label or type(module).__name__}: {H} head(s), fewer than {min_heads}; not a particle group"
                )
            continue
        groups.append(ParticleGroup(label, module, H, share))
    return groups


def _selected_layers(model: nn.Module, layers: LayerSpec) -> List[Tuple[str, nn.Module]]:
    """``(name, module)`` of the attention layers ``layers`` selects (see :func:`find_particle_groups`)."""
    named = list(model.named_modules())
    if layers is None:
        return [(n, m) for n, m in named if head_layout(m) is not None]
    if callable(layers) and not isinstance(layers, nn.Module):
        return [(n, m) for n, m in named if head_layout(m) is not None and layers(n, m)]
    items = [layers] if isinstance(layers, (str, nn.Module)) else list(layers)
    selected: List[Tuple[str, nn.Module]] = []
    for item in items:
        pair = _named_layer(named, item)
        if any(m is pair[1] for _, m in selected):
            how = "by name" if isinstance(item, str) else "as a module"
            raise GraphRMAError(
                f"layers: {pair[0]!r} is given twice (again {how}); each layer's heads form one particle group, "
                f"moved once per step: name each layer once"
            )
        selected.append(pair)
    return selected


def _named_layer(named: List[Tuple[str, nn.Module]], item: Union[str, nn.Module]) -> Tuple[str, nn.Module]:
    """The ``(name, module)`` that ``item`` (a qualified name or a module of the model) names; it must have a head
    layout."""
    if isinstance(item, str):
        by_name = dict(named)
        if item not in by_name:
            valid = [n for n, m in named if n and head_layout(m) is not None]
            shown = ", ".join(valid[:8]) + (", ..." if len(valid) > 8 else "") if valid else "none"
            raise GraphRMAError(f"layers: no module named {item!r} in the model (its attention layers: {shown})")
        pair = (item, by_name[item])
    elif isinstance(item, nn.Module):
        found = [n for n, m in named if m is item]
        if not found:
            raise GraphRMAError(f"layers: module {type(item).__name__} is not part of the model")
        pair = (found[0], item)
    else:
        raise GraphRMAError(f"layers: expected module names or modules, got {type(item).__name__}")
    if head_layout(pair[1]) is None:
        raise GraphRMAError(
            f"layers: {pair[0] or type(pair[1]).__name__!r} ({type(pair[1]).__name__}) has no head layout; "
            f"register one with graph_rma.register_head_layout"
        )
    return pair
