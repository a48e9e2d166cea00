"""RepulsiveGATConv / RepulsiveGATv2Conv: bit-identical to PyG's layers with extras off, DropAttention, heads as
particles, AttentionExplainer, torch.compile, bad input."""

import itertools

import pytest
import torch
from torch import Tensor
from torch_geometric.nn import GATConv, GATv2Conv
from torch_geometric.utils import scatter, to_torch_csc_tensor

from graph_rma import DropAttention, find_particle_groups
from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

N_SRC, N_DST, E = 10, 6, 40


def graph(seed=0, bipartite=False, edge_dim=None):
    g = torch.Generator().manual_seed(seed)
    n_dst = N_DST if bipartite else N_SRC
    edge_index = torch.stack([torch.randint(0, N_SRC, (E,), generator=g), torch.randint(0, n_dst, (E,), generator=g)])
    edge_attr = None if edge_dim is None else torch.randn(E, edge_dim, generator=g)
    if bipartite:
        x = (torch.randn(N_SRC, 5, generator=g), torch.randn(N_DST, 7, generator=g))
    else:
        x = torch.randn(N_SRC, 5, generator=g)
    return x, edge_index, edge_attr


def pair(stock_cls, ours_cls, *args, **kwargs):
    torch.manual_seed(0)
    stock = stock_cls(*args, **kwargs)
    ours = ours_cls(*args, **kwargs)
    ours.load_state_dict(stock.state_dict())
    return stock, ours


def run(conv, x, edge_index, edge_attr, seed=1, **kw):
    torch.manual_seed(seed)  # same dropout draws for both layers
    out, (ei, alpha) = conv(x, edge_index, edge_attr, return_attention_weights=True, **kw)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    grads = {n: p.grad.clone() for n, p in conv.named_parameters() if p.grad is not None}
    return out, ei, alpha, grads


def assert_same(stock, ours, x, edge_index, edge_attr, **kw):
    o1, e1, a1, g1 = run(stock, x, edge_index, edge_attr, **kw)
    o2, e2, a2, g2 = run(ours, x, edge_index, edge_attr, **kw)
    assert torch.equal(o1, o2)
    if e1.layout == torch.strided:
        assert torch.equal(e1, e2)
    else:
        assert torch.equal(e1.to_dense(), e2.to_dense())
    assert torch.equal(a1, a2)
    assert g1.keys() == g2.keys() and all(torch.equal(g1[k], g2[k]) for k in g1)


def grid():
    """A 2^(6-2) fractional factorial over (heads, concat, edge_dim, add_self_loops, residual, bias): 16 settings
    in which every pair of values of any two arguments occurs (an orthogonal array of strength 2)."""
    for a, b, c, d in itertools.product([0, 1], repeat=4):
        e, f = a ^ b ^ c, b ^ c ^ d
        yield dict(
            heads=[1, 3][a],
            concat=bool(b),
            edge_dim=[None, 2][c],
            add_self_loops=bool(d),
            residual=bool(e),
            bias=bool(f),
        )


@pytest.mark.parametrize("bipartite", [False, True])
@pytest.mark.parametrize("v2", [False, True])
def test_equivalence_with_stock_over_argument_grid(bipartite, v2):
    stock_cls, ours_cls = (GATv2Conv, RepulsiveGATv2Conv) if v2 else (GATConv, RepulsiveGATConv)
    for args in grid():
        fills = ["mean", 0.5, "add"] if (args["edge_dim"] and args["add_self_loops"]) else ["mean"]
        shares = [False, True] if v2 and not bipartite else [False]
        for fill_value, share in itertools.product(fills, shares):
            kw = dict(share_weights=share) if v2 else {}
            in_ch = (5, 7) if bipartite else 5
            stock, ours = pair(stock_cls, ours_cls, in_ch, 4, fill_value=fill_value, dropout=0.3, **args, **kw)
            # the layer really has the setting (no argument silently dropped), so the equivalence below covers it
            assert (ours.heads, ours.concat, ours.add_self_loops, ours.fill_value) == (
                args["heads"],
                args["concat"],
                args["add_self_loops"],
                fill_value,
            )
            assert (ours.lin_edge is not None, ours.res is not None, ours.bias is not None) == (
                bool(args["edge_dim"]),
                args["residual"],
                args["bias"],
            )
            x, edge_index, edge_attr = graph(args["heads"], bipartite, args["edge_dim"])
            assert ours(x, edge_index, edge_attr).shape == (
                N_DST if bipartite else N_SRC,
                4 * args["heads"] if args["concat"] else 4,
            )
            assert_same(stock, ours, x, edge_index, edge_attr)  # train mode, attention dropout 0.3
            stock.eval(), ours.eval()
            assert_same(stock, ours, x, edge_index, edge_attr)


