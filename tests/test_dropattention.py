"""DropAttention: window semantics against a direct loop, statistics, sparse == dense, gradients, edge cases."""

import copy

import pytest
import torch
from torch_geometric.utils import scatter

import graph_rma
from graph_rma import DropAttention, drop_attention, drop_attention_dense
from graph_rma.dropattention import draw_window_mask


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def complete_graph(n: int):
    """All n*n edges (self-loops included), sorted by destination then source: edge i*n + j is j -> i."""
    dst, src = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    return torch.stack([src.flatten(), dst.flatten()])


def random_graph(n: int, e: int, seed: int = 0):
    g = gen(seed)
    return torch.randint(0, n, (2, e), generator=g)


def edge_softmax(edge_index, heads, seed=0, dtype=torch.float32):
    from torch_geometric.utils import softmax

    n = int(edge_index.max()) + 1
    logits = torch.randn(edge_index.size(1), heads, generator=gen(seed), dtype=torch.float64)
    return softmax(logits, edge_index[1], num_nodes=n).to(dtype)


def dense_to_sparse(attn):  # [H, N, N] -> [N*N, H] in complete_graph's edge order
    return attn.reshape(attn.size(0), -1).t()


# ----------------------------------------------------------------------------------------------------------------
# The mask: window semantics checked against a direct loop
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p,w", [(0.3, 1), (0.4, 2), (0.5, 3), (0.6, 5), (0.7, 6)])
def test_window_mask_matches_loop(p, w):
    shape = (3, 5, 17)
    dropped = draw_window_mask(shape, p, w, torch.device("cpu"), gen(7))
    starts = torch.rand(shape, generator=gen(7)) < p / w
    ref = torch.zeros(shape, dtype=torch.bool)
    for a in range(shape[0]):
        for b in range(shape[1]):
            for k in range(shape[2]):
                ref[a, b, k] = bool(starts[a, b, max(0, k - w + 1) : k + 1].any())
    assert torch.equal(dropped, ref)


def test_sparse_element_windows_follow_source_order_per_destination():
    # Loop reference: per head, per destination, incoming edges sorted by source id; a start drops itself and the
    # next w - 1 incoming edges of that destination; draws are consumed in (head, destination, source) order.
    edge_index = random_graph(9, 60, seed=3)
    edge_index = torch.unique(edge_index, dim=1)  # simple graph: (dst, src) keys are distinct
    edge_index = edge_index[:, torch.randperm(edge_index.size(1), generator=gen(1))]
    E, p = edge_index.size(1), 0.6
    for H, w in [(2, 3), (8, 2), (3, 5)]:  # head counts 2 and 8 take the packed row copy, 3 the plain one
        _check_sparse_windows(edge_index, E, H, p, w)


def _check_sparse_windows(edge_index, E, H, p, w):
    alpha = torch.ones(E, H)  # unnormalised ones: "inverse" keeps survivors at 1/(1-p), dropped at 0
    out = drop_attention(alpha, edge_index, p, window=w, rescale="inverse", num_nodes=9, generator=gen(5))
    starts = torch.rand(H, E, generator=gen(5)) < p / w
    order = sorted(range(E), key=lambda e: (int(edge_index[1, e]), int(edge_index[0, e])))
    expected = torch.zeros(E, H, dtype=torch.bool)
    for h in range(H):
        for pos, e in enumerate(order):
            first = pos
            while first > 0 and int(edge_index[1, order[first - 1]]) == int(edge_index[1, e]):
                first -= 1
            expected[e, h] = bool(starts[h, max(first, pos - w + 1) : pos + 1].any())
    # Rows whose edges were all dropped are returned unchanged; compare the others.
    all_dropped = scatter((~expected).int(), edge_index[1], dim=0, dim_size=9, reduce="sum") == 0
    restored = all_dropped[edge_index[1]]
    assert torch.equal((out == 0) & ~restored, expected & ~restored)
    assert torch.equal(out[restored], alpha[restored])
    assert torch.allclose(out[~expected], torch.full_like(out[~expected], 1 / (1 - p)))


