r"""The fused lean path: scores, edge softmax, dropout and aggregation in one Triton kernel per pass
(:mod:`~graph_rma.nn.lean._triton_kernels`), the lean strategy on CUDA (:mod:`~graph_rma.nn.lean.strategy`).

:func:`fused_attention` computes, for every destination :math:`i` and head :math:`h`,
:math:`\mathbf{y}_{i,h} = \sum_{e = (j \to i)} \mathrm{drop}(\alpha)_{e,h} \mathbf{v}_{j,h}` with
:math:`\alpha = \operatorname{softmax}(s)` over :math:`i`'s incoming edges and the score :math:`s` of GAT,
GATv2 or scaled dot products (:data:`GAT_SCORE`, :data:`GATV2_SCORE`, :data:`DOT_SCORE`), computed in the kernel
from node-level tensors. It is one autograd node that saves node-level tensors only (its inputs, its output and
one log-sum-exp per destination and head, plus a survivor flag per destination and head under DropAttention) and
the dropout seed: backward recomputes every weight, and draws every mask again, from them. Per edge it keeps
nothing but the CSR's indices.

Plain dropout and DropAttention (:class:`Dropout`) are drawn in the kernels with Philox (``tl.rand``) from a seed
taken from torch's default CPU generator at each call (so :func:`torch.manual_seed` repeats them) and the edge's
position: the same distribution as the ``[E, H]`` masks of the other paths, not the same bits.

Triton is imported on first use, not with this module. On CUDA tensors the kernels are compiled; on CPU tensors
they run under Triton's interpreter, which needs ``TRITON_INTERPRET=1`` before Triton is first imported (tests).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor

from ..._errors import GraphRMAError
from .csr import EdgeCSR

__all__ = [
    "GAT_SCORE",
    "DOT_SCORE",
    "GATV2_SCORE",
    "Dropout",
    "NO_DROPOUT",
    "plain_dropout",
    "drop_attention_dropout",
    "fused_attention",
    "fused_weights",
    "draw_seed",
]

#: Score kinds: GAT's additive score, scaled dot products, GATv2's.
GAT_SCORE, DOT_SCORE, GATV2_SCORE = 0, 1, 2
#: Dropout modes (:attr:`Dropout.mode`): none, plain attention dropout, DropAttention with either rescaling.
NO_DROP, PLAIN, NORMALIZED, INVERSE = 0, 1, 2, 3


class Dropout(NamedTuple):
    """What the kernels drop: ``mode`` (``NO_DROP``, ``PLAIN``, ``NORMALIZED``, ``INVERSE``), the rate ``p``,
    DropAttention's ``window`` and column mode."""

    mode: int
    p: float = 0.0
    window: int = 1
    column: bool = False


NO_DROPOUT = Dropout(NO_DROP)


def plain_dropout(p: float, training: bool) -> Dropout:
    """A layer's plain attention dropout (``F.dropout`` on the weights)."""
    return Dropout(PLAIN, float(p)) if training and p > 0 else NO_DROPOUT


def drop_attention_dropout(drop: Any, layer_rate: Optional[float]) -> Dropout:
    """A :class:`graph_rma.DropAttention` module's draw (its rate, or the layer's when it has none), as
    :meth:`~graph_rma.DropAttention.sparse_softmax` makes it."""
    p = drop.rate(layer_rate)
    if not drop.training or p == 0.0:
        return NO_DROPOUT
    mode = NORMALIZED if drop.rescale == "normalized" else INVERSE
    return Dropout(mode, float(p), int(drop.window), drop.mode == "column")


class _Spec(NamedTuple):
    kind: int
    drop: Dropout
    seed: int
    slope: float
    scale: float


def _kernels(device: torch.device):
    """``(kernels module, triton.language)``, imported on first use."""
    try:
        import triton
        import triton.language as tl
    except ImportError as error:  # pragma: no cover - triton is in the dev environment
        raise GraphRMAError(f"lean=True: the fused kernels need Triton (pip install triton): {error}") from None
    knobs = getattr(triton, "knobs", None)  # Triton >= 3.4; earlier ones read the variable itself
    interpreting = knobs.runtime.interpret if knobs is not None else os.environ.get("TRITON_INTERPRET") == "1"
    if device.type == "cpu" and not interpreting:
        raise GraphRMAError(
            "GRAPH_RMA_LEAN=fused on CPU tensors runs Triton's interpreter: set TRITON_INTERPRET=1 before Triton "
            "is first imported (or use GRAPH_RMA_LEAN=csr)"
        )
    if device.type not in ("cpu", "cuda"):
        raise GraphRMAError(f"GRAPH_RMA_LEAN=fused: the fused kernels run on CUDA (or CPU), got {device.type}")
    from . import _triton_kernels

    return _triton_kernels, tl


