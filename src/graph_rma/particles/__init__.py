r"""Attention heads as particles: the RBF kernel, SVGD/SPOS directions, and samplers that apply them.

Each attention head's parameters form one particle; the :math:`M` heads of a layer are :math:`M` particles
:math:`\theta \in \mathbb{R}^{M \times D}`. With the RBF kernel

.. math::
    k(\theta_i, \theta_j) = \exp\left(-\|\theta_i - \theta_j\|^2 / h\right), \qquad
    h = \mathrm{med}^2 / \log M,

(:math:`\mathrm{med}` the median of the :math:`M(M-1)/2` pairwise distances), the SVGD direction of the
repulsive-attention paper (An et al., 2020, Eq. 4) with repulsive weight :math:`\alpha` is

.. math::
    \phi(\theta_i) = \frac{1}{M} \sum_{j=1}^{M} \left[ -k(\theta_j, \theta_i) \nabla_{\theta_j} U(\theta_j)
        + \alpha \nabla_{\theta_j} k(\theta_j, \theta_i) \right],

where :math:`U` is the training loss (so :math:`-\nabla U` is the gradient of the log-density), and the SPOS
direction (Eq. 5) adds a Langevin part with inverse temperature :math:`\beta` and step :math:`\epsilon`:

.. math::
    \phi^{\mathrm{SPOS}}(\theta_i) = \phi(\theta_i) - \nabla_{\theta_i} U(\theta_i) / \beta
        + \sqrt{2 / (\beta \epsilon)}\, \xi_i, \qquad \xi_i \sim \mathcal{N}(0, I).

The samplers (:class:`SVGD`, :class:`SPOS`, :class:`SGLD`) replace each head's gradient by
:math:`-\epsilon\,\phi` after ``loss.backward()``, so that any torch optimizer applies the particle update
(plain SGD with learning rate 1 gives exactly :math:`\theta \leftarrow \theta + \epsilon \phi`). Parameters
that are not particles keep their gradients.

Which tensor slices form a head is described by a *head layout* (:func:`register_head_layout`): layouts ship
for PyG ``GATConv``, ``GATv2Conv``, ``TransformerConv`` and ``torch.nn.MultiheadAttention``; this package's
layers subclass or register their own; :mod:`graph_rma.hf` finds the heads of HuggingFace ``transformers`` models
(loaded by itself when a model holds one). A particle is always exactly one head's slices. (The authors' public
code views each projection weight as ``W.t().reshape(H, -1)``, which mixes heads, with its own kernel per weight,
and a different bandwidth and repulsion scale; that update is available by name only, as
:mod:`graph_rma.particles.authors` / the spec option ``update=authors``. Liu's bandwidth ``med^2 / log(M+1)`` with
the median over all ``M^2`` entries is ``bandwidth="liu"``; the paper's text is the default.)

**Numerical safety (a deviation from the paper's equation, samplers only).** With the median bandwidth the
repulsion grows as :math:`1/\mathrm{spread}`: heads equal up to 1e-7, or heads scaled down to 1e-20, get a
repulsion of order 1e7 to 1e20, and one explicit step then throws them far away (the steps measured with and
without the guard below are the table of docs/design.md, "Bounded repulsion"). The step
:math:`\theta \leftarrow \theta + \epsilon \phi` is an explicit Euler step of the SVGD flow, whose repulsive part
has rate :math:`\sim \alpha/h`, so such steps are far beyond its stability limit. :class:`SVGD` and :class:`SPOS`
therefore limit each particle's repulsive displacement per step to ``max_repulsive_step`` (:math:`c`, default 1)
kernel widths:

.. math::
    \frac{\epsilon\,|\alpha|}{M} \|\mathrm{rep}_i\| \le c \sqrt{h}
    \quad\text{(else } \mathrm{rep}_i \text{ is scaled down to equality)}.

Since :math:`\|\mathrm{rep}_i\|/M \lesssim 0.86/\sqrt{h}`, the limit never acts while
:math:`\epsilon|\alpha| \le 1.16\,c\,h`: well-separated heads (:math:`h` of order 1 to 10 for initialised
layers; the Cora and text presets have :math:`\epsilon\alpha \le 1`) follow Eq. (4) exactly; nearly identical
or tiny heads separate geometrically (by at most a factor :math:`1 + 2c/\sqrt{\log M}` per step at learning rate
1) instead of exploding. ``sampler.limited_steps`` counts the steps at which it acted; ``max_repulsive_step=None``
restores the unguarded equation. The functions :func:`svgd_direction`, :func:`spos_direction` and
:func:`rbf_kernel` compute the paper's equations exactly (they do not know the step size). Exactly identical heads
cannot separate under SVGD (zero kernel gradient, equal updates): :class:`SVGD` warns once and suggests
:class:`SPOS` or jitter at initialisation.
"""

from .authors import AuthorsSPOS, AuthorsSVGD
from .kernel import median_bandwidth, rbf_kernel, sgld_direction, spos_direction, svgd_direction
from .layouts import (
    FoundLayout,
    HeadParam,
    ParticleGroup,
    ProjectionHeads,
    find_particle_groups,
    head_layout,
    load_plugins,
    projection_heads,
    register_head_layout,
    register_layout_finder,
)
from .samplers import DEFAULT_ALPHA, SGLD, SPOS, SVGD, ParticleSampler

__all__ = [
    "median_bandwidth",
    "rbf_kernel",
    "svgd_direction",
    "spos_direction",
    "sgld_direction",
    "HeadParam",
    "ParticleGroup",
    "register_head_layout",
    "head_layout",
    "register_layout_finder",
    "FoundLayout",
    "ProjectionHeads",
    "projection_heads",
    "load_plugins",
    "find_particle_groups",
    "ParticleSampler",
    "DEFAULT_ALPHA",
    "SVGD",
    "SPOS",
    "SGLD",
    "AuthorsSVGD",
    "AuthorsSPOS",
]
