"""graph_rma: repulsive multi-head attention (heads as SVGD/SPOS particles) and DropAttention for PyG and torch."""
from .nn.conversion import convert, register_conversion
from .dropattention import DropAttention, drop_attention, drop_attention_dense
from .variants import Variant, VariantSetup, apply_variant, make_drop_attention, make_sampler, parse_variant, regularization_loss
from .particles import (
    SGLD,
    SPOS,
    SVGD,
    HeadParam,
    ParticleGroup,
    find_particle_groups,
    median_bandwidth,
    rbf_kernel,
    register_head_layout,
    spos_direction,
    svgd_direction,
)

__version__ = "0.1.0"

__all__ = [
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