def test_equivalence_non_bipartite_layer_with_pair_input_and_size():
    stock, ours = pair(GATConv, RepulsiveGATConv, 5, 4, heads=2)
    x, edge_index, _ = graph(3)
    xs = (x, x[:N_DST])
    ei = edge_index[:, edge_index[1] < N_DST]
    assert_same(stock, ours, xs, ei, None)
    assert_same(stock, ours, xs, ei, None, size=(N_SRC, N_DST))


@pytest.mark.parametrize("v2", [False, True])
def test_equivalence_with_torch_sparse_adjacency(v2):
    # torch_sparse (SparseTensor) is not installed here; PyG's torch.sparse CSC/CSR adjacency path is tested.
    stock_cls, ours_cls = (GATv2Conv, RepulsiveGATv2Conv) if v2 else (GATConv, RepulsiveGATConv)
    x, edge_index, _ = graph(5)
    edge_index = torch.unique(edge_index, dim=1)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    adj = to_torch_csc_tensor(edge_index, size=(N_SRC, N_SRC))
    for add_self_loops in (False, True):
        stock, ours = pair(stock_cls, ours_cls, 5, 4, heads=3, add_self_loops=add_self_loops)
        assert_same(stock, ours, x, adj.t(), None)
        if not add_self_loops:  # same result as the edge_index form
            ref = ours(x, edge_index)
            assert torch.allclose(ours(x, adj.t()), ref, atol=1e-6)
    # DropAttention reads sources and destinations from the sparse adjacency too
    conv = ours_cls(5, 4, heads=3, add_self_loops=False, drop_attention=DropAttention(0.3, window=2))
    torch.manual_seed(3)
    out, (adj_out, alpha) = conv(x, adj.t(), return_attention_weights=True)
    torch.manual_seed(3)
    out_ei, (ei, alpha_ei) = conv(x, edge_index, return_attention_weights=True)
    assert (alpha == 0).any() and torch.allclose(out, out_ei, atol=1e-6)


def test_state_dict_interchange():
    for stock_cls, ours_cls, kw in [
        (GATConv, RepulsiveGATConv, dict(edge_dim=2, residual=True)),
        (GATv2Conv, RepulsiveGATv2Conv, dict(edge_dim=2, share_weights=True)),
    ]:
        stock = stock_cls(5, 4, heads=3, **kw)
        ours = ours_cls(5, 4, heads=3, drop_attention=DropAttention(0.2), **kw)
        assert ours.state_dict().keys() == stock.state_dict().keys()
        ours.load_state_dict(stock.state_dict())  # strict
        torch.nn.init.normal_(next(ours.parameters()))
        stock.load_state_dict(ours.state_dict())  # strict, other way round
        assert all(torch.equal(a, b) for a, b in zip(stock.state_dict().values(), ours.state_dict().values()))


def test_lazy_in_channels():
    stock, ours = pair(GATConv, RepulsiveGATConv, -1, 4, heads=2)
    x, edge_index, _ = graph(0)
    torch.manual_seed(0)
    stock(x, edge_index)
    ours.load_state_dict(stock.state_dict())
    assert torch.equal(stock(x, edge_index), ours(x, edge_index))