def _blocks(H: int, C: int):
    """``(BLOCK_E, BLOCK_H, BLOCK_C)``: channels padded to a power of two, heads per program such that a
    ``[BLOCK_H, BLOCK_C]`` row block has at most 1024 elements, edges per step such that an
    ``[BLOCK_E, BLOCK_H, BLOCK_C]`` tile has at most 4096."""
    block_c = 1 << max(0, (C - 1).bit_length())
    block_h = min(1 << max(0, (H - 1).bit_length()), max(1, 1024 // block_c))
    block_e = max(2, min(64, 4096 // (block_h * block_c)))
    return block_e, block_h, block_c


def draw_seed() -> int:
    """A dropout seed from torch's default CPU generator (no device synchronisation)."""
    return int(torch.randint(0, 2**31 - 1, (), dtype=torch.int64))


class _Run:
    """The arguments every kernel takes, from the spec and the tensors (``None``: a one-element placeholder)."""

    def __init__(self, spec: _Spec, csr: EdgeCSR, v: Tensor, tensors: dict) -> None:
        self.kernels, tl = _kernels(v.device)
        self.device = v.device
        self.acc_dtype = torch.float64 if v.dtype == torch.float64 else torch.float32
        self.H, self.C = v.size(1), v.size(2)
        self.E = csr.col.numel()
        block_e, block_h, block_c = _blocks(self.H, self.C)
        self.grid_h = -(-self.H // block_h)
        placeholder = v.new_zeros(1)
        t = {name: (placeholder if x is None else x.contiguous()) for name, x in tensors.items()}
        self.tensors = [t[name] for name in ("a", "b", "c", "q", "k", "v", "xr", "att", "ee")]
        self.placeholder = placeholder
        d = spec.drop
        window = d.window if d.mode in (NORMALIZED, INVERSE) else 1
        self.scalars = [
            self.H,
            self.C,
            self.E,
            csr.num_src,
            float(spec.scale),
            float(spec.slope),
            int(spec.seed),
            float(d.p) / window,
            1.0 / (1.0 - d.p) if d.p < 1.0 else 0.0,
            window,
        ]
        self.constants = dict(
            KIND=spec.kind,
            HAS_B=tensors.get("b") is not None,
            HAS_C=tensors.get("c") is not None or tensors.get("ee") is not None,
            DROP=d.mode,
            COLUMN=bool(d.column),
            ACC=tl.float64 if self.acc_dtype == torch.float64 else tl.float32,
            BLOCK_E=block_e,
            BLOCK_H=block_h,
            BLOCK_C=block_c,
        )

    def launch(self, kernel, rows: int, *args) -> None:
        if rows == 0:
            return
        if self.device.type == "cuda":  # Triton launches on the current device: make it the tensors'
            with torch.cuda.device(self.device):
                kernel[(rows, self.grid_h)](*args, *self.scalars, **self.constants)
        else:
            kernel[(rows, self.grid_h)](*args, *self.scalars, **self.constants)


def _gatv2_edge_term(attr: Optional[Tensor], w_edge: Optional[Tensor], H: int, C: int) -> Optional[Tensor]:
    """GATv2's edge term ``W_e e`` ``[E, H, C]`` (formed for the kernels' pass and dropped after it)."""
    return None if attr is None else (attr @ w_edge.t()).view(-1, H, C)


def _saved_run(ctx: Any, v: Tensor, a, b, c, q, k, xr, att, attr, w_edge) -> _Run:
    """The kernels' arguments for ``ctx``'s spec and CSR (GATv2's edge term formed again)."""
    ee = _gatv2_edge_term(attr, w_edge, v.size(1), v.size(2))
    return _Run(ctx.spec, ctx.csr, v, dict(a=a, b=b, c=c, q=q, k=k, v=v, xr=xr, att=att, ee=ee))


def _backward(ctx: Any, inputs, g: Tensor, lse: Tensor, alive: Optional[Tensor], dd: Tensor, gw: Optional[Tensor]):
    """The inputs' gradients (``ctx.needs_input_grad`` order) from the two backward kernels: ``g`` ``dL/dy``
    ``[N_dst, H, C]``, ``dd`` :math:`D_i` ``[N_dst, H]``, ``gw`` ``dL/dw`` ``[E, H]`` by edge id (or ``None``)."""
    v, a, b, c, q, k, xr, att, attr, w_edge = inputs
    spec, csr, need = ctx.spec, ctx.csr, ctx.needs_input_grad
    run = _saved_run(ctx, *inputs)
    acc, dev, nd, ns, E, H, C = run.acc_dtype, v.device, csr.num_dst, csr.num_src, run.E, run.H, run.C
    holder, kind, has_ee = run.placeholder, spec.kind, attr is not None
    state = (g, lse, holder if alive is None else alive, dd, holder if gw is None else gw)
    run.constants["HAS_GW"] = gw is not None
    index = (csr.crow, csr.col, csr.perm)

    def buffer(needed: bool, *shape: int) -> Tensor:
        return torch.zeros(*shape, dtype=acc, device=dev) if needed else holder

    g_b, g_q = buffer(kind == GAT_SCORE and b is not None, nd, H), buffer(kind == DOT_SCORE, nd, H, C)
    g_c = buffer(c is not None, E, H) if kind == GAT_SCORE else buffer(has_ee, E, H, C)
    g_xr, g_att = buffer(kind == GATV2_SCORE, nd, H, C), buffer(kind == GATV2_SCORE, nd, H, C)
    if kind != GAT_SCORE or b is not None or c is not None:
        run.launch(run.kernels.backward_rows, nd, *index, *run.tensors, *state, g_b, g_c, g_q, g_xr, g_att)
    g_v, g_a, g_k = buffer(True, ns, H, C), buffer(kind == GAT_SCORE, ns, H), buffer(kind == DOT_SCORE, ns, H, C)
    transpose = (csr.crow_t, csr.col_t, csr.perm_t)
    run.launch(run.kernels.backward_columns, ns, *index, *transpose, *run.tensors, *state, g_v, g_a, g_k)

    def cast(needed: bool, gradient: Tensor, like: Optional[Tensor]) -> Optional[Tensor]:
        return gradient.to(like.dtype).view(like.shape) if needed and like is not None else None

    flat = g_c.view(E, H * C) if has_ee else None  # GATv2's edge term: W_e's and the features' by two products
    g_attr = cast(has_ee and need[10], flat @ w_edge.to(acc), attr) if has_ee else None
    g_w = cast(has_ee and need[11], flat.t() @ attr.to(acc), w_edge) if has_ee else None
    grads = [g_v, g_a, g_b, g_c if kind == GAT_SCORE else None, g_q, g_k, g_xr, g_att.sum(0)]
    return (None, None) + tuple(cast(n, t, x) for n, t, x in zip(need[2:10], grads, inputs[:8])) + (g_attr, g_w)


class _FusedAttention(torch.autograd.Function):
    """:func:`fused_attention`: saves the node-level inputs, the output, ``LSE`` and (DropAttention) ``ALIVE``."""

    @staticmethod
    def forward(ctx: Any, spec: _Spec, csr: EdgeCSR, *inputs) -> Tensor:
        ctx.spec, ctx.csr = spec, csr
        v, nd = inputs[0], csr.num_dst
        with torch.no_grad():
            run = _saved_run(ctx, *inputs)
        out = v.new_empty(nd, run.H, run.C)
        lse = torch.empty(nd, run.H, dtype=run.acc_dtype, device=v.device)
        alive = torch.empty(nd, run.H, dtype=torch.int8, device=v.device) if spec.drop.mode >= NORMALIZED else None
        state = (out, lse, run.placeholder if alive is None else alive)
        run.launch(run.kernels.attention_forward, nd, csr.crow, csr.col, csr.perm, *run.tensors, *state)
        ctx.save_for_backward(*inputs, out, lse, alive)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        *inputs, out, lse, alive = ctx.saved_tensors
        g = grad.contiguous()
        dd = (g.to(lse.dtype) * out.to(lse.dtype)).sum(-1).contiguous()  # D_i = <dL/dy_i, y_i>
        return _backward(ctx, inputs, g, lse, alive, dd, None)


class _FusedWeights(torch.autograd.Function):
    """:func:`fused_weights`: saves the node-level inputs, the weights ``[E, H]``, ``LSE`` and ``ALIVE``."""

    @staticmethod
    def forward(ctx: Any, spec: _Spec, csr: EdgeCSR, *inputs) -> Tensor:
        ctx.spec, ctx.csr = spec, csr
        v, nd = inputs[0], csr.num_dst
        with torch.no_grad():
            run = _saved_run(ctx, *inputs)
        w = v.new_zeros(run.E, run.H)
        lse = torch.empty(nd, run.H, dtype=run.acc_dtype, device=v.device)
        alive = torch.empty(nd, run.H, dtype=torch.int8, device=v.device) if spec.drop.mode >= NORMALIZED else None
        state = (w, lse, run.placeholder if alive is None else alive)
        run.launch(run.kernels.attention_weights, nd, csr.crow, csr.col, csr.perm, *run.tensors, *state)
        ctx.save_for_backward(*inputs, w, lse, alive)
        return w

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        *inputs, w, lse, alive = ctx.saved_tensors
        csr, acc = ctx.csr, lse.dtype
        gw = grad.to(acc).contiguous()
        # D_i = sum over i's edges of w_e dL/dw_e (the softmax's normaliser's share); no output gradient
        dd = torch.zeros_like(lse).index_add_(0, csr.row.long(), (w.to(acc) * gw).index_select(0, csr.perm.long()))
        g = torch.zeros(csr.num_dst, w.size(1), inputs[0].size(2), dtype=acc, device=w.device)
        return _backward(ctx, inputs, g, lse, alive, dd, gw)


def fused_attention(
    kind: int,
    csr: EdgeCSR,
    v: Tensor,
    a: Optional[Tensor] = None,
    b: Optional[Tensor] = None,
    c: Optional[Tensor] = None,
    q: Optional[Tensor] = None,
    k: Optional[Tensor] = None,
    xr: Optional[Tensor] = None,
    att: Optional[Tensor] = None,
    edge_attr: Optional[Tensor] = None,
    w_edge: Optional[Tensor] = None,
    negative_slope: float = 0.2,
    scale: float = 1.0,
    dropout: Dropout = NO_DROPOUT,
    seed: Optional[int] = None,
) -> Tensor:
    r"""Scores, edge softmax, dropout and aggregation of the edges of ``csr`` (an
    :class:`~graph_rma.nn.lean.csr.EdgeCSR` built with ``by_source=True``) in the fused kernels, as one autograd
    node: ``[num_dst, H, C]`` in ``v``'s dtype (float32 arithmetic for half precision).

    ``v`` ``[N_src, H, C]``: the values (GATv2: also the source features of the score). The score's tensors, by
    ``kind``: :data:`GAT_SCORE` ``a`` ``[N_src, H]``, ``b`` ``[N_dst, H]`` or ``None``, ``c`` ``[E, H]`` (by edge id) or
    ``None`` (:math:`s = \mathrm{LeakyReLU}(a_j + b_i + c_e)`); :data:`DOT_SCORE` ``q`` ``[N_dst, H, C]``, ``k``
    ``[N_src, H, C]`` (:math:`s = \gamma \langle q_i, k_j \rangle`, ``scale`` :math:`\gamma`); :data:`GATV2_SCORE`
    ``xr`` ``[N_dst, H, C]``, ``att`` ``[1, H, C]``, ``edge_attr`` ``[E, D]`` with ``w_edge`` ``[H * C, D]`` or
    ``None`` (:math:`s = \langle att, \mathrm{LeakyReLU}(v_j + xr_i + W_e e) \rangle`). ``seed``: the dropout
    seed (default: drawn from torch's default generator)."""
    if dropout.mode != NO_DROP and dropout.p >= 1.0:
        raise GraphRMAError(f"dropout: the fused kernels take a rate in [0, 1), got {dropout.p}")
    spec = _Spec(kind, dropout, draw_seed() if seed is None else int(seed), float(negative_slope), float(scale))
    att = None if att is None else att.reshape(att.size(-2), att.size(-1))
    out = _FusedAttention.apply(spec, csr, v, a, b, c, q, k, xr, att, edge_attr, w_edge)
    return out


def fused_weights(
    kind: int,
    csr: EdgeCSR,
    v: Tensor,
    a: Optional[Tensor] = None,
    b: Optional[Tensor] = None,
    c: Optional[Tensor] = None,
    q: Optional[Tensor] = None,
    k: Optional[Tensor] = None,
    xr: Optional[Tensor] = None,
    att: Optional[Tensor] = None,
    edge_attr: Optional[Tensor] = None,
    w_edge: Optional[Tensor] = None,
    negative_slope: float = 0.2,
    scale: float = 1.0,
    dropout: Dropout = NO_DROPOUT,
    seed: int = 0,
) -> Tensor:
    """The attention weights :func:`fused_attention` aggregates with (after dropout, drawn from the same ``seed``),
    ``[E, H]`` by edge id, in ``v``'s dtype, from the separate weights kernel, as one autograd node (its backward
    runs the backward kernels with ``dL/dw`` in place of the aggregation's share)."""
    att = None if att is None else att.reshape(att.size(-2), att.size(-1))
    spec = _Spec(kind, dropout, int(seed), float(negative_slope), float(scale))
    return _FusedWeights.apply(spec, csr, v, a, b, c, q, k, xr, att, edge_attr, w_edge)