@pytest.mark.parametrize("H,w", [(8, 1), (3, 2), (4, 3)])
def test_sparse_column_windows_follow_source_ids(H, w):
    # Loop reference: per head, source node j is dropped when a start lies in [j - w + 1, j]; draws [H, N_src].
    n, p = 11, 0.5
    edge_index = random_graph(n, 80, seed=6)
    alpha = torch.ones(edge_index.size(1), H)
    out = drop_attention(alpha, edge_index, p, w, "column", "inverse", num_nodes=n, generator=gen(8))
    starts = torch.rand(H, n, generator=gen(8)) < p / w
    node = torch.tensor([[bool(starts[h, max(0, j - w + 1) : j + 1].any()) for j in range(n)] for h in range(H)])
    expected = node.t()[edge_index[0]]
    restored = (scatter((~expected).int(), edge_index[1], dim=0, dim_size=n, reduce="sum") == 0)[edge_index[1]]
    assert torch.equal((out == 0) & ~restored, expected & ~restored)
    assert torch.equal(out[restored], alpha[restored])


# ----------------------------------------------------------------------------------------------------------------
# Inference, reproducibility
# ----------------------------------------------------------------------------------------------------------------
def test_eval_mode_and_p0_are_identity():
    edge_index = random_graph(20, 80)
    alpha = edge_softmax(edge_index, 4)
    attn = torch.rand(2, 4, 6, 7).softmax(-1)
    assert drop_attention(alpha, edge_index, 0.5, training=False) is alpha
    assert drop_attention_dense(attn, 0.5, training=False) is attn
    assert torch.equal(drop_attention(alpha, edge_index, 0.0), alpha)
    m = DropAttention(0.5, window=2, mode="column").eval()
    assert torch.equal(m(attn), attn) and torch.equal(m(alpha, edge_index), alpha)
    m.train()
    assert not torch.equal(m(attn), attn)


def test_same_seed_same_result_different_seed_differs():
    edge_index = random_graph(30, 200)
    alpha = edge_softmax(edge_index, 3)
    for mode in ("element", "column"):
        a = drop_attention(alpha, edge_index, 0.4, 2, mode, generator=gen(11))
        b = drop_attention(alpha, edge_index, 0.4, 2, mode, generator=gen(11))
        c = drop_attention(alpha, edge_index, 0.4, 2, mode, generator=gen(12))
        assert torch.equal(a, b) and not torch.equal(a, c)
    attn = torch.rand(3, 8, 9)
    assert torch.equal(
        drop_attention_dense(attn, 0.3, generator=gen(1)), drop_attention_dense(attn, 0.3, generator=gen(1))
    )


# ----------------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p,w", [(0.1, 1), (0.3, 2), (0.5, 4)])
def test_dense_drop_fraction(p, w):
    expected = 1 - (1 - p / w) ** w
    g = gen(0)
    attn = torch.full((4, 32, 256), 1.0 / 256)
    fracs = []
    for _ in range(10):
        out = drop_attention_dense(attn, p, w, rescale="inverse", generator=g)
        fracs.append((out[..., w - 1 :] == 0).float().mean())  # interior positions (no boundary effect)
    assert abs(float(torch.stack(fracs).mean()) - expected) < 0.01
    # column mode: a dropped column is dropped for every query
    out = drop_attention_dense(attn, p, w, mode="column", rescale="inverse", generator=g)
    col = out == 0
    assert torch.equal(col.all(dim=1), col.any(dim=1))