# ----------------------------------------------------------------------------------------------------------------
# DropAttention inside the layer
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [RepulsiveGATConv, RepulsiveGATv2Conv])
@pytest.mark.parametrize("mode", ["element", "column"])
def test_drop_attention_replaces_dropout_and_returned_weights_are_after_it(cls, mode):
    x, edge_index, _ = graph(2)
    conv = cls(
        5,
        4,
        heads=3,
        dropout=0.9,
        add_self_loops=False,
        bias=False,
        drop_attention=DropAttention(0.3, window=2, mode=mode),
    )
    torch.manual_seed(0)
    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    # plain dropout (p = 0.9) is not applied: each destination's weights still sum to 1, some are dropped
    sums = scatter(alpha, ei[1], dim=0, dim_size=N_SRC, reduce="sum")
    has_in = torch.bincount(ei[1], minlength=N_SRC) > 0
    assert torch.allclose(sums[has_in], torch.ones_like(sums[has_in]), atol=1e-5)
    assert (alpha == 0).any()
    # the returned weights are the ones used for aggregation
    h = (conv.lin if cls is RepulsiveGATConv else conv.lin_l)(x).view(-1, 3, 4)
    manual = scatter(alpha.unsqueeze(-1) * h[ei[0]], ei[1], dim=0, dim_size=N_SRC, reduce="sum").view(N_SRC, -1)
    assert torch.allclose(out, manual, atol=1e-5)
    # eval: DropAttention off, same as the stock layer
    stock = (GATConv if cls is RepulsiveGATConv else GATv2Conv)(5, 4, heads=3, add_self_loops=False, bias=False)
    stock.load_state_dict(conv.state_dict())
    conv.eval()
    assert torch.equal(conv(x, edge_index), stock(x, edge_index))
    # gradients flow through the surviving weights
    conv.train()
    conv(x, edge_index).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in conv.parameters())


@pytest.mark.parametrize("rescale", ["normalized", "inverse"])
def test_layer_drop_attention_equals_drop_attention_on_the_stock_softmax(rescale):
    from graph_rma import drop_attention

    x, edge_index, _ = graph(4)
    drop = DropAttention(0.4, window=2, mode="element", rescale=rescale)
    stock, ours = pair(GATConv, RepulsiveGATConv, 5, 4, heads=3, add_self_loops=False)
    ours.drop_attention = drop
    _, (_, alpha_stock) = stock(x, edge_index, return_attention_weights=True)
    torch.manual_seed(7)
    expected = drop_attention(alpha_stock, edge_index, 0.4, 2, "element", rescale, num_nodes=N_SRC)
    torch.manual_seed(7)
    _, (_, alpha) = ours(x, edge_index, return_attention_weights=True)
    assert (alpha == 0).any()
    assert torch.allclose(alpha, expected, atol=1e-6)


def test_layer_drop_attention_is_finite_for_extreme_logits():
    # Survivors whose softmax weights underflow: the layer renormalises in logit space, so no NaN/Inf anywhere.
    x, edge_index, _ = graph(5)
    conv = RepulsiveGATConv(5, 4, heads=3, drop_attention=DropAttention(0.5, window=2))
    with torch.no_grad():
        conv.att_src.mul_(1e4)
        conv.att_dst.mul_(1e4)
    for seed in range(5):
        torch.manual_seed(seed)
        out, (_, alpha) = conv(x, edge_index, return_attention_weights=True)
        out.square().sum().backward()
        assert torch.isfinite(out).all() and torch.isfinite(alpha).all()
        assert all(torch.isfinite(p.grad).all() for p in conv.parameters())
        conv.zero_grad()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_drop_attention_half_precision(dtype):
    x, edge_index, _ = graph(6)
    for cls in (RepulsiveGATConv, RepulsiveGATv2Conv):
        for rescale in ("normalized", "inverse"):
            conv = cls(5, 4, heads=3, drop_attention=DropAttention(0.9, window=2, rescale=rescale)).to(dtype)
            out, (_, alpha) = conv(x.to(dtype), edge_index, return_attention_weights=True)
            out.float().sum().backward()
            assert out.dtype == alpha.dtype == dtype and torch.isfinite(out).all() and (alpha == 0).any()
            assert all(torch.isfinite(p.grad).all() for p in conv.parameters())


