"""Memory-lean edge attention (graph_rma.nn.lean): equivalence with the default path and with stock PyG
over the input forms, gradients (gradcheck of every autograd function), dropout / DropAttention masks, attention
weights, state_dict, samplers, torch.compile, and that no [E, heads, channels] tensor is kept for backward."""

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GATv2Conv

from graph_rma import SVGD, DropAttention
from graph_rma.nn import GraphTransformerLayer, RepulsiveGATConv, RepulsiveGATv2Conv
from graph_rma.nn import lean as ea
from graph_rma.nn.lean import chunked, csr

N, E, FEAT, H, C = 30, 160, 12, 4, 5


@pytest.fixture(autouse=True, params=["csr", "chunked"])
def kernels(request, monkeypatch):
    """Every test twice: with the CSR kernels (CPU float32/float64) and with the chunked gather-scatter code that
    serves the other devices and dtypes and torch.compile."""
    if request.param == "chunked":  # the one place every lean path asks
        monkeypatch.setattr(csr, "csr_supported", lambda *tensors: False)
    return request.param


def graph(seed=0, num_src=N, num_dst=N, edges=E):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (edges,), generator=g)
    dst = torch.randint(0, num_dst, (edges,), generator=g)
    return torch.stack([src, dst]), g


def run(conv, *args, seed=1, **kwargs):
    """Forward (seeded: the same dropout / DropAttention draws), a loss using the output and, when returned, the
    attention weights, backward; returns output, weights (or None) and the parameter gradients."""
    conv.zero_grad()
    torch.manual_seed(seed)
    res = conv(*args, **kwargs)
    out, att = (res[0], res[1]) if isinstance(res, tuple) else (res, None)
    loss = (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum()
    if att is not None:
        loss = loss + (att[1] * torch.linspace(0, 1, att[1].numel()).view_as(att[1])).sum()
    loss.backward()
    return out, att, {k: p.grad.clone() for k, p in conv.named_parameters() if p.grad is not None}


def assert_same(a, b, atol=1e-5):
    out_a, att_a, grads_a = a
    out_b, att_b, grads_b = b
    torch.testing.assert_close(out_a, out_b, atol=atol, rtol=1e-5)
    if att_a is not None:
        ia, ib = att_a[0], att_b[0]
        if ia.is_sparse or ia.layout == torch.sparse_csr:
            torch.testing.assert_close(ia.to_dense(), ib.to_dense(), atol=1e-6, rtol=1e-5)
        else:
            assert torch.equal(ia, ib)
        torch.testing.assert_close(att_a[1], att_b[1], atol=1e-6, rtol=1e-5)
    assert grads_a.keys() == grads_b.keys()
    for k in grads_a:
        torch.testing.assert_close(grads_a[k], grads_b[k], atol=atol, rtol=1e-4, msg=k)


def pair(cls, **kw):
    torch.manual_seed(0)
    default = cls(FEAT, C, heads=H, **kw)
    lean = cls(FEAT, C, heads=H, lean=True, **kw)
    lean.load_state_dict(default.state_dict())
    return default, lean


# ----------------------------------------------------------------------------------------------------------------
# Layers: lean == default == stock PyG
# ----------------------------------------------------------------------------------------------------------------
CASES = [
    dict(),
    dict(dropout=0.5),
    dict(concat=False, dropout=0.3),
    dict(add_self_loops=False),
    dict(residual=True, dropout=0.2),
    dict(edge_dim=3, dropout=0.4),
    dict(edge_dim=3, fill_value=0.5, add_self_loops=True),
]


@pytest.mark.parametrize("cls,stock", [(RepulsiveGATConv, GATConv), (RepulsiveGATv2Conv, GATv2Conv)])
@pytest.mark.parametrize("kw", CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("attention", [False, True])
def test_lean_matches_default_and_stock_pyg(cls, stock, kw, attention):
    default, lean = pair(cls, **kw)
    ref = stock(FEAT, C, heads=H, **kw)
    ref.load_state_dict(default.state_dict())
    edge_index, g = graph()
    x = torch.randn(N, FEAT, generator=g)
    args = (x, edge_index) + ((torch.randn(E, 3, generator=g),) if "edge_dim" in kw else ())
    extra = {"return_attention_weights": True} if attention else {}
    for mode in ("train", "eval"):
        for m in (default, lean, ref):
            m.train(mode == "train")
        got = run(lean, *args, **extra)
        assert_same(run(default, *args, **extra), got)
        assert_same(run(ref, *args, **extra), got)


@pytest.mark.parametrize("cls", [RepulsiveGATConv, RepulsiveGATv2Conv])
def test_lean_sees_an_edge_index_changed_in_place(cls):
    """The CSR is kept with the edge index between calls; an in-place change of the index is seen."""
    default, lean = pair(cls)
    edge_index, g = graph()
    x = torch.randn(N, FEAT, generator=g)
    torch.testing.assert_close(lean(x, edge_index), default(x, edge_index))
    edge_index[0, :40] = (edge_index[0, :40] + 7) % N
    torch.testing.assert_close(lean(x, edge_index), default(x, edge_index))
    edge_index.data = edge_index.flip(0).contiguous()  # a new storage under the same tensor
    torch.testing.assert_close(lean(x, edge_index), default(x, edge_index))


def test_the_csr_cache_is_the_layers_own(kernels):
    """Each lean layer keeps its CSRs in ``csr_cache``; layers can share one; copies start empty."""
    import pickle

    from graph_rma.nn import GraphTransformerEncoder
    from graph_rma.nn.lean import CSRCache, share_csr_cache

    edge_index, g = graph()
    x = torch.randn(N, FEAT, generator=g)
    first, second = RepulsiveGATConv(FEAT, C, heads=H, lean=True), RepulsiveGATv2Conv(FEAT, C, heads=H, lean=True)
    assert isinstance(first.csr_cache, CSRCache) and first.csr_cache is not second.csr_cache
    first(x, edge_index)
    assert len(first.csr_cache) == (1 if kernels == "csr" else 0) and len(second.csr_cache) == 0
    for copied in (copy.deepcopy(first), pickle.loads(pickle.dumps(first))):
        assert len(copied.csr_cache) == 0 and copied.csr_cache.max_entries == first.csr_cache.max_entries
        torch.testing.assert_close(copied(x, edge_index), first(x, edge_index))
    first.reset_cache()
    assert len(first.csr_cache) == 0
    model = torch.nn.ModuleList([first, second])
    shared = share_csr_cache(model)
    assert first.csr_cache is shared and second.csr_cache is shared
    first(x, edge_index), second(x, edge_index)
    if kernels == "csr":  # both layers add the same self-loops: one edge index, one CSR
        assert len(shared) == 1 and len(next(iter(shared._entries.values())).csrs) == 1
    encoder = GraphTransformerEncoder(16, num_layers=3, heads=2, lean=True)
    assert len({id(layer.csr_cache) for layer in encoder.layers}) == 1


def test_a_layer_pickled_with_its_cache_under_the_0_1_0_name_loads_and_computes_the_same():
    """graph_rma 0.1.0 kept a lean layer's CSR cache as ``layout_cache``: unpickling such a layer (pickle hands
    ``__setstate__`` the saved attributes) gives a layer with its ``csr_cache`` that computes what it computed."""
    from graph_rma.nn.lean import CSRCache

    edge_index, g = graph()
    x = torch.randn(N, FEAT, generator=g)
    layers = (
        RepulsiveGATConv(FEAT, C, heads=H, lean=True),
        RepulsiveGATv2Conv(FEAT, C, heads=H, lean=True),
        GraphTransformerLayer(FEAT, H),
    )
    for layer in (m.eval() for m in layers):
        want = layer(x, edge_index)
        state = dict(vars(layer))
        state["layout_cache"] = state.pop("csr_cache")
        old = type(layer).__new__(type(layer))
        old.__setstate__(state)
        assert isinstance(old.csr_cache, CSRCache) and "layout_cache" not in vars(old)
        torch.testing.assert_close(old(x, edge_index), want, rtol=0, atol=0)
        assert isinstance(pickle.loads(pickle.dumps(layer)).csr_cache, CSRCache)


@pytest.mark.parametrize("heads", [9, 65])
def test_lean_gat_dropout_beyond_eight_heads(heads):
    """The fused GAT's dropout masks and results with more heads than one byte has bits: those of stock PyG."""
    torch.manual_seed(0)
    ref = GATConv(FEAT, 2, heads=heads, dropout=0.5).train()
    lean = RepulsiveGATConv(FEAT, 2, heads=heads, dropout=0.5, lean=True).train()
    lean.load_state_dict(ref.state_dict())
    edge_index, g = graph()
    x = torch.randn(N, FEAT, generator=g)
    assert_same(run(ref, x, edge_index), run(lean, x, edge_index))


@pytest.mark.parametrize("heads,bytes_per_edge", [(3, 1), (8, 1), (9, 2), (16, 2), (33, 5), (65, 9)])
def test_csr_dropout_bits_hold_the_drawn_mask(heads, bytes_per_edge):
    from graph_rma.nn.lean import per_head

    edge_index, _ = graph()
    lay = csr.edge_csr(edge_index[0], edge_index[1], N, N)
    torch.manual_seed(3)
    keep, _ = ea.functions.draw_dropout(E, heads, torch.zeros(1), 0.5)
    bits = per_head.pack_mask(keep, lay)
    assert bits.numel() * bits.element_size() == E * bytes_per_edge
    buffer = torch.empty(E, dtype=torch.uint8)
    for h in range(heads):  # head h's mask, in CSR order
        assert torch.equal(per_head._unpack(bits, h, buffer).bool(), keep[:, h][lay.perm.long()]), h
    assert per_head.pack_mask(None, lay) is None


@pytest.mark.parametrize("cls", [RepulsiveGATConv, RepulsiveGATv2Conv])
def test_lean_bipartite_and_sparse_inputs(cls):
    default, lean = pair(cls, dropout=0.3, add_self_loops=False)
    (default_sl, lean_sl) = pair(cls, dropout=0.3)
    edge_index, g = graph(num_src=N, num_dst=N // 2)
    x_src, x_dst = torch.randn(N, FEAT, generator=g), torch.randn(N // 2, FEAT, generator=g)
    for m in (default, lean, default_sl, lean_sl):
        m.train()
    assert_same(run(default, (x_src, x_dst), edge_index), run(lean, (x_src, x_dst), edge_index))
    # Self-loops on a bipartite pair: on the first min(N_src, N_dst) nodes, as in PyG.
    assert_same(run(default_sl, (x_src, x_dst), edge_index), run(lean_sl, (x_src, x_dst), edge_index))
    # A torch sparse adjacency [N_dst, N_src] (COO and CSR), attention weights returned as a sparse matrix too.
    square, _ = graph(seed=3)
    x = torch.randn(N, FEAT, generator=g)
    adj = torch.sparse_coo_tensor(square.flip(0), torch.ones(E), (N, N)).coalesce()
    for a in (adj, adj.to_sparse_csr()):
        assert_same(
            run(default_sl, x, a, return_attention_weights=True), run(lean_sl, x, a, return_attention_weights=True)
        )
    if cls is RepulsiveGATConv:  # (x_src, None) and an explicit size
        assert_same(
            run(default, (x_src, None), edge_index, size=(N, N // 2)),
            run(lean, (x_src, None), edge_index, size=(N, N // 2)),
        )


@pytest.mark.parametrize("cls", [RepulsiveGATConv, RepulsiveGATv2Conv])
@pytest.mark.parametrize(
    "drop",
    [
        DropAttention(0.3),
        DropAttention(0.3, window=3),
        DropAttention(0.3, mode="column"),
        DropAttention(0.3, rescale="inverse"),
    ],
    ids=["e", "w3", "column", "inverse"],
)
def test_lean_with_drop_attention(cls, drop):
    default, lean = pair(cls, drop_attention=copy.deepcopy(drop))
    lean.drop_attention = copy.deepcopy(drop)
    edge_index, g = graph()
    x = torch.randn(N, FEAT, generator=g)
    default.train(), lean.train()
    a = run(default, x, edge_index, return_attention_weights=True)
    b = run(lean, x, edge_index, return_attention_weights=True)
    assert_same(a, b)
    assert bool((b[1][1] == 0).any())  # some weights were dropped
    assert_same(run(default, x, edge_index), run(lean, x, edge_index))


def test_state_dict_repr_and_bad_options():
    default, lean = pair(RepulsiveGATConv, dropout=0.6)
    sd_a, sd_b = default.state_dict(), lean.state_dict()
    assert list(sd_a) == list(sd_b) and all(torch.equal(sd_a[k], sd_b[k]) for k in sd_a)
    assert list(sd_b) == list(GATConv(FEAT, C, heads=H, dropout=0.6).state_dict())
    assert "lean=True" in repr(lean)
    with pytest.raises(ValueError, match="lean"):
        RepulsiveGATConv(FEAT, C, lean=True, aggr="mean")
    with pytest.raises(ValueError, match="lean"):
        RepulsiveGATv2Conv(FEAT, C, lean="yes")
    with pytest.raises(ValueError, match="lean"):
        GraphTransformerLayer(8, heads=2, lean=1)


# ----------------------------------------------------------------------------------------------------------------
# Graph transformer
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("drop", [None, DropAttention(0.3)], ids=["dropout", "dropattention"])
def test_graph_transformer_lean_matches_default(drop):
    torch.manual_seed(0)
    default = GraphTransformerLayer(16, heads=4, dropout=0.0, attention_dropout=0.3, drop_attention=drop)
    lean = GraphTransformerLayer(16, heads=4, dropout=0.0, attention_dropout=0.3, drop_attention=drop, lean=True)
    lean.load_state_dict(default.state_dict())
    edge_index, g = graph()
    x = torch.randn(N, 16, generator=g)
    for mode in (True, False):
        default.train(mode), lean.train(mode)
        assert_same(
            run(default, x, edge_index, return_attention_weights=True),
            run(lean, x, edge_index, return_attention_weights=True),
        )


# ----------------------------------------------------------------------------------------------------------------
# The autograd functions: gradcheck in float64
# ----------------------------------------------------------------------------------------------------------------
def test_functions_gradcheck():
    from torch.autograd import gradcheck

    g = torch.Generator().manual_seed(0)
    n_src, n_dst, e = 6, 5, 20
    src = torch.randint(0, n_src, (e,), generator=g)
    dst = torch.randint(0, n_dst, (e,), generator=g)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.double, requires_grad=True)

    old = chunked.CHUNK_BYTES, chunked.MAX_CHUNKS
    chunked.CHUNK_BYTES, chunked.MAX_CHUNKS = 1, 10**9  # one edge per chunk: the chunk loop is exercised too
    try:
        assert gradcheck(lambda w, x: ea.edge_aggregate(w, x, src, dst, n_dst), (r(e, 2), r(n_src, 2, 3)))
        assert gradcheck(lambda s: ea.edge_softmax(s, dst, num_nodes=n_dst), (r(e, 2),))
        assert gradcheck(lambda a, b, c: ea.gat_scores(a, b, c, src, dst, 0.2), (r(n_src, 2), r(n_dst, 2), r(e, 2)))
        assert gradcheck(
            lambda xs, xd, att, at, w: ea.gatv2_scores(xs, xd, att, at, w, src, dst, 0.2),
            (r(n_src, 2, 3), r(n_dst, 2, 3), r(1, 2, 3), r(e, 4), r(6, 4)),
        )
        assert gradcheck(lambda q, k: ea.edge_dot(q, k, src, dst, 0.5), (r(n_dst, 2, 3), r(n_src, 2, 3)))
        assert gradcheck(lambda s, x: ea.softmax_aggregate(s, x, src, dst, n_dst), (r(e, 2), r(n_src, 2, 3)))
        # bipartite: source features, their attention vector, destination features and theirs, edge terms
        assert gradcheck(
            lambda x, a, xd, b, c: ea.gat_attention(x, a, xd, b, c, src, dst, n_dst, 0.2),
            (r(n_src, 2, 3), r(1, 2, 3), r(n_dst, 2, 3), r(1, 2, 3), r(e, 2)),
        )
        # one node set: both score terms read x (x_dst=None), whose gradient sums all three uses
        same_dst = torch.randint(0, n_src, (e,), generator=g)
        assert gradcheck(
            lambda x, a, b: ea.gat_attention(x, a, None, b, None, src, same_dst, n_src, 0.2),
            (r(n_src, 2, 3), r(1, 2, 3), r(1, 2, 3)),
        )

        # With dropout: the same mask in every call from the same seed; no destination term.
        def dropped(x, a):
            torch.manual_seed(5)
            return ea.gat_attention(x, a, None, None, None, src, dst, n_dst, 0.2, p=0.5)

        assert gradcheck(dropped, (r(n_src, 2, 3), r(1, 2, 3)))
    finally:
        chunked.CHUNK_BYTES, chunked.MAX_CHUNKS = old


# ----------------------------------------------------------------------------------------------------------------
# What backward keeps
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda lean: RepulsiveGATConv(16, 8, heads=8, dropout=0.6, lean=lean),
        lambda lean: RepulsiveGATConv(16, 8, heads=8, drop_attention=DropAttention(0.2), lean=lean),
        lambda lean: RepulsiveGATv2Conv(16, 8, heads=8, dropout=0.6, lean=lean),
        lambda lean: GraphTransformerLayer(64, heads=8, lean=lean),
    ],
    ids=["gat", "gat+dropattention", "gatv2", "transformer"],
)
def test_no_per_edge_feature_tensor_is_kept(make):
    n, e = 50, 2000  # E >> N: a kept [E, H, C] tensor stands out
    edge_index, g = graph(num_src=n, num_dst=n, edges=e)
    widths = []

    def pack(t):
        if t.dim() >= 1 and t.size(0) >= e:  # one row per edge (self-loops included)
            widths.append(t[0].numel())
        return t

    for lean in (False, True):
        widths.clear()
        layer = make(lean).train()
        x = torch.randn(n, 64 if isinstance(layer, GraphTransformerLayer) else 16, generator=g)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            layer(x, edge_index).sum().backward()
        if lean:  # at most [E, heads] (weights, masks, per-edge score terms) and [E] indices
            assert widths and max(widths) <= 8, widths
        else:  # the default path keeps [E, 8, 8] (or [E, 8, C / 8]) tensors
            assert max(widths) >= 64, widths


# ----------------------------------------------------------------------------------------------------------------
# Samplers and torch.compile
# ----------------------------------------------------------------------------------------------------------------
def test_sampler_step_same_as_default():
    edge_index, g = graph()
    x = torch.randn(N, FEAT, generator=g)
    y = torch.randint(0, 3, (N,), generator=g)
    params = []
    for lean in (False, True):
        torch.manual_seed(0)
        model = torch.nn.ModuleDict(
            {
                "c1": RepulsiveGATConv(FEAT, 4, heads=4, dropout=0.5, lean=lean),
                "c2": RepulsiveGATConv(16, 3, heads=2, concat=False, lean=lean),
            }
        )
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        SVGD(model, alpha=0.1).attach(opt)
        torch.manual_seed(1)
        for _ in range(2):
            opt.zero_grad()
            F.cross_entropy(model["c2"](F.elu(model["c1"](x, edge_index)), edge_index), y).backward()
            opt.step()
        params.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*params):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.slow  # torch.compile
@pytest.mark.parametrize(
    "make",
    [
        lambda: RepulsiveGATConv(FEAT, C, heads=H, dropout=0.3, add_self_loops=False, lean=True),
        lambda: RepulsiveGATv2Conv(
            FEAT, C, heads=H, add_self_loops=False, lean=True, drop_attention=DropAttention(0.2)
        ),
    ],
    ids=["gat", "gatv2+dropattention"],
)
def test_torch_compile_without_graph_breaks(make):
    torch._dynamo.reset()
    conv = make().train()
    edge_index, g = graph()
    x = torch.randn(N, FEAT, generator=g)
    explanation = torch._dynamo.explain(conv)(x, edge_index)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation.break_reasons
    conv.eval()
    compiled = torch.compile(conv, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, edge_index), conv(x, edge_index))


def test_a_lean_layer_with_dropattention_and_no_p_takes_the_layers_rate():
    import graph_rma
    from graph_rma.nn import RepulsiveGATConv

    x, ei = torch.randn(6, 4), torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]])
    outs = []
    for lean in (False, True):
        torch.manual_seed(0)
        conv = RepulsiveGATConv(4, 4, heads=2, dropout=0.2, lean=lean, drop_attention=graph_rma.DropAttention())
        assert conv.attention_dropout_rate == 0.2
        torch.manual_seed(1)
        outs.append(conv(x, ei))
    assert outs[1].shape == (6, 8)
    assert torch.allclose(outs[0], outs[1], atol=1e-5)  # the same mask from the same seed on both paths