@pytest.mark.parametrize("p,w", [(0.2, 1), (0.3, 3)])
def test_sparse_drop_fraction(p, w):
    expected = 1 - (1 - p / w) ** w
    n, e, H = 400, 16000, 4
    edge_index = torch.unique(random_graph(n, e, seed=2), dim=1)
    alpha = torch.ones(edge_index.size(1), H)
    # rank of each edge among its destination's incoming edges ordered by source id
    key = edge_index[1] * n + edge_index[0]
    order = key.argsort()
    first = torch.searchsorted(edge_index[1][order], edge_index[1][order])
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel()) - first
    interior = rank >= w - 1
    g = gen(3)
    fracs = [
        (drop_attention(alpha, edge_index, p, w, rescale="inverse", num_nodes=n, generator=g)[interior] == 0)
        .float()
        .mean()
        for _ in range(10)
    ]
    assert abs(float(torch.stack(fracs).mean()) - expected) < 0.01
    # column mode: per-node fraction over many draws
    node_fracs = []
    for _ in range(10):
        out = drop_attention(alpha, edge_index, p, w, mode="column", rescale="inverse", num_nodes=n, generator=g)
        dropped_src = scatter((out == 0).float(), edge_index[0], dim=0, dim_size=n, reduce="max")  # [n, H]
        node_fracs.append(dropped_src[w - 1 :].mean())
    assert abs(float(torch.stack(node_fracs).mean()) - expected) < 0.02


def test_column_mode_drops_all_or_none_of_a_sources_edges_per_head():
    n, H = 40, 3
    # dense-ish graph: every destination has ~30 sources, so no row is ever fully dropped at p = 0.3
    edge_index = torch.unique(random_graph(n, 1200, seed=4), dim=1)
    alpha = edge_softmax(edge_index, H)
    out = drop_attention(alpha, edge_index, 0.3, window=2, mode="column", num_nodes=n, generator=gen(9))
    dropped = (out == 0).float()
    any_ = scatter(dropped, edge_index[0], dim=0, dim_size=n, reduce="max")
    all_ = scatter(dropped, edge_index[0], dim=0, dim_size=n, reduce="min")
    has_edges = torch.bincount(edge_index[0], minlength=n) > 0
    assert torch.equal(any_[has_edges], all_[has_edges])
    frac = any_[has_edges].mean()
    assert 0.1 < float(frac) < 0.7  # some, not all, sources dropped
    assert not torch.equal(any_[:, 0], any_[:, 1])  # heads have their own masks


def test_sparse_matches_dense_on_complete_graph_in_distribution():
    # Shuffled edges and window=1 (draws follow the edge order): not the same draws as dense, same distribution.
    n, H, draws = 8, 4, 300
    edge_index = complete_graph(n)
    perm = torch.randperm(n * n, generator=gen(0))
    attn = torch.rand(H, n, n, generator=gen(1)).softmax(-1)
    alpha = dense_to_sparse(attn)[perm]
    for p, w in [(0.3, 1), (0.45, 3)]:
        gs, gd = gen(100), gen(200)
        fs = torch.zeros(n * n)
        fd = torch.zeros(n * n)
        for _ in range(draws):
            out = drop_attention(alpha, edge_index[:, perm], p, w, rescale="inverse", generator=gs)
            fs[perm] += (out == 0).float().sum(1)
            fd += (
                (dense_to_sparse(drop_attention_dense(attn, p, w, rescale="inverse", generator=gd)) == 0).float().sum(1)
            )
        fs, fd = (fs / (draws * H)).view(n, n), (fd / (draws * H)).view(n, n)
        # position s of a row is dropped with probability 1 - (1 - p/w)^min(s + 1, w) (boundary effect included)
        s = torch.arange(n).clamp(max=w - 1) + 1
        theory = (1 - (1 - p / w) ** s).expand(n, n)
        assert (fs - theory).abs().max() < 0.08 and (fd - theory).abs().max() < 0.08
        assert (fs - fd).abs().mean() < 0.03


@pytest.mark.parametrize("mode", ["element", "column"])
@pytest.mark.parametrize("w", [1, 2, 3])
def test_sparse_equals_dense_on_complete_graph_given_the_same_mask(mode, w):
    n, H = 7, 3
    attn = torch.rand(H, n, n, generator=gen(2), dtype=torch.float64).softmax(-1)
    edge_index = complete_graph(n)
    for rescale in ("normalized", "inverse"):
        d = dense_to_sparse(drop_attention_dense(attn, 0.5, w, mode, rescale, generator=gen(4)))
        s = drop_attention(dense_to_sparse(attn), edge_index, 0.5, w, mode, rescale, generator=gen(4))
        assert torch.equal(s == 0, d == 0)  # the very same mask from the same seed
        assert torch.allclose(s, d, rtol=1e-14, atol=1e-15)  # only summation order differs
        if w > 1 or mode == "column":  # shuffled edges: the mask follows (destination, source), not edge order
            perm = torch.randperm(n * n, generator=gen(5))
            s2 = drop_attention(
                dense_to_sparse(attn)[perm], edge_index[:, perm], 0.5, w, mode, rescale, generator=gen(4)
            )
            assert torch.allclose(s2, d[perm], rtol=1e-14, atol=1e-15)