# ----------------------------------------------------------------------------------------------------------------
# Heads as particles
# ----------------------------------------------------------------------------------------------------------------
def test_each_particle_is_exactly_one_head():
    H, C = 3, 4
    conv = RepulsiveGATConv(5, C, heads=H, edge_dim=2)
    (group,) = find_particle_groups(conv)
    theta = group.theta()
    for h in range(H):
        expected = torch.cat(
            [
                conv.lin.weight[h * C : (h + 1) * C].flatten(),
                conv.att_src[0, h],
                conv.att_dst[0, h],
                conv.lin_edge.weight[h * C : (h + 1) * C].flatten(),
                conv.att_edge[0, h],
            ]
        )
        assert torch.equal(theta[h], expected.detach())
    # writing one particle's gradient touches only that head's slices
    for p in conv.parameters():
        p.grad = torch.zeros_like(p)
    value = torch.zeros_like(theta)
    value[1] = 1.0
    group.set_grad(value)
    assert (conv.lin.weight.grad[C : 2 * C] == 1).all() and conv.lin.weight.grad.sum() == C * 5
    assert (conv.att_src.grad[0, 1] == 1).all() and conv.att_src.grad.sum() == C
    assert conv.bias.grad.abs().sum() == 0

    bip = RepulsiveGATConv((5, 7), C, heads=H)
    (group,) = find_particle_groups(bip)
    for h in range(H):
        expected = torch.cat(
            [
                bip.lin_src.weight[h * C : (h + 1) * C].flatten(),
                bip.lin_dst.weight[h * C : (h + 1) * C].flatten(),
                bip.att_src[0, h],
                bip.att_dst[0, h],
            ]
        )
        assert torch.equal(group.theta()[h], expected.detach())

    v2 = RepulsiveGATv2Conv(5, C, heads=H)
    (group,) = find_particle_groups(v2)
    for h in range(H):
        rows = slice(h * C, (h + 1) * C)
        expected = torch.cat(
            [
                v2.lin_l.weight[rows].flatten(),
                v2.lin_l.bias[rows],
                v2.lin_r.weight[rows].flatten(),
                v2.lin_r.bias[rows],
                v2.att[0, h],
            ]
        )
        assert torch.equal(group.theta()[h], expected.detach())


# ----------------------------------------------------------------------------------------------------------------
# AttentionExplainer and torch.compile
# ----------------------------------------------------------------------------------------------------------------
def test_attention_explainer_sees_the_same_attention():
    from torch_geometric.explain import AttentionExplainer, Explainer
    from torch_geometric.nn.models import GAT

    import graph_rma

    torch.manual_seed(0)
    stock = GAT(5, 8, num_layers=2, out_channels=3, heads=2).eval()
    ours = graph_rma.convert(stock, inplace=False)
    assert isinstance(ours.convs[0], RepulsiveGATConv)
    x, edge_index, _ = graph(1)
    masks = []
    for model in (stock, ours):
        explainer = Explainer(
            model=model,
            algorithm=AttentionExplainer(),
            explanation_type="model",
            edge_mask_type="object",
            model_config=dict(mode="multiclass_classification", task_level="node", return_type="raw"),
        )
        masks.append(explainer(x, edge_index).edge_mask)
    assert masks[0].shape == (E,) and masks[0].abs().sum() > 0
    assert torch.equal(masks[0], masks[1])


@pytest.mark.slow
@pytest.mark.parametrize("cls", [RepulsiveGATConv, RepulsiveGATv2Conv])
def test_torch_compile_without_graph_breaks(cls):
    import torch._dynamo

    x, edge_index, _ = graph(0)
    torch._dynamo.reset()
    # training mode with DropAttention: no graph break
    conv = cls(5, 4, heads=2, add_self_loops=False, drop_attention=DropAttention(0.2, window=2))
    explanation = torch._dynamo.explain(conv)(x, edge_index)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation.break_reasons
    # extras off: fullgraph compilation gives the eager result
    conv = cls(5, 4, heads=2, add_self_loops=False).eval()
    compiled = torch.compile(conv, backend="eager", fullgraph=True)
    assert torch.allclose(compiled(x, edge_index), conv(x, edge_index), atol=1e-6)
    torch._dynamo.reset()


