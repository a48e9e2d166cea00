"""graph_rma: repulsive multi-head attention (heads as SVGD/SPOS particles) and DropAttention for PyG and torch.

The names below are imported on first use (PEP 562), so ``import graph_rma`` and the command line's ``--help``
do not load torch; ``from graph_rma import SVGD`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import Any, List

__version__ = "0.2.0"

# public name -> the module (relative to this package) that defines it
_EXPORTS = {
    "GraphRMAError": "._errors",
    "convert": ".nn.conversion",
    "register_conversion": ".nn.conversion",
    "DropAttention": ".dropattention",
    "drop_attention": ".dropattention",
    "drop_attention_dense": ".dropattention",
    "Variant": ".variants",
    "VariantSetup": ".variants",
    "apply_variant": ".variants",
    "make_drop_attention": ".variants",
    "make_sampler": ".variants",
    "parse_variant": ".variants",
    "regularization_loss": ".variants",
    **{
        name: ".particles"
        for name in (
            "SGLD",
            "SPOS",
            "SVGD",
            "HeadParam",
            "ParticleGroup",
            "find_particle_groups",
            "median_bandwidth",
            "rbf_kernel",
            "register_head_layout",
            "spos_direction",
            "svgd_direction",
        )
    },
}

__all__ = [
    "GraphRMAError",
    "DropAttention",
    "drop_attention",
    "drop_attention_dense",
    "SGLD",
    "SPOS",
    "SVGD",
    "HeadParam",
    "Variant",
    "VariantSetup",
    "apply_variant",
    "make_drop_attention",
    "make_sampler",
    "parse_variant",
    "regularization_loss",
    "ParticleGroup",
    "convert",
    "find_particle_groups",
    "median_bandwidth",
    "rbf_kernel",
    "register_conversion",
    "register_head_layout",
    "spos_direction",
    "svgd_direction",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
