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
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Type, Union

import torch
from torch import Tensor, nn

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

Bandwidth = Union[None, float, str, Tensor]


# --------------------------------------------------------------------------------------------------------------
# Functional core
# --------------------------------------------------------------------------------------------------------------
def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    # Half precision (and float32) inputs are computed in float32, float64 in float64.
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_theta(theta: Tensor, name: str = "theta") -> None:
    if not isinstance(theta, Tensor):
        raise ValueError(f"{name}: expected a Tensor of shape [M, D], got {type(theta).__name__}")
    if theta.dim() != 2 or theta.size(0) < 1:
        raise ValueError(f"{name}: expected shape [M, D] (M particles of dimension D), got {list(theta.shape)}")
    if not theta.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got {theta.dtype}")


def _all_finite(x: Tensor) -> bool:
    # A sum is the cheapest vectorised pass and propagates NaN/Inf; only if it overflows is the exact check run.
    return x.numel() == 0 or bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all())


def _max_abs(x: Tensor) -> Tensor:
    lo, hi = torch.aminmax(x)  # NaN propagates
    return torch.maximum(hi, -lo)


def _check_grad(theta: Tensor, grad: Tensor) -> None:
    if not isinstance(grad, Tensor) or grad.shape != theta.shape:
        shape = list(grad.shape) if isinstance(grad, Tensor) else type(grad).__name__
        raise ValueError(f"grad: expected the shape of theta {list(theta.shape)}, got {shape}")
    if not _all_finite(grad):
        raise ValueError("grad: contains NaN or Inf (non-finite loss gradient)")


def _normalize(theta: Tensor) -> Tuple[Tensor, Tensor]:
    """Centre and scale ``theta`` (in the working dtype) so that distances neither overflow nor underflow.

    Returns ``(theta_n, s)`` with ``theta = s * theta_n + mean``; ``s = 1`` when all particles coincide.
    Distances scale by ``s``, the bandwidth by ``s**2``, and the kernel is unchanged. Raises if ``theta`` is
    not finite.
    """
    x = theta.to(_work_dtype(theta.dtype))
    x = x - x.mean(dim=0, keepdim=True)
    s = _max_abs(x)
    if not bool(torch.isfinite(s)):
        raise ValueError("theta: contains NaN or Inf")
    s = torch.where(s > 0, s, torch.ones_like(s))
    return x / s, s


def _pairwise_distances(x: Tensor) -> Tensor:
    # x is centred and scaled to max |x| = 1 (see _normalize), so the Gram form loses no useful precision: the
    # kernel only needs d^2 / h, and the repulsion uses the differences x_i - x_j directly.
    sq = (x * x).sum(dim=1)
    d2 = (sq.unsqueeze(1) + sq.unsqueeze(0) - 2.0 * (x @ x.t())).clamp_min_(0.0)
    d2.fill_diagonal_(0.0)
    return d2.sqrt()