# ----------------------------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [RepulsiveGATConv, RepulsiveGATv2Conv])
def test_bad_input_raises_value_error_naming_the_argument(cls):
    conv = cls(5, 4, heads=2, edge_dim=3)
    x, edge_index, _ = graph(0)
    ea = torch.randn(E, 3)
    cases = [
        ("x", lambda: conv(torch.randn(N_SRC, 6), edge_index)),
        ("x", lambda: conv(torch.randn(N_SRC, 5, 2), edge_index)),
        ("edge_index", lambda: conv(x, edge_index.t())),
        ("edge_index", lambda: conv(x, edge_index[0])),
        ("edge_index", lambda: conv(x, edge_index.float())),
        ("edge_index", lambda: conv(x, edge_index + N_SRC)),
        ("edge_index", lambda: conv(x, edge_index - 1)),
        ("edge_attr", lambda: conv(x, edge_index, torch.randn(E, 2))),
        ("edge_attr", lambda: conv(x, edge_index, torch.randn(E + 1, 3))),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=f"^{name}"):
            call()
    conv(x, edge_index, ea)  # fine
    bip = cls((5, 7), 4, heads=2)
    with pytest.raises(ValueError, match=r"^x\[1\]"):
        bip((x, torch.randn(N_DST, 5)), edge_index[:, edge_index[1] < N_DST])
    with pytest.raises(ValueError, match="^edge_index"):  # destination beyond x_dst
        bip((x, torch.randn(N_DST, 7)), edge_index)
    with pytest.raises(ValueError, match="^heads"):
        cls(5, 4, heads=0)
    with pytest.raises(ValueError, match="^out_channels"):
        cls(5, 0, heads=2)
    with pytest.raises(ValueError, match="^drop_attention"):
        cls(5, 4, heads=2, drop_attention=0.1)
    if cls is RepulsiveGATv2Conv:
        with pytest.raises(ValueError, match="^edge_attr"):
            cls(5, 4, heads=2)(x, edge_index, ea)


def test_repr():
    assert repr(RepulsiveGATConv(5, 4, heads=2)) == "RepulsiveGATConv(5, 4, heads=2)"
    assert repr(RepulsiveGATv2Conv(5, 4, heads=2, drop_attention=DropAttention(0.1))) == (
        "RepulsiveGATv2Conv(5, 4, heads=2, drop_attention=DropAttention(p=0.1, window=1, mode='element', "
        "rescale='normalized'))"
    )


