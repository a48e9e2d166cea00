r"""The fused lean path's Triton kernels (imported by :mod:`~graph_rma.nn.lean.fused` only, and only when the fused
strategy runs: Triton is an optional dependency).

Every kernel walks the edges of a :class:`~graph_rma.nn.lean.csr.EdgeCSR` built with ``by_source=True`` (each
destination's incoming edges sorted by source id) and handles one node and a block of ``BLOCK_H`` heads per program;
edges are taken ``BLOCK_E`` at a time, channels padded to ``BLOCK_C`` (a power of two) with masks. Arithmetic is in
``ACC`` (float32, or float64 for float64 inputs); tensors are contiguous, node features ``[N, H, C]``.

Scores (``KIND``), for an edge :math:`e = (j \to i)` and head :math:`h`:

* ``GAT_SCORE`` (0): :math:`s = \mathrm{LeakyReLU}(A_{j,h} + B_{i,h} + CE_{e,h})` (``B``, ``CE`` optional);
* ``DOT_SCORE`` (1): :math:`s = \gamma \langle Q_{i,h}, K_{j,h} \rangle`;
* ``GATV2_SCORE`` (2): :math:`s = \langle \mathrm{ATT}_h, \mathrm{LeakyReLU}(V_{j,h} + XR_{i,h} + EE_{e,h}) \rangle`.

Weights: :math:`w_e = m_e \exp(s_e - \mathrm{LSE}_i)`, where ``LSE`` is the log-sum-exp of the scores over the
normalisation set of the destination and :math:`m_e` the dropout factor (``DROP``): ``NO_DROP`` 1; ``PLAIN``
:math:`\mathrm{keep}/(1-p)`; ``NORMALIZED`` (DropAttention) the set is the surviving edges when the destination has
one (``ALIVE``), else all; ``INVERSE`` (DropAttention) :math:`\mathrm{keep}/(1-p)` when the destination has a
survivor, else 1. A drop is drawn with ``tl.rand(seed, offset)`` (Philox): window starts with probability ``gamma``
(``p / window``; plain dropout: ``p`` and window 1), an edge dropped when a start lies among the ``window``
positions ending at it; positions are the edge's CSR position (offset ``h * E + pos``; element mode, the window
running along the destination's incoming edges) or its source id (offset ``h * NS + j``; column mode). Backward
draws the very same numbers, so no mask is stored.
"""

import triton
import triton.language as tl

GAT_SCORE, DOT_SCORE, GATV2_SCORE = 0, 1, 2
NO_DROP, PLAIN, NORMALIZED, INVERSE = 0, 1, 2, 3


@triton.jit
def _leaky(z, slope):
    return tl.where(z > 0, z, z * slope)


@triton.jit
def _leaky_grad(g, z, slope):
    """``g`` times the LeakyReLU's derivative at ``z``."""
    return tl.where(z > 0, g, g * slope)


@triton.jit
def _rows3(P, n, hh, cc, H, C):
    """Pointers to rows ``n`` ``[BE]`` of an ``[N, H, C]`` tensor: ``[BE, BH, BC]``."""
    return P + n[:, None, None] * (H * C) + hh[None, :, None] * C + cc[None, None, :]


@triton.jit
def _row2(P, n, hh, cc, H, C):
    """Pointers to one row ``n`` (a scalar) of an ``[N, H, C]`` tensor: ``[BH, BC]``."""
    return P + n * (H * C) + hh[:, None] * C + cc[None, :]


