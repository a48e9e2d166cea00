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
layers subclass or register their own. A particle is always exactly one head's slices. (The authors' public
code reshaped ``[hidden, H*d]`` into ``[hidden*d, H]``, mixing heads, and used Liu's bandwidth
``med^2 / log(M+1)`` with the median over all ``M^2`` entries; that bandwidth is available as
``bandwidth="liu"``, the paper's text is the default.)
"""
from .kernel import median_bandwidth, rbf_kernel, sgld_direction, spos_direction, svgd_direction
from .layouts import HeadParam, ParticleGroup, find_particle_groups, head_layout, register_head_layout
from .samplers import SGLD, SPOS, SVGD, ParticleSampler

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
    "find_particle_groups",
    "ParticleSampler",
    "SVGD",
    "SPOS",
    "SGLD",
]
