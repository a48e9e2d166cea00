r"""Swap stock attention modules inside any model for this package's drop-in versions, weights kept.

``graph_rma.convert(model)`` walks ``model`` and replaces every module whose exact class has a registered
converter (PyG ``GATConv`` -> :class:`~graph_rma.nn.RepulsiveGATConv`, ``GATv2Conv`` ->
:class:`~graph_rma.nn.RepulsiveGATv2Conv`, ``torch.nn.MultiheadAttention`` ->
:class:`~graph_rma.nn.RepulsiveMultiheadAttention`, ...). Outputs are unchanged until an extra option is switched
on, and nothing else about the model changes:

* The new module takes over the old one's ``Parameter`` and buffer objects (and its submodules of the same name
  and class), so ``requires_grad``, device and dtype are kept, and an optimizer or a sampler built before
  ``convert`` keeps training the converted layers. A parameter that cannot be carried over (a converter whose new
  module names or shapes differ) is reported with a warning.
* Forward, pre-forward, backward, state-dict and PyG's message-passing hooks move to the new module (the handles
  returned when they were registered still remove them); each submodule keeps its train/eval mode.
* A module reachable under several names (shared) is converted once and stays one module.
* A user's subclass of a stock class (``class MyGAT(GATConv)``) is converted when it overrides none of the stock
  class's methods (it may add its own): the new module's class derives from both the drop-in and the user's
  class, so ``isinstance(m, MyGAT)`` and the added methods survive. A subclass that overrides a stock method
  (``forward``, ``__init__``, ``message``, ...) is left as it is, with a warning naming the module and the method:
  the drop-in's code would silently replace the user's.

A model without any attention layer (nothing to convert and no heads a sampler could move: a plain MLP, a GCN) is
an error, not a silent no-op: ``convert(model, strict=False)`` returns it unchanged, for generic code that converts
whatever model it is handed.

The swap table lives here and is filled when this module is imported (no import side effect elsewhere, no cycle);
:func:`register_conversion` adds a user's own pair.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Type

import torch
from torch import nn
from torch_geometric.nn.conv import GATConv, GATv2Conv

from .._errors import GraphRMAError
from ..particles import head_layout, load_plugins
from .gat_conv import RepulsiveGATConv, RepulsiveGATv2Conv
from .multihead_attention import RepulsiveMultiheadAttention

__all__ = ["convert", "register_conversion"]

Converter = Callable[[nn.Module], nn.Module]
_CONVERTERS: Dict[Type[nn.Module], Converter] = {}


def register_conversion(stock_cls: Type[nn.Module], converter: Converter) -> None:
    """Register ``converter(stock_module) -> new_module`` for modules whose exact class is ``stock_cls``.

    The converter builds the new module with the same constructor arguments; :func:`convert` then copies the
    ``state_dict``, device, dtype and training mode.
    """
    _CONVERTERS[stock_cls] = converter


register_conversion(GATConv, RepulsiveGATConv.from_stock)
register_conversion(GATv2Conv, RepulsiveGATv2Conv.from_stock)
register_conversion(nn.MultiheadAttention, RepulsiveMultiheadAttention.from_stock)


def _owner(module: nn.Module, qualified: str):
    *path, leaf = qualified.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


def _same_shape(a, b) -> bool:
    lazy_a = isinstance(a, nn.parameter.UninitializedTensorMixin)
    lazy_b = isinstance(b, nn.parameter.UninitializedTensorMixin)
    if lazy_a or lazy_b:
        return lazy_a and lazy_b
    return a.shape == b.shape


def _take_over(new: nn.Module, old: nn.Module) -> None:
    """Move ``old``'s submodules (same name and class), parameters, buffers, hooks and modes into ``new``."""
    modes = {name: m.training for name, m in old.named_modules()}
    for name, child in list(new.named_children()):
        mine = old._modules.get(name)
        if mine is not None and type(mine) is type(child):
            new._modules[name] = mine
    lost: List[str] = []
    old_params = dict(old.named_parameters(remove_duplicate=False))
    for name, param in list(new.named_parameters(remove_duplicate=False)):
        mine = old_params.pop(name, None)
        if mine is None or not _same_shape(mine, param):
            lost.append(name)
            continue
        owner, leaf = _owner(new, name)
        owner._parameters[leaf] = mine
    old_buffers = dict(old.named_buffers(remove_duplicate=False))
    for name, buf in list(new.named_buffers(remove_duplicate=False)):
        mine = old_buffers.pop(name, None)
        if mine is not None and _same_shape(mine, buf):
            owner, leaf = _owner(new, name)
            owner._buffers[leaf] = mine
    if lost or old_params:
        warnings.warn(
            f"convert: {type(old).__name__} -> {type(new).__name__} could not carry over parameter(s) "
            f"{sorted(set(lost) | set(old_params))}; an optimizer or sampler built before convert does not see them "
            f"(build it after convert)"
        )
    if lost:  # new parameters that did not take over an old one: copy values where the state_dict allows it
        new.load_state_dict({k: v for k, v in old.state_dict().items() if k in lost}, strict=False)
    for attr, value in vars(old).items():
        if "hook" not in attr:
            continue
        if isinstance(value, dict):
            own = getattr(new, attr, None)
            if isinstance(own, dict):
                for key, hook in own.items():  # hooks the new module registered itself come after the user's
                    value.setdefault(key, hook)
            setattr(new, attr, value)  # the very dict: the user's handles still remove their hooks
        elif attr == "_is_full_backward_hook":
            setattr(new, attr, value)
    for name, m in new.named_modules():
        m.training = modes.get(name, old.training)