# ----------------------------------------------------------------------------------------------------------------
# Every input form the stock layers accept (issue 14)
# ----------------------------------------------------------------------------------------------------------------
def _inputs(form):
    """(constructor kwargs, forward args, forward kwargs) for one input form, on a 4-source / 2-destination
    bipartite graph or a 4-node graph."""
    from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, generator=g)
    x_dst = torch.randn(2, 5, generator=g)
    ei = torch.tensor([[0, 1, 2, 3, 3, 1], [1, 2, 3, 0, 1, 0]])
    bi = torch.tensor([[0, 1, 2, 3, 3], [0, 0, 1, 1, 0]])  # sources in [0, 4), destinations in [0, 2)
    ea = torch.randn(6, 3, generator=g)

    def adj(index, n_src, n_dst, layout):  # [num_dst, num_src], as PyG's adj.t()
        if layout == "coo":
            return to_torch_coo_tensor(index.flip(0), size=(n_dst, n_src))
        if layout == "csr":
            return to_torch_csr_tensor(index.flip(0), size=(n_dst, n_src))
        return to_torch_csc_tensor(index.flip(0), size=(n_dst, n_src))

    forms = {
        "edge_index": ({}, (x, ei), {}),
        "size": ({}, (x, ei), dict(size=(4, 4))),
        "coo": ({}, (x, adj(ei, 4, 4, "coo")), {}),
        "csr": ({}, (x, adj(ei, 4, 4, "csr")), {}),
        "csc": ({}, (x, adj(ei, 4, 4, "csc")), {}),  # the stock layer cannot add self-loops to CSC: both raise
        "csc_no_self_loops": (dict(add_self_loops=False), (x, adj(ei, 4, 4, "csc")), {}),
        "bipartite": (dict(add_self_loops=False), ((x, x_dst), bi), {}),
        "bipartite_in_channels": (dict(add_self_loops=False, in_channels=(5, 5)), ((x, x_dst), bi), {}),
        "bipartite_no_x_dst_size": (dict(add_self_loops=False), ((x, None), bi), dict(size=(4, 2))),
        "bipartite_no_x_dst": (dict(add_self_loops=False), ((x, None), bi), {}),
        # (x_src, None) with an edge list: the stock layer takes num_dst = num_src and crashes on more destinations
        "more_destinations_no_x_dst": (dict(add_self_loops=False), ((x[:2], None), bi.flip(0)), {}),
        "bipartite_no_x_dst_sparse": (dict(add_self_loops=False), ((x, None), adj(bi, 4, 2, "coo")), {}),
        "bipartite_no_x_dst_csr": (dict(add_self_loops=False), ((x, None), adj(bi, 4, 2, "csr")), {}),
        "bipartite_sparse": (dict(add_self_loops=False), ((x, x_dst), adj(bi, 4, 2, "csr")), {}),
        "edge_attr": (dict(edge_dim=3), (x, ei, ea), {}),
        "edge_attr_1d": (dict(edge_dim=1), (x, ei, ea[:, 0]), {}),
        "residual": (dict(residual=True), (x, ei), {}),
        "residual_bipartite": (dict(residual=True, add_self_loops=False), ((x, x_dst), bi), {}),
        "attention_weights": ({}, (x, ei), dict(return_attention_weights=True)),
        "attention_weights_sparse": ({}, (x, adj(ei, 4, 4, "csr")), dict(return_attention_weights=True)),
    }
    from torch_geometric.typing import WITH_TORCH_SPARSE

    if WITH_TORCH_SPARSE:  # pragma: no cover - not installed in the pinned environment
        from torch_geometric.typing import SparseTensor

        st = SparseTensor.from_edge_index(ei.flip(0), sparse_sizes=(4, 4))
        forms["sparse_tensor"] = (dict(add_self_loops=False), (x, st), {})
    return forms[form] if form in forms else None


_FORMS = [
    "edge_index",
    "size",
    "coo",
    "csr",
    "csc",
    "csc_no_self_loops",
    "bipartite",
    "bipartite_in_channels",
    "bipartite_no_x_dst_size",
    "bipartite_no_x_dst",
    "more_destinations_no_x_dst",
    "bipartite_no_x_dst_sparse",
    "bipartite_no_x_dst_csr",
    "bipartite_sparse",
    "edge_attr",
    "edge_attr_1d",
    "residual",
    "residual_bipartite",
    "attention_weights",
    "attention_weights_sparse",
    "sparse_tensor",
]


def _flat(out):
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if out is None:
        return []
    return [out.to_dense()]  # a SparseTensor


@pytest.mark.parametrize("form", _FORMS)
@pytest.mark.parametrize("stock_cls,ours_cls", [(GATConv, RepulsiveGATConv), (GATv2Conv, RepulsiveGATv2Conv)])
def test_every_stock_input_form_gives_the_stock_result(form, stock_cls, ours_cls):
    case = _inputs(form)
    if case is None:
        pytest.skip(f"{form}: torch_sparse is not installed")
    kwargs, args, fwd = case
    kwargs = dict(kwargs)
    in_channels = kwargs.pop("in_channels", 5)
    if stock_cls is GATv2Conv and "size" in fwd:
        pytest.skip("GATv2Conv.forward has no size argument")
    torch.manual_seed(0)
    stock = stock_cls(in_channels, 3, heads=2, **kwargs)
    ours = ours_cls(in_channels, 3, heads=2, **kwargs)
    ours.load_state_dict(stock.state_dict())
    try:
        expected = stock(*args, **fwd)
    except Exception:  # the stock layer cannot take it: ours raises too (a clear error is allowed)
        with pytest.raises(Exception):
            ours(*args, **fwd)
        return
    got = ours(*args, **fwd)
    exp, res = _flat(expected), _flat(got)
    assert len(exp) == len(res)
    for a, b in zip(exp, res):
        a = a.to_dense() if a.is_sparse or a.layout != torch.strided else a
        b = b.to_dense() if b.is_sparse or b.layout != torch.strided else b
        assert torch.equal(a, b)