# ----------------------------------------------------------------------------------------------------------------
# Rescaling, extremes, dtypes
# ----------------------------------------------------------------------------------------------------------------
def test_normalized_rows_sum_to_one_and_inverse_scales():
    n, H, p = 50, 4, 0.4
    edge_index = random_graph(n, 600)
    alpha = edge_softmax(edge_index, H)
    for mode in ("element", "column"):
        out = drop_attention(alpha, edge_index, p, 2, mode, num_nodes=n, generator=gen(1))
        sums = scatter(out, edge_index[1], dim=0, dim_size=n, reduce="sum")
        has_in = torch.bincount(edge_index[1], minlength=n) > 0
        assert torch.allclose(sums[has_in], torch.ones_like(sums[has_in]), atol=1e-5)
        assert (out == 0).any()
        # surviving weights keep their ratios within a row
        kept = out > 0
        ratio = out[kept] / alpha[kept]
        row_ratio = scatter(out / alpha, edge_index[1], dim=0, dim_size=n, reduce="max")
        assert torch.allclose(ratio, row_ratio[edge_index[1]][kept], rtol=1e-5)
    inv = drop_attention(alpha, edge_index, p, rescale="inverse", num_nodes=n, generator=gen(2))
    assert torch.allclose(inv[inv > 0], alpha[inv > 0] / (1 - p))
    attn = torch.rand(5, 6, 30).softmax(-1)
    out = drop_attention_dense(attn, p, 3, "column", generator=gen(3))
    assert torch.allclose(out.sum(-1), torch.ones(5, 6), atol=1e-5) and (out == 0).any()


def test_all_dropped_rows_stay_unchanged_and_no_nan_at_p099():
    n, H = 30, 4
    edge_index = random_graph(n, 90)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        alpha = edge_softmax(edge_index, H, dtype=dtype)
        for mode in ("element", "column"):
            for rescale in ("normalized", "inverse"):
                out = drop_attention(alpha, edge_index, 0.99, 2, mode, rescale, num_nodes=n, generator=gen(0))
                assert out.dtype == dtype and torch.isfinite(out).all()
                # every row is either untouched (all dropped -> restored, or nothing dropped) or renormalised
                touched = scatter((out != alpha).float(), edge_index[1], dim=0, dim_size=n, reduce="max") > 0
                assert (~touched).any()  # at p = 0.99 most rows lose everything and are restored
                if rescale == "normalized":
                    sums = scatter(out.float(), edge_index[1], dim=0, dim_size=n, reduce="sum")
                    has_in = torch.bincount(edge_index[1], minlength=n) > 0
                    tol = 1e-5 if dtype == torch.float32 else 2e-2
                    assert torch.allclose(sums[has_in], torch.ones_like(sums[has_in]), atol=tol)
        attn = torch.rand(2, 3, 5, 4).softmax(-1).to(dtype)
        for mode in ("element", "column"):
            out = drop_attention_dense(attn, 0.99, 1, mode, generator=gen(1))
            assert out.dtype == dtype and torch.isfinite(out).all()
            tol = 1e-5 if dtype == torch.float32 else 2e-2
            assert torch.allclose(out.float().sum(-1), torch.ones(2, 3, 5), atol=tol)