@triton.jit
def _score(
    i,
    j,
    eid,
    m2,
    m3,
    hh,
    cc,
    H,
    C,
    A,
    B,
    CE,
    Q,
    K,
    V,
    XR,
    ATT,
    EE,
    scale,
    slope,
    KIND: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_C: tl.constexpr,
    ACC: tl.constexpr,
):
    """``(s, pre)`` for edges with destinations ``i``, sources ``j`` and edge ids ``eid`` (each ``[BE]``): the
    scores ``[BE, BH]`` and what backward differentiates (GAT: the LeakyReLU's input ``[BE, BH]``; GATv2: its input
    ``[BE, BH, BC]``; dot: the scores)."""
    if KIND == 0:
        pre = tl.load(A + j[:, None] * H + hh[None, :], mask=m2, other=0.0).to(ACC)
        if HAS_B:
            pre += tl.load(B + i[:, None] * H + hh[None, :], mask=m2, other=0.0).to(ACC)
        if HAS_C:
            pre += tl.load(CE + eid[:, None] * H + hh[None, :], mask=m2, other=0.0).to(ACC)
        s = _leaky(pre, slope)
    elif KIND == 1:
        q = tl.load(_rows3(Q, i, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
        k = tl.load(_rows3(K, j, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
        s = tl.sum(q * k, 2) * scale
        pre = s
    else:
        pre = tl.load(_rows3(V, j, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
        pre += tl.load(_rows3(XR, i, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
        if HAS_C:
            pre += tl.load(_rows3(EE, eid, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
        att = tl.load(ATT + hh[:, None] * C + cc[None, :], mask=(hh[:, None] < H) & (cc[None, :] < C), other=0.0)
        s = tl.sum(_leaky(pre, slope) * att.to(ACC)[None, :, :], 2)
    return s, pre


@triton.jit
def _dropped(seed, gamma, window, pos, rank, j, hh, m2, E, NS, COLUMN: tl.constexpr):
    """Whether each (edge, head) of the block is dropped ``[BE, BH]``: a window start (``rand < gamma``) at one of
    the ``window`` positions ending at the edge's (``rank``: its position within its segment)."""
    if COLUMN:
        base = hh.to(tl.int64)[None, :] * NS + j[:, None]
        rk = j
    else:
        base = hh.to(tl.int64)[None, :] * E + pos[:, None]
        rk = rank
    d = m2 & (m2 == 0)
    for t in range(0, window):
        r = tl.rand(seed, base - t)
        d = d | ((rk[:, None] >= t) & (r < gamma))
    return d & m2


@triton.jit
def _alive(
    start,
    end,
    COL,
    hh,
    hm,
    seed,
    gamma,
    window,
    E,
    NS,
    COLUMN: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    """Whether the destination whose edges are ``[start, end)`` has a surviving edge, per head ``[BH]``."""
    count = tl.zeros([BLOCK_H], dtype=tl.int32)
    for e0 in range(start, end, BLOCK_E):
        pos = e0 + tl.arange(0, BLOCK_E)
        em = pos < end
        j = tl.load(COL + pos, mask=em, other=0).to(tl.int64)
        m2 = em[:, None] & hm[None, :]
        d = _dropped(seed, gamma, window, pos, pos - start, j, hh, m2, E, NS, COLUMN)
        count += tl.sum((m2 & (d == 0)).to(tl.int32), 0)
    return count > 0


@triton.jit
def _weigh(s, lse, dropped, alive, m2, inv_keep, DROP: tl.constexpr):
    """``(w, a)``: the weights after dropout and :math:`\\exp(s - \\mathrm{LSE})` over the normalisation set (both
    ``[BE, BH]``; ``lse``/``alive``: the destinations', broadcastable)."""
    s = tl.where(m2, s, float("-inf"))
    if DROP == 2:
        s = tl.where(dropped & alive, float("-inf"), s)
    a = tl.exp(s - lse)
    if DROP == 1:
        w = tl.where(dropped, 0.0, a * inv_keep)
    elif DROP == 3:
        w = tl.where(alive, tl.where(dropped, 0.0, a * inv_keep), a)
    else:
        w = a
    return w, a


@triton.jit
def _lse_pass(
    i,
    start,
    end,
    alive,
    COL,
    PERM,
    A,
    B,
    CE,
    Q,
    K,
    V,
    XR,
    ATT,
    EE,
    H,
    C,
    E,
    NS,
    scale,
    slope,
    seed,
    gamma,
    window,
    hh,
    hm,
    cc,
    cm,
    KIND: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_C: tl.constexpr,
    DROP: tl.constexpr,
    COLUMN: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """The running maximum and sum of one destination's scores over its normalisation set: ``(m, total)`` ``[BH]``."""
    m = tl.full([BLOCK_H], float("-inf"), ACC)
    total = tl.zeros([BLOCK_H], ACC)
    for e0 in range(start, end, BLOCK_E):
        pos = e0 + tl.arange(0, BLOCK_E)
        em = pos < end
        j = tl.load(COL + pos, mask=em, other=0).to(tl.int64)
        if HAS_C:
            eid = tl.load(PERM + pos, mask=em, other=0).to(tl.int64)
        else:
            eid = pos
        m2 = em[:, None] & hm[None, :]
        m3 = m2[:, :, None] & cm[None, None, :]
        ii = tl.zeros([BLOCK_E], tl.int64) + i
        s, pre = _score(
            ii, j, eid, m2, m3, hh, cc, H, C, A, B, CE, Q, K, V, XR, ATT, EE, scale, slope, KIND, HAS_B, HAS_C, ACC
        )
        s = tl.where(m2, s, float("-inf"))
        if DROP == 2:
            d = _dropped(seed, gamma, window, pos, pos - start, j, hh, m2, E, NS, COLUMN)
            s = tl.where(d & alive[None, :], float("-inf"), s)
        m_new = tl.maximum(m, tl.max(s, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        total = total * tl.exp(m - m_safe) + tl.sum(tl.exp(s - m_safe[None, :]), 0)
        m = m_new
    return m, total


@triton.jit
def attention_forward(
    CROW,
    COL,
    PERM,
    A,
    B,
    CE,
    Q,
    K,
    V,
    XR,
    ATT,
    EE,
    OUT,
    LSE,
    ALIVE,
    H,
    C,
    E,
    NS,
    scale,
    slope,
    seed,
    gamma,
    inv_keep,
    window,
    KIND: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_C: tl.constexpr,
    DROP: tl.constexpr,
    COLUMN: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Grid ``(N_dst, cdiv(H, BLOCK_H))``: program ``(i, hb)`` computes destination ``i``'s output for heads
    ``hb * BLOCK_H ...`` in one pass over its incoming edges, an online softmax (running maximum ``m``, sum ``total``,
    the accumulator rescaled by :math:`e^{m_{old} - m_{new}}` as the maximum grows) with the dropout factor applied
    to each weight as it is accumulated: ``OUT[i] = sum_e w_e V[j]``. Saves ``LSE[i] = m + log total`` (0 without
    edges, whose output is 0 as stock's) and, for DropAttention, ``ALIVE[i]`` (a survivor exists), from a first
    pass that draws only the mask."""
    i = tl.program_id(0).to(tl.int64)
    hh = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    hm = hh < H
    cc = tl.arange(0, BLOCK_C)
    cm = cc < C
    start = tl.load(CROW + i).to(tl.int64)
    end = tl.load(CROW + i + 1).to(tl.int64)
    if DROP >= 2:
        alive = _alive(start, end, COL, hh, hm, seed, gamma, window, E, NS, COLUMN, BLOCK_E, BLOCK_H)
        tl.store(ALIVE + i * H + hh, alive.to(tl.int8), mask=hm)
    else:
        alive = hm
    m = tl.full([BLOCK_H], float("-inf"), ACC)
    total = tl.zeros([BLOCK_H], ACC)
    acc = tl.zeros([BLOCK_H, BLOCK_C], ACC)
    for e0 in range(start, end, BLOCK_E):
        pos = e0 + tl.arange(0, BLOCK_E)
        em = pos < end
        j = tl.load(COL + pos, mask=em, other=0).to(tl.int64)
        if HAS_C:
            eid = tl.load(PERM + pos, mask=em, other=0).to(tl.int64)
        else:
            eid = pos
        m2 = em[:, None] & hm[None, :]
        m3 = m2[:, :, None] & cm[None, None, :]
        ii = tl.zeros([BLOCK_E], tl.int64) + i
        s, pre = _score(
            ii, j, eid, m2, m3, hh, cc, H, C, A, B, CE, Q, K, V, XR, ATT, EE, scale, slope, KIND, HAS_B, HAS_C, ACC
        )
        if DROP > 0:
            d = _dropped(seed, gamma, window, pos, pos - start, j, hh, m2, E, NS, COLUMN)
        else:
            d = m2 & (m2 == 0)
        s = tl.where(m2, s, float("-inf"))
        if DROP == 2:
            s = tl.where(d & alive[None, :], float("-inf"), s)
        m_new = tl.maximum(m, tl.max(s, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        corr = tl.exp(m - m_safe)
        pe = tl.exp(s - m_safe[None, :])
        total = total * corr + tl.sum(pe, 0)
        if DROP == 1:
            pe = tl.where(d, 0.0, pe * inv_keep)
        elif DROP == 3:
            pe = tl.where(alive[None, :], tl.where(d, 0.0, pe * inv_keep), pe)
        v = tl.load(_rows3(V, j, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
        acc = acc * corr[:, None] + tl.sum(pe[:, :, None] * v, 0)
        m = m_new
    has = total > 0
    m_fin = tl.where(m == float("-inf"), 0.0, m)
    out = acc / tl.where(has, total, 1.0)[:, None]
    tl.store(_row2(OUT, i, hh, cc, H, C), out.to(OUT.dtype.element_ty), mask=hm[:, None] & cm[None, :])
    tl.store(LSE + i * H + hh, tl.where(has, m_fin + tl.log(tl.where(has, total, 1.0)), 0.0), mask=hm)


@triton.jit
def attention_weights(
    CROW,
    COL,
    PERM,
    A,
    B,
    CE,
    Q,
    K,
    V,
    XR,
    ATT,
    EE,
    W,
    LSE,
    ALIVE,
    H,
    C,
    E,
    NS,
    scale,
    slope,
    seed,
    gamma,
    inv_keep,
    window,
    KIND: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_C: tl.constexpr,
    DROP: tl.constexpr,
    COLUMN: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Grid ``(N_dst, cdiv(H, BLOCK_H))``: program ``(i, hb)`` writes the weights ``w_e`` (after dropout, as the
    forward kernel uses them) of destination ``i``'s edges into ``W[e]`` ``[E, H]`` (by edge id): a pass for the
    log-sum-exp (stored in ``LSE[i]``, with ``ALIVE[i]`` under DropAttention, for the weights' backward), a pass to
    write. Run only when the weights are asked for."""
    i = tl.program_id(0).to(tl.int64)
    hh = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    hm = hh < H
    cc = tl.arange(0, BLOCK_C)
    cm = cc < C
    start = tl.load(CROW + i).to(tl.int64)
    end = tl.load(CROW + i + 1).to(tl.int64)
    if DROP >= 2:
        alive = _alive(start, end, COL, hh, hm, seed, gamma, window, E, NS, COLUMN, BLOCK_E, BLOCK_H)
    else:
        alive = hm
    m, total = _lse_pass(
        i,
        start,
        end,
        alive,
        COL,
        PERM,
        A,
        B,
        CE,
        Q,
        K,
        V,
        XR,
        ATT,
        EE,
        H,
        C,
        E,
        NS,
        scale,
        slope,
        seed,
        gamma,
        window,
        hh,
        hm,
        cc,
        cm,
        KIND,
        HAS_B,
        HAS_C,
        DROP,
        COLUMN,
        ACC,
        BLOCK_E,
        BLOCK_H,
        BLOCK_C,
    )
    m = tl.where(m == float("-inf"), 0.0, m)
    lse = m + tl.log(tl.where(total > 0, total, 1.0))
    tl.store(LSE + i * H + hh, lse, mask=hm)
    if DROP >= 2:
        tl.store(ALIVE + i * H + hh, alive.to(tl.int8), mask=hm)
    for e0 in range(start, end, BLOCK_E):
        pos = e0 + tl.arange(0, BLOCK_E)
        em = pos < end
        j = tl.load(COL + pos, mask=em, other=0).to(tl.int64)
        eid = tl.load(PERM + pos, mask=em, other=0).to(tl.int64)
        m2 = em[:, None] & hm[None, :]
        m3 = m2[:, :, None] & cm[None, None, :]
        ii = tl.zeros([BLOCK_E], tl.int64) + i
        s, pre = _score(
            ii, j, eid, m2, m3, hh, cc, H, C, A, B, CE, Q, K, V, XR, ATT, EE, scale, slope, KIND, HAS_B, HAS_C, ACC
        )
        if DROP > 0:
            d = _dropped(seed, gamma, window, pos, pos - start, j, hh, m2, E, NS, COLUMN)
        else:
            d = m2 & (m2 == 0)
        w, a = _weigh(s, lse[None, :], d, alive[None, :], m2, inv_keep, DROP)
        tl.store(W + eid[:, None] * H + hh[None, :], w.to(W.dtype.element_ty), mask=m2)


@triton.jit
def backward_rows(
    CROW,
    COL,
    PERM,
    A,
    B,
    CE,
    Q,
    K,
    V,
    XR,
    ATT,
    EE,
    G,
    LSE,
    ALIVE,
    DD,
    GW,
    GB,
    GCE,
    GQ,
    GXR,
    GATT,
    H,
    C,
    E,
    NS,
    scale,
    slope,
    seed,
    gamma,
    inv_keep,
    window,
    KIND: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_C: tl.constexpr,
    DROP: tl.constexpr,
    COLUMN: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_C: tl.constexpr,
    HAS_GW: tl.constexpr,
):
    """Grid ``(N_dst, cdiv(H, BLOCK_H))``: program ``(i, hb)`` walks destination ``i``'s edges, recomputes each
    weight from the score and ``LSE[i]`` (and the mask from the seed) and the score's gradient (with ``HAS_GW``,
    ``GW[e]``, the gradient of the returned weights, added to :math:`\\langle G_i, V_j \\rangle`)
    :math:`\\partial L/\\partial s_e = w_e \\langle G_i, V_j \\rangle - a_e D_i` (``DD[i]`` = :math:`D_i =
    \\langle G_i, \\mathrm{OUT}_i \\rangle`), and writes the destination-side sums: GAT ``GB[i]`` (and the edge term's
    gradient ``GCE[e]``, per edge), dot ``GQ[i]``, GATv2 ``GXR[i]``, ``GATT[i]`` (this row's share of the attention
    vector's gradient, summed over rows by the caller) and ``GCE[e]`` ``[E, H, C]`` (the edge term's gradient)."""
    i = tl.program_id(0).to(tl.int64)
    hh = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    hm = hh < H
    cc = tl.arange(0, BLOCK_C)
    cm = cc < C
    m2h = hm[:, None] & cm[None, :]
    start = tl.load(CROW + i).to(tl.int64)
    end = tl.load(CROW + i + 1).to(tl.int64)
    g = tl.load(_row2(G, i, hh, cc, H, C), mask=m2h, other=0.0).to(ACC)
    lse = tl.load(LSE + i * H + hh, mask=hm, other=0.0)
    dd = tl.load(DD + i * H + hh, mask=hm, other=0.0)
    if DROP >= 2:
        alive = tl.load(ALIVE + i * H + hh, mask=hm, other=0) != 0
    else:
        alive = hm
    acc1 = tl.zeros([BLOCK_H, BLOCK_C], ACC)
    acc2 = tl.zeros([BLOCK_H, BLOCK_C], ACC)
    gb = tl.zeros([BLOCK_H], ACC)
    if KIND == 2:
        att = tl.load(ATT + hh[:, None] * C + cc[None, :], mask=m2h, other=0.0).to(ACC)
    for e0 in range(start, end, BLOCK_E):
        pos = e0 + tl.arange(0, BLOCK_E)
        em = pos < end
        j = tl.load(COL + pos, mask=em, other=0).to(tl.int64)
        eid = tl.load(PERM + pos, mask=em, other=0).to(tl.int64)
        m2 = em[:, None] & hm[None, :]
        m3 = m2[:, :, None] & cm[None, None, :]
        ii = tl.zeros([BLOCK_E], tl.int64) + i
        s, pre = _score(
            ii, j, eid, m2, m3, hh, cc, H, C, A, B, CE, Q, K, V, XR, ATT, EE, scale, slope, KIND, HAS_B, HAS_C, ACC
        )
        if DROP > 0:
            d = _dropped(seed, gamma, window, pos, pos - start, j, hh, m2, E, NS, COLUMN)
        else:
            d = m2 & (m2 == 0)
        w, a = _weigh(s, lse[None, :], d, alive[None, :], m2, inv_keep, DROP)
        v = tl.load(_rows3(V, j, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
        gw = tl.sum(g[None, :, :] * v, 2)
        if HAS_GW:
            gw += tl.load(GW + eid[:, None] * H + hh[None, :], mask=m2, other=0.0).to(ACC)
        ds = tl.where(m2, w * gw - a * dd[None, :], 0.0)
        if KIND == 0:
            dz = _leaky_grad(ds, pre, slope)
            gb += tl.sum(dz, 0)
            if HAS_C:
                tl.store(GCE + eid[:, None] * H + hh[None, :], dz.to(GCE.dtype.element_ty), mask=m2)
        elif KIND == 1:
            k = tl.load(_rows3(K, j, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
            acc1 += tl.sum(ds[:, :, None] * k, 0)
        else:
            du = _leaky_grad(ds[:, :, None] * att[None, :, :], pre, slope)
            acc1 += tl.sum(du, 0)
            acc2 += tl.sum(ds[:, :, None] * _leaky(pre, slope), 0)
            if HAS_C:
                tl.store(_rows3(GCE, eid, hh, cc, H, C), du.to(GCE.dtype.element_ty), mask=m3)
    if KIND == 0:
        if HAS_B:
            tl.store(GB + i * H + hh, gb.to(GB.dtype.element_ty), mask=hm)
    elif KIND == 1:
        tl.store(_row2(GQ, i, hh, cc, H, C), (acc1 * scale).to(GQ.dtype.element_ty), mask=m2h)
    else:
        tl.store(_row2(GXR, i, hh, cc, H, C), acc1.to(GXR.dtype.element_ty), mask=m2h)
        tl.store(_row2(GATT, i, hh, cc, H, C), acc2.to(GATT.dtype.element_ty), mask=m2h)


@triton.jit
def backward_columns(
    CROW,
    COL,
    PERM,
    CROW_T,
    COL_T,
    PERM_T,
    A,
    B,
    CE,
    Q,
    K,
    V,
    XR,
    ATT,
    EE,
    G,
    LSE,
    ALIVE,
    DD,
    GW,
    GV,
    GA,
    GK,
    H,
    C,
    E,
    NS,
    scale,
    slope,
    seed,
    gamma,
    inv_keep,
    window,
    KIND: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_C: tl.constexpr,
    DROP: tl.constexpr,
    COLUMN: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_C: tl.constexpr,
    HAS_GW: tl.constexpr,
):
    """Grid ``(N_src, cdiv(H, BLOCK_H))``: program ``(j, hb)`` walks source ``j``'s outgoing edges (the CSR's
    transpose: ``PERM_T`` their CSR positions, ``COL_T`` their destinations), recomputes weight and score gradient
    as :func:`backward_rows` does, and writes the source-side sums: ``GV[j] = sum_e w_e G_i`` (plus, for GATv2, the
    score's share through ``V``), GAT ``GA[j]``, dot ``GK[j]``. No atomics: every program owns its rows."""
    j = tl.program_id(0).to(tl.int64)
    hh = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    hm = hh < H
    cc = tl.arange(0, BLOCK_C)
    cm = cc < C
    m2h = hm[:, None] & cm[None, :]
    start = tl.load(CROW_T + j).to(tl.int64)
    end = tl.load(CROW_T + j + 1).to(tl.int64)
    vj = tl.load(_row2(V, j, hh, cc, H, C), mask=m2h, other=0.0).to(ACC)
    gv = tl.zeros([BLOCK_H, BLOCK_C], ACC)
    gk = tl.zeros([BLOCK_H, BLOCK_C], ACC)
    ga = tl.zeros([BLOCK_H], ACC)
    if KIND == 2:
        att = tl.load(ATT + hh[:, None] * C + cc[None, :], mask=m2h, other=0.0).to(ACC)
    for e0 in range(start, end, BLOCK_E):
        t = e0 + tl.arange(0, BLOCK_E)
        em = t < end
        pos = tl.load(PERM_T + t, mask=em, other=0).to(tl.int64)
        i = tl.load(COL_T + t, mask=em, other=0).to(tl.int64)
        eid = tl.load(PERM + pos, mask=em, other=0).to(tl.int64)
        m2 = em[:, None] & hm[None, :]
        m3 = m2[:, :, None] & cm[None, None, :]
        jj = tl.zeros([BLOCK_E], tl.int64) + j
        s, pre = _score(
            i, jj, eid, m2, m3, hh, cc, H, C, A, B, CE, Q, K, V, XR, ATT, EE, scale, slope, KIND, HAS_B, HAS_C, ACC
        )
        if DROP > 0:
            row_start = tl.load(CROW + i, mask=em, other=0).to(tl.int64)
            d = _dropped(seed, gamma, window, pos, pos - row_start, jj, hh, m2, E, NS, COLUMN)
        else:
            d = m2 & (m2 == 0)
        if DROP >= 2:
            alive = tl.load(ALIVE + i[:, None] * H + hh[None, :], mask=m2, other=0) != 0
        else:
            alive = m2
        lse = tl.load(LSE + i[:, None] * H + hh[None, :], mask=m2, other=0.0)
        dd = tl.load(DD + i[:, None] * H + hh[None, :], mask=m2, other=0.0)
        w, a = _weigh(s, lse, d, alive, m2, inv_keep, DROP)
        g = tl.load(_rows3(G, i, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
        gw = tl.sum(g * vj[None, :, :], 2)
        if HAS_GW:
            gw += tl.load(GW + eid[:, None] * H + hh[None, :], mask=m2, other=0.0).to(ACC)
        ds = tl.where(m2, w * gw - a * dd, 0.0)
        gv += tl.sum(w[:, :, None] * g, 0)
        if KIND == 0:
            ga += tl.sum(_leaky_grad(ds, pre, slope), 0)
        elif KIND == 1:
            q = tl.load(_rows3(Q, i, hh, cc, H, C), mask=m3, other=0.0).to(ACC)
            gk += tl.sum(ds[:, :, None] * q, 0)
        else:
            gv += tl.sum(_leaky_grad(ds[:, :, None] * att[None, :, :], pre, slope), 0)
    tl.store(_row2(GV, j, hh, cc, H, C), gv.to(GV.dtype.element_ty), mask=m2h)
    if KIND == 0:
        tl.store(GA + j * H + hh, ga.to(GA.dtype.element_ty), mask=hm)
    elif KIND == 1:
        tl.store(_row2(GK, j, hh, cc, H, C), (gk * scale).to(GK.dtype.element_ty), mask=m2h)