_MIXED: Dict[tuple, type] = {}


def _stock_base(cls: type) -> Optional[type]:
    """The registered stock class ``cls`` derives from (``None`` for this package's own drop-ins)."""
    if hasattr(cls, "from_stock"):  # already a drop-in
        return None
    return next((b for b in cls.__mro__[1:] if b in _CONVERTERS), None)


def _overridden(cls: type, base: type) -> List[str]:
    names = set()
    for klass in cls.__mro__[: cls.__mro__.index(base)]:
        # only methods written in the class body (PyG attaches generated propagate/collect/... functions to each
        # class at run time: not the user's code)
        names.update(
            k
            for k, v in vars(klass).items()
            if callable(v)
            and hasattr(base, k)
            and (k == "__init__" or not k.startswith("_"))
            and k != "extra_repr"
            and getattr(v, "__qualname__", "").startswith(klass.__qualname__ + ".")
        )
    return sorted(names)


def _convert_one(module: nn.Module, memo: Dict[int, nn.Module], name: str = "", **options) -> Optional[nn.Module]:
    if id(module) in memo:
        return memo[id(module)]
    cls = type(module)
    fn = _CONVERTERS.get(cls)
    user_cls = None
    if fn is None:
        base = _stock_base(cls)
        if base is None:
            return None
        changed = _overridden(cls, base)
        if changed:
            warnings.warn(
                f"convert: {name or 'the model'} ({cls.__name__}) left unconverted: it overrides "
                f"{base.__name__}.{changed[0]}"
                + (f" (and {', '.join(changed[1:])})" if changed[1:] else "")
                + ", which the drop-in layer would replace; convert a subclass of the drop-in instead",
                stacklevel=3,
            )
            return None
        fn, user_cls = _CONVERTERS[base], cls
    # Building the new layer initialises throw-away weights (they are replaced by the old module's own Parameter
    # objects below): keep the global RNG where it was, so that a converted model trains on the same random stream
    # (dropout masks, later initialisations) as the stock one.
    with torch.random.fork_rng(devices=[]):
        new = fn(module, **options)
    if user_cls is not None:  # keep the user's class (and its added methods) above the drop-in
        key = (type(new), user_cls)
        if key not in _MIXED:
            _MIXED[key] = type(
                user_cls.__name__, key, {"__module__": user_cls.__module__, "__qualname__": user_cls.__qualname__}
            )
        new.__class__ = _MIXED[key]
    ref = next(iter(module.parameters()), None)
    if ref is not None and not isinstance(ref, nn.parameter.UninitializedTensorMixin):
        new.to(device=ref.device, dtype=ref.dtype)
    _take_over(new, module)
    memo[id(module)] = new
    return new


def has_attention(model: nn.Module) -> bool:
    """Whether ``model`` holds an attention layer: a module with a registered head layout (stock PyG and torch
    attention, this package's layers, HuggingFace attention through :mod:`graph_rma.hf`) or a registered
    convertible class."""
    load_plugins(model)
    return any(head_layout(m) is not None or isinstance(m, tuple(_CONVERTERS)) for m in model.modules())


def convert(model: nn.Module, inplace: bool = True, *, strict: bool = True, **options: Any) -> nn.Module:
    """Replace every registered stock attention module in ``model`` (recursively) by its drop-in version.

    Args:
        model: any ``nn.Module`` (a PyG ``GAT``, an ``nn.TransformerEncoder``, a single ``GATConv``, ...).
        inplace: modify ``model`` in place (default); otherwise work on a deep copy.
        strict: refuse a model that holds no attention layer at all (:func:`has_attention`), where converting
            would silently change nothing and a sampler would find no heads; ``strict=False`` returns such a model
            unchanged (generic code that converts any model it is given).
        **options: extra constructor options for the new layers (e.g. ``drop_attention=DropAttention(0.1)``).

    Returns:
        The converted model (the new layer itself when ``model`` is a single convertible module). The new layers
        hold the very ``Parameter`` objects of the old ones (of the copy with ``inplace=False``).

    Raises:
        GraphRMAError: ``model`` is not a module, or (``strict``) holds no attention layer.
    """
    if not isinstance(model, nn.Module):
        raise GraphRMAError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if strict and not has_attention(model):
        stock = ", ".join(sorted(c.__name__ for c in _CONVERTERS))
        raise GraphRMAError(
            f"model: {type(model).__name__} holds no attention layer ({stock} or another module with "
            f"heads): converting it changes nothing and a sampler finds no heads to repel; pass "
            f"strict=False to convert any model, this one unchanged"
        )
    if not inplace:
        import copy

        model = copy.deepcopy(model)
    memo: Dict[int, nn.Module] = {}
    top = _convert_one(model, memo, **options)
    if top is not None:
        return top
    for parent in list(model.modules()):
        for name, child in list(parent._modules.items()):  # not named_children(): it hides a shared module's 2nd name
            if child is None:
                continue
            qualified = next((n for n, m in model.named_modules() if m is parent), "")
            new = _convert_one(child, memo, name=f"{qualified}.{name}".lstrip("."), **options)
            if new is not None:
                setattr(parent, name, new)
    return model