def test_hand_checked_dense_row():
    # One row [0.1, 0.2, 0.3, 0.4]; find the seed's mask from the shared drawing routine and check the values.
    attn = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    for seed in range(50):
        dropped = draw_window_mask((1, 4), 0.5, 1, torch.device("cpu"), gen(seed))[0]
        if dropped.tolist() == [False, True, False, True]:
            break
    else:  # pragma: no cover
        pytest.fail("no seed gave the mask [keep, drop, keep, drop]")
    out = drop_attention_dense(attn, 0.5, generator=gen(seed))
    assert torch.allclose(out, torch.tensor([[0.25, 0.0, 0.75, 0.0]], dtype=torch.float64))
    out = drop_attention_dense(attn, 0.5, rescale="inverse", generator=gen(seed))
    assert torch.allclose(out, torch.tensor([[0.2, 0.0, 0.6, 0.0]], dtype=torch.float64))


# ----------------------------------------------------------------------------------------------------------------
# Gradients
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rescale", ["normalized", "inverse"])
@pytest.mark.parametrize("mode", ["element", "column"])
def test_gradcheck(mode, rescale):
    edge_index = random_graph(6, 20, seed=1)
    alpha = edge_softmax(edge_index, 2, dtype=torch.float64).requires_grad_()
    f = lambda a: drop_attention(a, edge_index, 0.4, 2, mode, rescale, num_nodes=6, generator=gen(3))  # noqa: E731
    assert torch.autograd.gradcheck(f, (alpha,))
    attn = torch.rand(2, 3, 5, dtype=torch.float64).softmax(-1).requires_grad_()
    f = lambda a: drop_attention_dense(a, 0.4, 2, mode, rescale, generator=gen(3))  # noqa: E731
    assert torch.autograd.gradcheck(f, (attn,))


def test_gradient_reaches_only_surviving_weights():
    edge_index = random_graph(10, 40, seed=2)
    alpha = edge_softmax(edge_index, 3).requires_grad_()
    out = drop_attention(alpha, edge_index, 0.5, rescale="inverse", num_nodes=10, generator=gen(0))
    out.backward(torch.ones_like(out))
    dropped = out == 0
    restored = out == alpha  # rows that lost every weight come back unchanged (gradient 1)
    survived = ~dropped & ~restored
    assert dropped.any() and restored.any() and survived.any()
    assert (alpha.grad[dropped] == 0).all()
    assert torch.equal(alpha.grad[restored], torch.ones_like(alpha.grad[restored]))
    assert torch.allclose(alpha.grad[survived], torch.full_like(alpha.grad[survived], 2.0))


# ----------------------------------------------------------------------------------------------------------------
# Module and bad input
# ----------------------------------------------------------------------------------------------------------------
def test_module_api():
    m = DropAttention(0.2, window=3, mode="column", rescale="inverse")
    assert repr(m) == "DropAttention(p=0.2, window=3, mode='column', rescale='inverse')"
    m.reset_parameters()
    assert list(m.parameters()) == [] and m.state_dict() == {}
    attn = torch.rand(2, 4, 9).softmax(-1)
    assert torch.equal(
        m(attn, generator=gen(1)), drop_attention_dense(attn, 0.2, 3, "column", "inverse", generator=gen(1))
    )
    ei = random_graph(9, 30)
    alpha = edge_softmax(ei, 2)
    assert torch.equal(
        m(alpha, ei, generator=gen(1)), drop_attention(alpha, ei, 0.2, 3, "column", "inverse", generator=gen(1))
    )
    assert graph_rma.DropAttention is DropAttention


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(p=1.0), "p"),
        (dict(p=-0.1), "p"),
        (dict(p=float("nan")), "p"),
        (dict(window=0), "window"),
        (dict(window=1.5), "window"),
        (dict(mode="row"), "mode"),
        (dict(rescale="softmax"), "rescale"),
    ],
)
def test_bad_options_raise_value_error(kwargs, name):
    args = dict(p=0.1, window=1, mode="element", rescale="normalized")
    args.update(kwargs)
    ei = random_graph(5, 10)
    with pytest.raises(ValueError, match=f"^{name}:"):
        DropAttention(**args)
    with pytest.raises(ValueError, match=f"^{name}:"):
        drop_attention(torch.rand(10, 2), ei, **args)
    with pytest.raises(ValueError, match=f"^{name}:"):
        drop_attention_dense(torch.rand(3, 3), **args)