def test_bipartite_sparse_adjacency_without_x_dst_reads_the_size_from_the_adjacency():
    # The case: conv((x_src, None), adj.t()) with adj.t() of shape [num_dst, num_src] = [2, 4].
    _, args, _ = _inputs("bipartite_no_x_dst_sparse")
    conv = RepulsiveGATConv(5, 3, heads=2, add_self_loops=False)
    assert conv(*args).shape == (2, 6)
    (x, _), adj = args
    with pytest.raises(ValueError, match="edge_index"):  # where the stock layer crashes, a clear error
        conv((x[:2], None), torch.tensor([[0, 0, 1, 1], [0, 1, 2, 3]]))
    with pytest.raises(ValueError, match="edge_index"):  # a wrong source count is still an error
        conv((x[:3], None), adj)


@pytest.mark.parametrize("stock_cls,ours_cls", [(GATConv, RepulsiveGATConv), (GATv2Conv, RepulsiveGATv2Conv)])
def test_drop_in_accepts_every_argument_of_the_installed_stock_signature(stock_cls, ours_cls):
    import inspect

    stock_sig = inspect.signature(stock_cls.__init__).parameters
    ours_sig = inspect.signature(ours_cls.__init__).parameters
    named = [n for n, p in stock_sig.items() if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for name in named:  # each argument by name, with the stock default where it has one
        assert name in ours_sig, name
        if stock_sig[name].default is not inspect.Parameter.empty:
            assert ours_sig[name].default == stock_sig[name].default, name
    # Non-default values of every argument survive convert (from_stock reads each one back).
    values = dict(
        in_channels=(5, 7),
        out_channels=3,
        heads=2,
        concat=False,
        negative_slope=0.3,
        dropout=0.25,
        add_self_loops=False,
        edge_dim=4,
        fill_value=0.5,
        bias=False,
        residual=True,
        share_weights=True,
    )
    unknown = [n for n in named if n not in values]
    assert not unknown, f"new stock argument(s) {unknown}: add a value here and check from_stock carries it"
    stock = stock_cls(**{n: values[n] for n in named})
    import graph_rma

    new = graph_rma.convert(stock)
    assert type(new) is ours_cls
    for name in named:
        expected = values[name]
        got = (new.bias is not None) if name == "bias" else getattr(new, name)
        assert got == expected, name


@pytest.mark.parametrize("cls", [RepulsiveGATConv, RepulsiveGATv2Conv])
def test_features_of_another_dtype_than_the_layer_are_named_in_one_line(cls):
    conv = cls(4, 2, heads=2)
    x, ei = torch.randn(5, 4, dtype=torch.float64), torch.tensor([[0, 1, 2], [1, 2, 3]])
    with pytest.raises(
        ValueError, match=r"^x: expected dtype torch.float32 \(the layer's parameters\), got torch.float64"
    ):
        conv(x, ei)
    with pytest.raises(ValueError, match=r"^x\[0\]: expected dtype torch.float32"):
        conv((x, x.float()), ei)
    assert conv.double()(x, ei).dtype == torch.float64  # the layer converted: fine
    with torch.autocast("cpu", dtype=torch.bfloat16):  # under autocast mixed dtypes are the point
        conv.float()(x.float().bfloat16(), ei)


@pytest.mark.slow
def test_a_compiled_layer_given_out_of_range_ids_says_so_in_one_line():
    from graph_rma.nn import RepulsiveGATConv

    conv = RepulsiveGATConv(4, 4, heads=2, lean=True, add_self_loops=False)
    compiled = torch.compile(conv, backend="eager", fullgraph=True)  # still one graph: the check is an op
    x = torch.randn(5, 4)
    assert compiled(x, torch.tensor([[0, 1], [1, 2]])).shape == (5, 8)
    with pytest.raises(RuntimeError, match=r"^edge_index: node ids out of range"):
        compiled(x, torch.tensor([[0, 1, 7], [1, 2, 3]]))