def _median(values: Tensor) -> Tensor:
    # The usual median: the mean of the two middle values for an even count (as numpy.median).
    v, _ = values.sort()
    n = v.numel()
    return v[(n - 1) // 2] if n % 2 == 1 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def _normalized_bandwidth(dist: Tensor, bandwidth: Bandwidth, s: Tensor) -> Tensor:
    """Bandwidth in the normalised coordinates (``h / s**2``)."""
    M = dist.size(0)
    if bandwidth is None or (isinstance(bandwidth, str) and bandwidth == "median"):
        if M < 2:
            return torch.ones((), dtype=dist.dtype, device=dist.device)
        iu = torch.triu_indices(M, M, offset=1, device=dist.device)
        pairs = dist[iu[0], iu[1]]
        med = _median(pairs)
        if med <= 0:  # more than half of the pairs coincide: fall back to the largest distance
            med = pairs.max()
        if med <= 0:  # all particles coincide: K = 1 and no repulsion for any positive h
            return torch.ones((), dtype=dist.dtype, device=dist.device)
        return med**2 / math.log(M)
    if isinstance(bandwidth, str):
        if bandwidth != "liu":
            raise ValueError(f"bandwidth: expected None, 'median', 'liu' or a positive number, got {bandwidth!r}")
        # Liu & Wang's SVGD code: median over all M^2 entries (diagonal zeros included), log(M + 1).
        med = _median(dist.flatten())
        if med <= 0:
            med = dist.max()
        if med <= 0:
            return torch.ones((), dtype=dist.dtype, device=dist.device)
        return med**2 / math.log(M + 1)
    h = torch.as_tensor(bandwidth, dtype=dist.dtype, device=dist.device)
    if h.numel() != 1 or not bool(torch.isfinite(h)) or not bool(h > 0):
        raise ValueError(f"h: expected a positive finite bandwidth, got {bandwidth!r}")
    return h / s / s


def median_bandwidth(theta: Tensor) -> Tensor:
    r"""The paper's bandwidth :math:`h = \mathrm{med}^2 / \log M`.

    ``med`` is the median (numpy's: the mean of the two middle values for an even count) of the Euclidean
    distances over the :math:`M(M-1)/2` distinct pairs. Defined cases: when more than half of the pairs coincide
    (``med = 0``) the largest pairwise distance is used instead; when all particles coincide ``h = 1`` (the kernel
    is then 1 and the repulsion 0 for any positive ``h``). Computed in float32 (float64 for float64 input).

    Args:
        theta: particles, shape ``[M, D]`` with ``M >= 2``.
    """
    _check_theta(theta)
    if theta.size(0) < 2:
        raise ValueError(f"theta: median_bandwidth needs at least M = 2 particles, got M = {theta.size(0)}")
    x, s = _normalize(theta)
    return _normalized_bandwidth(_pairwise_distances(x), None, s) * s * s


def _kernel_normalized(x: Tensor, s: Tensor, bandwidth: Bandwidth) -> Tuple[Tensor, Tensor]:
    """Kernel and repulsion from normalised particles; repulsion returned in the original scale."""
    dist = _pairwise_distances(x)
    h_n = _normalized_bandwidth(dist, bandwidth, s)
    K = torch.exp(-(dist**2) / h_n)
    # repulsion_i = sum_j (2/h) (theta_i - theta_j) K_ij, with theta = s * x: (2 / (h_n s)) (x_i rowsum(K) - K x)
    rep = (2.0 / h_n) * (x * K.sum(dim=1, keepdim=True) - K @ x) / s
    return K, rep


def _finite(x: Tensor, dtype: torch.dtype) -> Tensor:
    """``x`` cast to ``dtype``, with values beyond the dtype's range clamped to its largest finite value."""
    big = torch.finfo(dtype).max
    if dtype != x.dtype and torch.finfo(dtype).max < torch.finfo(x.dtype).max:
        x = x.clamp(-big, big)
    elif not _all_finite(x):  # overflow of the repulsion for absurdly close particles
        x = torch.nan_to_num(x, nan=0.0, posinf=big, neginf=-big)
    return x.to(dtype)


def rbf_kernel(theta: Tensor, h: Bandwidth = None) -> Tuple[Tensor, Tensor]:
    r"""RBF kernel matrix and the summed kernel gradient (the repulsion) of ``M`` particles.

    .. math::
        K_{ij} = \exp(-\|\theta_i - \theta_j\|^2 / h), \qquad
        \mathrm{rep}_i = \sum_j \nabla_{\theta_j} k(\theta_j, \theta_i)
                       = \sum_j \frac{2}{h} (\theta_i - \theta_j) K_{ij}.

    Args:
        theta: particles ``[M, D]``.
        h: bandwidth; ``None`` or ``"median"`` for :func:`median_bandwidth`, ``"liu"`` for Liu's
            ``med^2 / log(M + 1)`` over all entries, or a positive number.

    Returns:
        ``(K, repulsion)`` of shapes ``[M, M]`` and ``[M, D]``, in float32 (float64 for float64 input; half
        precision inputs are computed in float32). Never NaN: scales are normalised before squaring.
    """
    _check_theta(theta)
    x, s = _normalize(theta)
    K, rep = _kernel_normalized(x, s, h)
    return K, _finite(rep, x.dtype)


def svgd_direction(
    theta: Tensor,
    grad: Tensor,
    alpha: float = 1.0,
    h: Bandwidth = None,
    kernel_grad: bool = True,
) -> Tensor:
    r"""SVGD direction, Eq. (4) of the repulsive-attention paper with repulsive weight ``alpha``.

    .. math::
        \phi_i = \frac{1}{M} \sum_j \left[-K_{ji}\, g_j + \alpha\, \nabla_{\theta_j} k(\theta_j, \theta_i)\right]

    with :math:`g_j` = ``grad[j]`` the loss gradient of particle ``j``. With ``M = 1`` there is no repulsion and
    ``phi = -grad`` exactly.

    Args:
        theta: particles ``[M, D]``.
        grad: loss gradients ``[M, D]`` (the gradient of the potential :math:`U`).
        alpha: repulsive weight (``0`` gives kernel-smoothed gradient descent).
        h: bandwidth, see :func:`rbf_kernel`.
        kernel_grad: ``True`` (Eq. 4) smooths the gradients with the kernel, mixing heads' gradients;
            ``False`` lets each particle follow its own gradient, ``phi_i = -g_i + (alpha / M) rep_i``, the
            repulsion then being the only coupling (an ablation, not the paper's method).

    Returns:
        ``phi`` with the shape and dtype of ``theta``.
    """
    _check_theta(theta)
    _check_grad(theta, grad)
    if not math.isfinite(float(alpha)):
        raise ValueError(f"alpha: expected a finite repulsive weight, got {alpha!r}")
    return _svgd(theta, grad, alpha, h, kernel_grad)


def _svgd(theta: Tensor, grad: Tensor, alpha: float, h: Bandwidth, kernel_grad: bool) -> Tensor:
    M = theta.size(0)
    if M == 1:
        return (-grad).to(theta.dtype)
    x, s = _normalize(theta)
    K, rep = _kernel_normalized(x, s, h)
    g = grad.to(x.dtype)
    drive = K.t() @ g if kernel_grad else M * g
    phi = (-drive + alpha * rep) / M
    return _finite(phi, theta.dtype)


def _noise(shape, device, dtype, generator: Optional[torch.Generator]) -> Tensor:
    gen_device = generator.device if generator is not None else device
    xi = torch.randn(shape, generator=generator, device=gen_device, dtype=dtype)
    return xi.to(device)


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: expected a positive finite number, got {value!r}")


def spos_direction(
    theta: Tensor,
    grad: Tensor,
    alpha: float = 1.0,
    beta: float = 1.0,
    eps: float = 1.0,
    h: Bandwidth = None,
    generator: Optional[torch.Generator] = None,
    kernel_grad: bool = True,
) -> Tensor:
    r"""SPOS direction, Eq. (5): :math:`\phi^{SVGD}_i - g_i / \beta + \sqrt{2 / (\beta \epsilon)}\, \xi_i`.

    ``xi ~ N(0, I)`` is drawn (in float32, or float64 for float64 input) from ``generator`` on the generator's
    device, so a fixed seed reproduces it on CPU and GPU alike and on every process of a distributed run.

    Args:
        theta, grad, alpha, h, kernel_grad: as in :func:`svgd_direction`.
        beta: inverse temperature of the Langevin part (``> 0``).
        eps: the step the update is taken with (``> 0``); it scales the noise.
        generator: source of the Gaussian noise (``None``: torch's global generator).
    """
    _check_positive("beta", beta)
    _check_positive("eps", eps)
    phi = svgd_direction(theta, grad, alpha=alpha, h=h, kernel_grad=kernel_grad)
    return _spos_noise(phi, theta, grad, beta, eps, generator)


def _spos_noise(phi: Tensor, theta: Tensor, grad: Tensor, beta: float, eps: float,
                generator: Optional[torch.Generator]) -> Tensor:
    work = _work_dtype(theta.dtype)
    xi = _noise(theta.shape, theta.device, work, generator)
    out = phi.to(work) - grad.to(work) / beta + math.sqrt(2.0 / (beta * eps)) * xi
    return _finite(out, theta.dtype)


def sgld_direction(
    grad: Tensor,
    beta: float = 1.0,
    eps: float = 1.0,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    r"""SGLD direction (the paper's Table 8 baseline): :math:`-g_i + \sqrt{2 / (\beta \epsilon)}\, \xi_i`.

    Each particle moves independently: the update :math:`\theta \leftarrow \theta + \epsilon \phi` is Langevin
    dynamics :math:`\theta - \epsilon g + \sqrt{2 \epsilon / \beta}\,\xi` at inverse temperature ``beta``.
    """
    _check_theta(grad, "grad")
    _check_positive("beta", beta)
    _check_positive("eps", eps)
    work = _work_dtype(grad.dtype)
    xi = _noise(grad.shape, grad.device, work, generator)
    return _finite(-grad.to(work) + math.sqrt(2.0 / (beta * eps)) * xi, grad.dtype)


# --------------------------------------------------------------------------------------------------------------
# Head layouts: which slices of which parameters form head i
# --------------------------------------------------------------------------------------------------------------
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
            raise ValueError(
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


Layout = Callable[[nn.Module], List[HeadParam]]
_LAYOUTS: Dict[Type[nn.Module], Layout] = {}


def register_head_layout(cls: Type[nn.Module], layout: Layout) -> None:
    """Register ``layout(module) -> [HeadParam, ...]`` for ``cls`` and its subclasses (nearest class wins)."""
    _LAYOUTS[cls] = layout


def head_layout(module: nn.Module) -> Optional[Layout]:
    """The layout registered for ``type(module)`` or its nearest base class, or ``None``."""
    for cls in type(module).__mro__:
        if cls in _LAYOUTS:
            return _LAYOUTS[cls]
    return None


def _hp(module: nn.Module, attr: str, role: str, heads: int, axis: int = 0, start: int = 0,
        length: Optional[int] = None) -> List[HeadParam]:
    obj: object = module
    for part in attr.split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    if obj is None or not isinstance(obj, nn.Parameter):
        return []
    if isinstance(obj, nn.parameter.UninitializedParameter):
        raise ValueError(
            f"{type(module).__name__}.{attr} is not initialised yet (lazy in_channels=-1): run one forward pass "
            f"before building the sampler"
        )
    return [HeadParam(attr, role, obj, heads, axis, start, length)]


def _gat_layout(m: nn.Module) -> List[HeadParam]:
    H = m.heads
    out = _hp(m, "lin.weight", "lin", H) + _hp(m, "lin_src.weight", "lin_src", H) + _hp(m, "lin_dst.weight", "lin_dst", H)
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

    Args:
        model: any module; attention layers are found by their registered head layouts.
        layers: which layers: ``None`` (all), qualified module names (``"conv1"``, ``"layers.0.self_attn"``),
            module objects, or a predicate ``(name, module) -> bool``.
        roles: which parameter roles form the particles (e.g. ``{"query"}`` or ``{"att_src", "att_dst"}``);
            ``None`` for all of a layer's roles. See each layout for its role names.
        min_heads: layers with fewer heads are skipped with a warning (one head has nothing to repel).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    named = list(model.named_modules())
    if layers is None:
        selected = [(n, m) for n, m in named if head_layout(m) is not None]
    elif callable(layers) and not isinstance(layers, nn.Module):
        selected = [(n, m) for n, m in named if head_layout(m) is not None and layers(n, m)]
    else:
        items = [layers] if isinstance(layers, (str, nn.Module)) else list(layers)
        by_name = dict(named)
        selected = []
        for item in items:
            if isinstance(item, str):
                if item not in by_name:
                    raise ValueError(f"layers: no module named {item!r} in the model")
                pair = (item, by_name[item])
            elif isinstance(item, nn.Module):
                found = [n for n, m in named if m is item]
                if not found:
                    raise ValueError(f"layers: module {type(item).__name__} is not part of the model")
                pair = (found[0], item)
            else:
                raise ValueError(f"layers: expected module names or modules, got {type(item).__name__}")
            if head_layout(pair[1]) is None:
                raise ValueError(
                    f"layers: {pair[0] or type(pair[1]).__name__!r} ({type(pair[1]).__name__}) has no head layout; "
                    f"register one with graph_rma.register_head_layout"
                )
            selected.append(pair)

    wanted = None if roles is None else ({roles} if isinstance(roles, str) else set(roles))
    groups: List[ParticleGroup] = []
    known_roles: set = set()
    for name, module in selected:
        params = head_layout(module)(module)
        known_roles.update(p.role for p in params)
        if wanted is not None:
            params = [p for p in params if p.role in wanted]
        if not params:
            continue
        H = params[0].num_heads
        if H < min_heads:
            warnings.warn(f"{name or type(module).__name__}: {H} head(s), fewer than {min_heads}; not a particle group")
            continue
        groups.append(ParticleGroup(name, module, H, params))
    if wanted is not None and not wanted <= known_roles:
        raise ValueError(f"roles: unknown role(s) {sorted(wanted - known_roles)}; the selected layers have {sorted(known_roles)}")
    return groups


# --------------------------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------------------------
class ParticleSampler:
    r"""Base class: replaces each particle group's gradient by :math:`-\epsilon\,\phi` (see :meth:`direction`).

    Call :meth:`step` after ``loss.backward()`` (and after gradients are all-reduced in a distributed run), or
    :meth:`attach` it to an optimizer so that it runs before every ``optimizer.step()``.

    Args:
        model: the model whose attention layers hold the heads.
        eps: step size :math:`\epsilon`; the gradient becomes ``-eps * phi``.
        layers, roles, min_heads: which heads become particles (:func:`find_particle_groups`).
        seed: seed of the sampler's own noise generator (SPOS/SGLD). The same seed on every process gives the
            same noise on every process, so replicas of a distributed run stay identical.
    """

    def __init__(
        self,
        model: nn.Module,
        eps: float = 1.0,
        layers: LayerSpec = None,
        roles: Optional[Iterable[str]] = None,
        min_heads: int = 2,
        seed: int = 0,
    ) -> None:
        _check_positive("eps", eps)
        self.eps = float(eps)
        self.seed = int(seed)
        self.groups = find_particle_groups(model, layers=layers, roles=roles, min_heads=min_heads)
        if not self.groups:
            warnings.warn(f"{type(self).__name__}: the model has no multi-head attention layer to sample; step() does nothing")
        self._generator: Optional[torch.Generator] = None
        self._generator_state: Optional[Tensor] = None

    @property
    def generator(self) -> torch.Generator:
        if self._generator is None:
            device = self.groups[0].params[0].param.device if self.groups else torch.device("cpu")
            self._generator = torch.Generator(device=device)
            self._generator.manual_seed(self.seed)
            if self._generator_state is not None:
                self._generator.set_state(self._generator_state)
        return self._generator

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    @torch.no_grad()
    def step(self) -> None:
        """Replace every particle group's gradient by ``-eps * phi``."""
        for group in self.groups:
            theta, grad = group.theta(), group.grad()
            if not _all_finite(grad):
                bad = [p.name for p in group.params if p.param.grad is not None and not bool(torch.isfinite(p.param.grad).all())]
                raise ValueError(f"grad: non-finite gradient in {group.name or 'model'} ({', '.join(bad)})")
            phi = self.direction(theta, grad)
            group.set_grad(phi.mul(-self.eps))

    def attach(self, optimizer: torch.optim.Optimizer):
        """Run :meth:`step` before every ``optimizer.step()``; returns a handle whose ``remove()`` detaches it."""
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
        return optimizer.register_step_pre_hook(lambda opt, args, kwargs: self.step())

    def state_dict(self) -> Dict[str, Tensor]:
        """The noise generator's state, for exact resumption."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: Dict[str, Tensor]) -> None:
        self._generator_state = state["generator"]
        if self._generator is not None:
            self._generator.set_state(self._generator_state)

    def _extra_repr(self) -> str:
        return f"eps={self.eps}"

    def __repr__(self) -> str:
        groups = ", ".join(f"{g.name or 'model'}[{g.num_heads}x{g.dim}]" for g in self.groups)
        return f"{type(self).__name__}({self._extra_repr()}, groups=[{groups}])"


class SVGD(ParticleSampler):
    r"""Stein variational gradient descent over attention heads (Eq. 4): gradient := :math:`-\epsilon\,\phi`.

    Args:
        model: the model; see :class:`ParticleSampler` for ``eps``, ``layers``, ``roles``, ``min_heads``, ``seed``.
        alpha: repulsive weight.
        bandwidth: ``"median"`` (the paper: ``med^2 / log M``), ``"liu"`` (``med^2 / log(M+1)``, median over all
            entries, as in Liu's and the authors' code) or a fixed positive number.
        kernel_grad: ``False`` gives each head its own gradient, coupled only by the repulsion (ablation).
    """

    def __init__(self, model: nn.Module, alpha: float = 1.0, eps: float = 1.0, bandwidth: Bandwidth = "median",
                 kernel_grad: bool = True, **kwargs) -> None:
        super().__init__(model, eps=eps, **kwargs)
        if not math.isfinite(float(alpha)):
            raise ValueError(f"alpha: expected a finite repulsive weight, got {alpha!r}")
        self.alpha, self.bandwidth, self.kernel_grad = float(alpha), bandwidth, bool(kernel_grad)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        return _svgd(theta, grad, self.alpha, self.bandwidth, self.kernel_grad)

    def _extra_repr(self) -> str:
        return f"alpha={self.alpha}, eps={self.eps}, bandwidth={self.bandwidth!r}"


class SPOS(SVGD):
    r"""Stochastic particle-optimisation sampling over attention heads (Eq. 5).

    Args:
        beta: inverse temperature of the Langevin part; the noise has standard deviation
            :math:`\sqrt{2 / (\beta \epsilon)}` in :math:`\phi` (so :math:`\sqrt{2 \epsilon / \beta}` in the step).
        others: as in :class:`SVGD`.
    """

    def __init__(self, model: nn.Module, alpha: float = 1.0, eps: float = 1.0, beta: float = 1.0, **kwargs) -> None:
        _check_positive("beta", beta)
        super().__init__(model, alpha=alpha, eps=eps, **kwargs)
        self.beta = float(beta)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        phi = _svgd(theta, grad, self.alpha, self.bandwidth, self.kernel_grad)
        return _spos_noise(phi, theta, grad, self.beta, self.eps, self.generator)

    def _extra_repr(self) -> str:
        return f"alpha={self.alpha}, eps={self.eps}, beta={self.beta}, bandwidth={self.bandwidth!r}"


class SGLD(ParticleSampler):
    r"""Stochastic gradient Langevin dynamics on each head independently (the paper's Table 8 baseline).

    Gradient := :math:`-\epsilon\,\phi` with :math:`\phi = -g + \sqrt{2 / (\beta \epsilon)}\,\xi`.
    """

    def __init__(self, model: nn.Module, eps: float = 1.0, beta: float = 1.0, **kwargs) -> None:
        _check_positive("beta", beta)
        super().__init__(model, eps=eps, **kwargs)
        self.beta = float(beta)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        return sgld_direction(grad, beta=self.beta, eps=self.eps, generator=self.generator)

    def _extra_repr(self) -> str:
        return f"eps={self.eps}, beta={self.beta}"