def test_bad_shapes_raise_value_error():
    ei = random_graph(5, 10)
    with pytest.raises(ValueError, match="^alpha:"):
        drop_attention(torch.rand(11, 2), ei, 0.1)
    with pytest.raises(ValueError, match="^alpha:"):
        drop_attention(torch.rand(10, 2, 2), ei, 0.1)
    with pytest.raises(ValueError, match="^edge_index:"):
        drop_attention(torch.rand(10, 2), ei.t(), 0.1)
    with pytest.raises(ValueError, match="^edge_index:"):
        drop_attention(torch.rand(10, 2), ei.float(), 0.1)
    with pytest.raises(ValueError, match="^edge_index:"):
        drop_attention(torch.rand(10, 2), ei, 0.1, num_nodes=2)
    with pytest.raises(ValueError, match="^edge_index:"):
        drop_attention(torch.rand(10, 2), ei - 1, 0.1, num_nodes=5)
    with pytest.raises(ValueError, match="^num_nodes:"):
        drop_attention(torch.rand(10, 2), ei, 0.1, num_nodes=(5, 5, 5))
    with pytest.raises(ValueError, match="^attn:"):
        drop_attention_dense(torch.rand(4), 0.1)
    with pytest.raises(ValueError, match="^attn:"):
        drop_attention_dense(torch.ones(3, 3, dtype=torch.long), 0.1)
    # a 1-D alpha is one head
    out = drop_attention(torch.rand(10), ei, 0.3, num_nodes=5, generator=gen(0))
    assert out.shape == (10,)


def test_cached_edge_order_matches_uncached_and_follows_edge_changes():
    from graph_rma.dropattention.masks import _sparse_mask

    g = torch.Generator().manual_seed(0)
    N, E, H = 30, 200, 3
    src, dst = torch.randint(0, N, (E,), generator=g), torch.randint(0, N, (E,), generator=g)
    drop = DropAttention(0.4, window=3).train()

    def masks(s, d, with_cache):
        order = drop._order(s, d, N, N) if with_cache else None
        return _sparse_mask(s, d, H, N, N, 0.4, 3, "element", torch.Generator().manual_seed(5), order)

    assert torch.equal(masks(src, dst, True), masks(src, dst, False))
    assert drop._order_cache is not None
    cached = drop._order_cache[4]
    assert drop._order(src.clone(), dst.clone(), N, N) is cached  # same content, new tensors: cache hit
    src2 = src.flip(0)
    assert torch.equal(masks(src2, dst, True), masks(src2, dst, False))  # changed edges: recomputed
    assert drop._order(src2, dst, N, N) is not cached
    assert copy.deepcopy(drop)._order_cache is None


def test_dense_softmax_equals_drop_after_softmax_and_stays_finite_when_peaked():
    drop = DropAttention(0.4, window=2, mode="element").train()
    scores = torch.randn(2, 3, 5, 7, dtype=torch.float64, requires_grad=True)
    a = drop.dense_softmax(scores, generator=torch.Generator().manual_seed(1))
    b = drop_attention_dense(torch.softmax(scores, -1), 0.4, 2, "element", generator=torch.Generator().manual_seed(1))
    assert torch.allclose(a, b)
    # Very peaked rows (scores 0 and -95 in float32): when the peak is dropped the survivor's mass is denormal.
    # Renormalising after the softmax then has non-finite gradients; the survivor softmax does not.
    peaked = torch.tensor([[0.0, -95.0]]).repeat(200, 1).requires_grad_(True)
    drop = DropAttention(0.5).train()
    old = drop_attention_dense(torch.softmax(peaked, -1), 0.5, generator=torch.Generator().manual_seed(0))
    (grad_old,) = torch.autograd.grad((old * torch.arange(2.0)).sum(), peaked)
    assert not torch.isfinite(grad_old).all()
    out = drop.dense_softmax(peaked, generator=torch.Generator().manual_seed(0))
    (out * torch.arange(2.0)).sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(peaked.grad).all()
    assert torch.allclose(out.sum(-1), torch.ones(200))
    assert torch.allclose(out.detach(), old.detach())  # same weights
    assert torch.equal(drop.eval().dense_softmax(peaked), torch.softmax(peaked, -1))
