"""graph_rma.nn.lean.csr and .cache: the CSR of edges, its kernels against dense products on hand-made graphs,
and the CSR cache a layer owns."""

import pytest
import torch

from graph_rma.nn.lean import cache as caches
from graph_rma.nn.lean.cache import CSRCache
from graph_rma.nn.lean.csr import csr_supported, edge_csr, sddmm, segment_max, segment_sum, spmm, spmm_t


def dense(csr, values):
    """The ``[num_dst, num_src]`` matrix with ``values`` (CSR order) at the edges (duplicates summed)."""
    a = torch.zeros(csr.num_dst, csr.num_src, dtype=values.dtype)
    return a.index_put_((csr.row.long(), csr.col.long()), values, accumulate=True)


def test_csr_of_a_small_graph():
    # edges j -> i: 2->0, 0->1, 1->0, 2->1, 0->0 (edge ids 0..4)
    src, dst = torch.tensor([2, 0, 1, 2, 0]), torch.tensor([0, 1, 0, 1, 0])
    lay = edge_csr(src, dst, 3, 2)
    assert lay.perm.tolist() == [0, 2, 4, 1, 3]  # by destination, ties in edge order (stable)
    assert lay.row.tolist() == [0, 0, 0, 1, 1] and lay.crow.tolist() == [0, 3, 5]
    assert lay.col.tolist() == [2, 1, 0, 0, 2]
    # the transpose: rows are sources 0, 1, 2 (CSR positions 2, 3 | 1 | 0, 4)
    assert lay.perm_t.tolist() == [2, 3, 1, 0, 4] and lay.crow_t.tolist() == [0, 2, 3, 5]
    assert lay.col_t.tolist() == [0, 1, 0, 0, 1]
    assert lay.perm.dtype == torch.int32 and lay.col.dtype == torch.int32


def test_csr_with_self_loops_as_pyg_leaves_them():
    # edges 0->0, 2->1, 1->0, 2->2: the loops are dropped, then 0->0, 1->1, 2->2 appended: 2->1, 1->0, 0->0, 1->1, 2->2
    src, dst = torch.tensor([0, 2, 1, 2]), torch.tensor([0, 1, 0, 2])
    lay = edge_csr(src, dst, 3, 3, self_loops=3)
    assert lay.perm.tolist() == [1, 2, 0, 3, 4] and lay.row.tolist() == [0, 0, 1, 1, 2]
    assert lay.col.tolist() == [1, 0, 2, 1, 2] and lay.crow.tolist() == [0, 2, 4, 5]
    # and on a random graph with repeated edges and loops, the very CSR of PyG's edge index (bipartite: loops on
    # the first 4 nodes only)
    from torch_geometric.utils import add_self_loops, remove_self_loops

    g = torch.Generator().manual_seed(1)
    ei = torch.stack([torch.randint(0, 6, (40,), generator=g), torch.randint(0, 4, (40,), generator=g)])
    ref, _ = add_self_loops(remove_self_loops(ei)[0], num_nodes=4)
    got, want = edge_csr(ei[0], ei[1], 6, 4, self_loops=4), edge_csr(ref[0], ref[1], 6, 4)
    for name, a, b in zip(got._fields, got, want):
        assert (a == b) if isinstance(a, int) else torch.equal(a, b), name


def same_csr(a, b):
    return all((x == y) if isinstance(x, int) else torch.equal(x, y) for x, y in zip(a, b))


def test_cached_csr_lives_with_its_edge_index():
    import gc

    cache = CSRCache()
    ei = torch.tensor([[0, 2, 1, 2], [0, 1, 0, 2]])
    a = cache.get(ei, 3, 3, 3)
    assert cache.get(ei, 3, 3, 3) is a  # built once
    assert same_csr(a, edge_csr(ei[0], ei[1], 3, 3, self_loops=3))
    b = cache.get(ei, 3, 3)  # other self-loops (none): a CSR of its own
    assert b is not a and same_csr(b, edge_csr(ei[0], ei[1], 3, 3))
    assert cache.get(ei.clone(), 3, 3, 3) is not a  # another tensor, even with the same values
    ei[0, 1] = 0  # changed in place: rebuilt
    c = cache.get(ei, 3, 3, 3)
    assert c is not a and same_csr(c, edge_csr(ei[0], ei[1], 3, 3, self_loops=3))
    del ei, a, b, c
    gc.collect()
    assert len(cache) == 0  # gone with the tensors
    with torch.inference_mode():  # no version counter: not kept
        t = torch.tensor([[0, 1], [1, 0]])
        assert cache.get(t, 2, 2) is not cache.get(t, 2, 2) and len(cache) == 0
    # only the most recently used edge indexes keep theirs
    many = [torch.tensor([[0, 1], [1, 0]]) for _ in range(cache.max_entries + 2)]
    first, second = cache.get(many[0], 2, 2), cache.get(many[1], 2, 2)
    for t in many[2:]:
        cache.get(t, 2, 2)
        assert cache.get(many[0], 2, 2) is first  # used at every step: kept
    assert len(cache) == cache.max_entries
    assert cache.get(many[1], 2, 2) is not second  # the oldest: dropped, built again
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0


@pytest.mark.parametrize("how", ["data", "numpy", "dlpack", "storage", "set"])
def test_cached_csr_never_goes_stale_whatever_changes_the_edges(how):
    """Writes autograd does not see (through .data, a NumPy or DLPack view, the storage) still rebuild the CSR."""
    cache = CSRCache()
    ei = torch.tensor([[0, 2, 1, 2], [0, 1, 0, 2]])
    a = cache.get(ei, 3, 3, 3)
    version = ei._version
    if how == "data":
        ei.data[0, 1] = 0
    elif how == "numpy":
        ei.numpy()[1, 2] = 2
    elif how == "dlpack":
        torch.from_dlpack(torch.utils.dlpack.to_dlpack(ei))[0, 0] = 1
    elif how == "storage":
        view = torch.empty(0, dtype=ei.dtype).set_(ei.untyped_storage())
        view[3] = 0
    else:
        ei.data = torch.tensor([[1, 2, 1, 2], [0, 1, 0, 2]])
    assert ei._version == version or how == "set"  # invisible to the version counter
    b = cache.get(ei, 3, 3, 3)
    assert b is not a and same_csr(b, edge_csr(ei[0], ei[1], 3, 3, self_loops=3))
    assert cache.get(ei, 3, 3, 3) is b  # and kept again once the values stay


def test_cached_csrs_stay_within_their_byte_budget():
    edges = [torch.randint(0, 50, (2, 1000)) for _ in range(4)]
    probe = CSRCache()
    probe.get(edges[0], 50, 50)
    one = probe.nbytes
    assert one == caches._copy(edges[0]).nbytes + edge_csr(edges[0][0], edges[0][1], 50, 50).nbytes
    cache = CSRCache(max_bytes=2 * one + 1)
    for e in edges:
        cache.get(e, 50, 50)
    assert len(cache) == 2  # the two most recent fit the budget
    cache.max_bytes = 1
    kept = cache.get(edges[0], 50, 50)
    assert len(cache) == 1 and cache.get(edges[0], 50, 50) is kept  # the one in use stays


def test_kernels_match_dense_products():
    g = torch.Generator().manual_seed(0)
    n_src, n_dst, e, c = 7, 5, 30, 3
    src, dst = torch.randint(0, n_src, (e,), generator=g), torch.randint(0, n_dst, (e,), generator=g)
    dst[:2] = 4  # a repeated edge is summed, not deduplicated
    src[:2] = 6
    lay = edge_csr(src, dst, n_src, n_dst)
    v = torch.rand(e, generator=g, dtype=torch.double)
    x = torch.randn(n_src, c, generator=g, dtype=torch.double)
    gr = torch.randn(n_dst, c, generator=g, dtype=torch.double)
    a = dense(lay, v)
    torch.testing.assert_close(spmm(lay, v, x), a @ x)
    torch.testing.assert_close(spmm_t(lay, v, gr), a.t() @ gr)
    torch.testing.assert_close(sddmm(lay, gr, x), (gr[lay.row.long()] * x[lay.col.long()]).sum(-1))
    # into given buffers, whatever they held before (NaN included)
    out, out_t, buf = torch.full((n_dst, c), float("nan"), dtype=v.dtype), torch.full_like(x, float("nan")), v * 0
    assert spmm(lay, v, x, out) is out and spmm_t(lay, v, gr, buf, out_t) is out_t
    torch.testing.assert_close(out, a @ x)
    torch.testing.assert_close(out_t, a.t() @ gr)
    torch.testing.assert_close(sddmm(lay, gr, x, torch.full_like(v, float("nan"))), sddmm(lay, gr, x))
    per_dst = [v[lay.row == i] for i in range(n_dst)]
    torch.testing.assert_close(segment_sum(lay, v), torch.stack([p.sum() for p in per_dst]))
    expect_max = torch.stack([p.max() if p.numel() else torch.tensor(float("-inf"), dtype=v.dtype) for p in per_dst])
    torch.testing.assert_close(segment_max(lay, v), expect_max)


def test_empty_graph_and_support_rules():
    lay = edge_csr(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 3, 2)
    x = torch.randn(3, 4)
    assert torch.equal(spmm(lay, x.new_zeros(0), x), torch.zeros(2, 4))
    assert sddmm(lay, torch.randn(2, 4), x).numel() == 0
    assert torch.isinf(segment_max(lay, x.new_zeros(0))).all()
    assert csr_supported(torch.ones(2), torch.ones(2, dtype=torch.double))
    assert not csr_supported(torch.ones(2, dtype=torch.bfloat16))


@pytest.mark.slow  # a fresh Python process
def test_a_lean_layer_warns_nothing_in_a_fresh_process():
    """torch's one-time "Sparse CSR tensor support is in beta state" warning is absorbed on the first product, and
    later products warn nothing either (run with warnings as errors)."""
    import subprocess
    import sys

    code = (
        "import torch\nfrom graph_rma.nn import RepulsiveGATConv\n"
        "c = RepulsiveGATConv(8, 4, heads=2, lean=True)\nx, ei = torch.randn(20, 8), torch.randint(0, 20, (2, 60))\n"
        "for _ in range(3):\n    c(x, ei).sum().backward()\nprint('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_one_edge_index_keeps_the_csrs_of_its_most_recent_shapes_only():
    """Issue 67, item 9: one CSR per node count was kept without a cap (200 node counts, 200 CSRs)."""
    from graph_rma.nn.lean.cache import MAX_CSRS_PER_EDGE_INDEX

    cache = CSRCache()
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    kept = cache.get(ei, 3, 3)
    for n in range(4, 204):  # 200 other node counts
        cache.get(ei, n, n)
        assert cache.get(ei, 3, 3) is kept  # used at every step: kept
    csrs = next(iter(cache._entries.values())).csrs
    assert MAX_CSRS_PER_EDGE_INDEX == 4 and len(csrs) == 4
    assert list(csrs) == [(201, 201, 0, False), (202, 202, 0, False), (203, 203, 0, False), (3, 3, 0, False)]
    assert cache.nbytes == caches._copy(ei).nbytes + sum(c.nbytes for c in csrs.values())
    rebuilt = cache.get(ei, 4, 4)  # dropped long ago: built again, equal to a fresh one
    assert same_csr(rebuilt, edge_csr(ei[0], ei[1], 4, 4)) and len(csrs) == 4
