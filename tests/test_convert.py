"""graph_rma.convert on PyG models: GATConv/GATv2Conv swapped for the repulsive layers, nothing else changes; a
sampler attached to Adam changes only head parameters."""

import copy

import pytest
import torch
from torch_geometric.nn import GATConv, GATv2Conv
from torch_geometric.nn.models import GAT

import graph_rma
from graph_rma import SVGD, DropAttention, find_particle_groups, svgd_direction
from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

N, E = 12, 50


def data(seed=0, edge_dim=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, 6, generator=g)
    edge_index = torch.randint(0, N, (2, E), generator=g)
    edge_attr = None if edge_dim is None else torch.randn(E, edge_dim, generator=g)
    y = torch.randint(0, 3, (N,), generator=g)
    return x, edge_index, edge_attr, y


def gat(v2=False, **kw):
    torch.manual_seed(0)
    return GAT(6, 8, num_layers=3, out_channels=3, heads=2, v2=v2, **kw)


@pytest.mark.parametrize("v2", [False, True])
def test_convert_gat_swaps_classes_and_keeps_outputs(v2):
    stock = gat(v2=v2, edge_dim=2, residual=True)
    x, edge_index, edge_attr, _ = data(edge_dim=2)
    stock_cls, ours_cls = (GATv2Conv, RepulsiveGATv2Conv) if v2 else (GATConv, RepulsiveGATConv)
    stock.eval()
    ref = stock(x, edge_index, edge_attr=edge_attr)
    original = copy.deepcopy(stock)
    ours = graph_rma.convert(stock, inplace=False)
    assert all(type(c) is stock_cls for c in stock.convs)  # inplace=False left the original alone
    assert all(type(c) is ours_cls for c in ours.convs)
    assert not any(type(m) in (GATConv, GATv2Conv) for m in ours.modules())
    assert [c.heads for c in ours.convs] == [c.heads for c in original.convs]
    assert [c.concat for c in ours.convs] == [True, True, False]
    assert all(c.residual and c.edge_dim == 2 for c in ours.convs)
    assert torch.equal(ours(x, edge_index, edge_attr=edge_attr), ref)
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), original.state_dict().values()))
    # training mode with dropout: the same random draws give the same result
    stock_d, ours_d = gat(v2=v2, dropout=0.4), None
    ours_d = graph_rma.convert(stock_d, inplace=False)
    torch.manual_seed(5)
    a = stock_d(x, edge_index)
    torch.manual_seed(5)
    assert torch.equal(ours_d(x, edge_index), a)


def test_convert_keeps_dtype_and_training_mode():
    model = gat().double()
    model.train()
    model.convs[1].eval()  # mixed modes are kept per module
    out = graph_rma.convert(model)
    assert out is model
    assert [c.training for c in model.convs] == [True, False, True]
    assert all(p.dtype == torch.float64 for p in model.parameters())
    assert all(p.device == torch.device("cpu") for p in model.parameters())
    x, edge_index, _, _ = data()
    model.eval()
    ref = graph_rma.convert(gat().double(), inplace=False).eval()  # fresh stock, same seed, same weights
    assert torch.equal(model(x.double(), edge_index), ref(x.double(), edge_index))
    bf = graph_rma.convert(gat().to(torch.bfloat16), inplace=False)
    assert all(p.dtype == torch.bfloat16 for p in bf.parameters())


def test_convert_single_layer_and_options():
    conv = GATConv(6, 4, heads=3, add_self_loops=False, negative_slope=0.1, fill_value=0.0, aggr="mean")
    new = graph_rma.convert(conv)
    assert type(new) is RepulsiveGATConv
    assert (new.negative_slope, new.add_self_loops, new.fill_value, new.aggr) == (0.1, False, 0.0, "mean")
    x, edge_index, _, _ = data()
    assert torch.equal(new(x, edge_index), conv(x, edge_index))
    # drop_attention option: each converted layer gets its own DropAttention module
    model = graph_rma.convert(gat(), drop_attention=DropAttention(0.2, window=2))
    drops = [c.drop_attention for c in model.convs]
    assert all(isinstance(d, DropAttention) and d.p == 0.2 and d.window == 2 for d in drops)
    assert len({id(d) for d in drops}) == 3
    model.eval()
    assert torch.equal(model(x, edge_index), gat().eval()(x, edge_index))  # DropAttention is off in eval
    with pytest.raises(ValueError, match="options"):
        graph_rma.convert(gat(), dropattention=0.1)
    with pytest.raises(ValueError, match="drop_attention"):
        graph_rma.convert(gat(), drop_attention=0.1)
    with pytest.raises(ValueError, match="model"):
        graph_rma.convert("not a model")


def test_converted_model_has_one_particle_per_head():
    model = graph_rma.convert(gat())
    groups = find_particle_groups(model)
    assert [g.name for g in groups] == ["convs.0", "convs.1", "convs.2"]
    for g in groups:
        conv, H, C = g.module, g.num_heads, g.module.out_channels
        theta = g.theta()
        for h in range(H):
            expected = torch.cat(
                [conv.lin.weight[h * C : (h + 1) * C].flatten(), conv.att_src[0, h], conv.att_dst[0, h]]
            )
            assert torch.equal(theta[h], expected.detach())


def _train(model, steps, sampler, x, edge_index, y, record=None):
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    if record is not None:  # registered first: sees the raw loss gradients before the sampler replaces them
        opt.register_step_pre_hook(
            lambda o, a, k: record.append({n: p.grad.clone() for n, p in model.named_parameters()})
        )
    if sampler is not None:
        sampler = SVGD(model, alpha=1.0, eps=1.0)
        sampler.attach(opt)
    after = []
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x, edge_index), y).backward()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        after.append(({n: p.grad.clone() for n, p in model.named_parameters()}, before))
    return after


def test_sampler_attached_to_adam_changes_only_head_parameters():
    x, edge_index, _, y = data()
    plain = graph_rma.convert(gat())
    rep = graph_rma.convert(gat())
    raw = []
    steps_plain = _train(plain, 1, None, x, edge_index, y)
    steps_rep = _train(rep, 1, True, x, edge_index, y, record=raw)

    groups = find_particle_groups(rep)
    head_params = {id(hp.param) for g in groups for hp in g.params}
    names = dict(rep.named_parameters())
    head_names = {n for n, p in names.items() if id(p) in head_params}
    other_names = set(names) - head_names
    assert head_names and other_names  # biases are not particles
    assert all("bias" in n for n in other_names)

    # First step: identical weights, so identical raw gradients; the sampler replaced exactly the head slices.
    grads0, theta0 = steps_rep[0]
    for n in names:
        assert torch.equal(raw[0][n], steps_plain[0][0][n])
    for n in other_names:
        assert torch.equal(grads0[n], raw[0][n])
    for g in groups:
        slices = lambda d: torch.cat([hp.heads(d[_name(rep, hp.param)]) for hp in g.params], dim=1)  # noqa: E731
        phi = svgd_direction(slices(theta0), slices(raw[0]), alpha=1.0)
        assert torch.allclose(slices(grads0), -phi, atol=1e-6)
        assert not torch.allclose(slices(grads0), slices(raw[0]))

    # After the step: non-head parameters are exactly where Adam alone puts them (Adam is elementwise) ...
    for n in other_names:
        assert torch.equal(names[n], dict(plain.named_parameters())[n])
    # ... and every head parameter took a different path.
    for n in head_names:
        assert not torch.equal(names[n], dict(plain.named_parameters())[n])


def _name(model, param):
    return next(n for n, p in model.named_parameters() if p is param)


def test_stock_and_converted_models_train_identically_under_the_sampler():
    # The head layouts are inherited: a sampler on the stock model and on the converted one does the same thing.
    x, edge_index, _, y = data(1)
    stock, ours = gat(), graph_rma.convert(gat())
    _train(stock, 2, True, x, edge_index, y)
    _train(ours, 2, True, x, edge_index, y)
    for (n1, p1), (n2, p2) in zip(stock.named_parameters(), ours.named_parameters()):
        assert n1 == n2 and torch.equal(p1, p2)


# ----------------------------------------------------------------------------------------------------------------
# convert never silently changes a model (issue 14)
# ----------------------------------------------------------------------------------------------------------------
def test_convert_keeps_requires_grad_and_reuses_the_parameter_objects():
    model = gat()
    model.convs[0].att_src.requires_grad_(False)
    before = {n: p for n, p in model.named_parameters()}
    graph_rma.convert(model)
    assert model.convs[0].att_src.requires_grad is False
    after = dict(model.named_parameters())
    assert after.keys() == before.keys() and all(after[n] is before[n] for n in before)


def test_optimizer_and_sampler_built_before_convert_keep_training_the_converted_layers():
    x, edge_index, _, y = data()
    ref = gat()
    model = gat()
    ref_opt = torch.optim.Adam(ref.parameters(), lr=0.01)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    SVGD(ref, alpha=1.0).attach(ref_opt)
    sampler = SVGD(model, alpha=1.0)
    sampler.attach(opt)
    graph_rma.convert(model)
    assert type(model.convs[0]) is RepulsiveGATConv
    heads = [p.param for g in sampler.groups for p in g.params]
    assert all(any(h is q for q in model.parameters()) for h in heads)  # the sampler moves the model's parameters
    for m, o in ((ref, ref_opt), (model, opt)):
        for _ in range(3):
            o.zero_grad()
            torch.nn.functional.cross_entropy(m(x, edge_index), y).backward()
            o.step()
    for (n, p), q in zip(ref.named_parameters(), model.parameters()):
        assert torch.equal(p, q), n
    assert not torch.equal(model.convs[0].lin.weight, gat().convs[0].lin.weight)  # it did train


def test_convert_keeps_hooks_shared_modules_and_modes():
    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = GATConv(6, 4, heads=2)
            self.b = self.a  # one module under two names
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x, edge_index):
            return self.head(self.b(self.a(x, edge_index)[:, :6], edge_index))

    model = Twice()
    calls = []
    pre = model.a.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    model.a.register_forward_hook(lambda m, args, out: calls.append("post"))
    model.a.lin.eval()  # a submodule in a mode of its own
    x, edge_index, _, _ = data()
    expected = model(x, edge_index)
    calls.clear()
    graph_rma.convert(model)
    assert type(model.a) is RepulsiveGATConv and model.a is model.b
    assert len(list(model.parameters())) == 6  # lin.weight, att_src, att_dst, bias + head
    assert torch.equal(model(x, edge_index), expected)
    assert calls == ["pre", "post", "pre", "post"]
    pre.remove()  # the handle from before convert still works
    calls.clear()
    model(x, edge_index)
    assert calls == ["post", "post"]
    assert model.a.training and not model.a.lin.training


def test_convert_keeps_device_and_dtype_of_each_parameter():
    model = gat().double()
    graph_rma.convert(model)
    assert all(p.dtype == torch.float64 for p in model.parameters())
    x, edge_index, _, _ = data()
    assert model(x.double(), edge_index).dtype == torch.float64


def test_drop_attention_without_p_takes_the_layers_dropout():
    model = graph_rma.convert(gat(dropout=0.0), drop_attention=DropAttention(mode="column"))
    assert all(c.attention_dropout_rate == 0.0 for c in model.convs)
    conv = graph_rma.convert(GATConv(6, 4, heads=2, dropout=0.6), drop_attention=DropAttention())
    assert conv.drop_attention.p is None and conv.attention_dropout_rate == 0.6 and conv.dropout == 0.6
    assert "attention_dropout_rate=0.6" in repr(conv)
    # It drops at 0.6: the same mask as DropAttention(0.6) from the same seed.
    explicit = RepulsiveGATConv(6, 4, heads=2, dropout=0.6, drop_attention=DropAttention(0.6))
    explicit.load_state_dict(conv.state_dict())
    x, edge_index, _, _ = data()
    torch.manual_seed(3)
    a = conv(x, edge_index)
    torch.manual_seed(3)
    b = explicit(x, edge_index)
    torch.manual_seed(3)
    c = RepulsiveGATConv(6, 4, heads=2, dropout=0.6, drop_attention=DropAttention(0.1))
    c.load_state_dict(conv.state_dict())
    assert torch.equal(a, b) and not torch.equal(a, c(x, edge_index))
    # Called outside a layer, a DropAttention without p says what it needs.
    with pytest.raises(ValueError, match="p"):
        DropAttention()(torch.rand(2, 3, 3))


def test_convert_with_an_explicit_rate_that_replaces_the_layers_dropout_warns():
    with pytest.warns(UserWarning, match=r"DropAttention\(p=0.1\) replaces the layer's attention dropout 0.6"):
        model = graph_rma.convert(gat(dropout=0.6), drop_attention=DropAttention(0.1))
    assert all(c.attention_dropout_rate == 0.1 for c in model.convs)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph_rma.convert(gat(dropout=0.6), drop_attention=DropAttention(0.6))  # same rate: silent
        graph_rma.convert(gat(dropout=0.0), drop_attention=DropAttention(0.1))  # no dropout to replace: silent


def test_convert_leaves_the_global_rng_alone_so_training_matches_stock():
    """Building the drop-in initialises throw-away weights; the random stream a user's training reads (dropout
    masks, later initialisations) must not move, or a converted model trains differently from the stock one."""
    from torch_geometric.nn.models import GAT

    def train(convert: bool):
        torch.manual_seed(0)
        model = GAT(12, 16, num_layers=2, out_channels=3, heads=4, dropout=0.6)
        if convert:
            model = graph_rma.convert(model)
        x, edge_index = torch.randn(10, 12), torch.randint(0, 10, (2, 40))
        y = torch.randint(0, 3, (10,))
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x, edge_index), y).backward()
            opt.step()
        return model.state_dict()

    stock, converted = train(False), train(True)
    assert list(stock) == list(converted)
    assert all(torch.equal(stock[k], converted[k]) for k in stock)


def test_a_model_without_attention_is_an_error_unless_strict_is_off():
    """convert() on a model with no attention layer used to return it unchanged without a word."""
    from torch_geometric.nn.models import GCN

    for model in (torch.nn.Linear(4, 2), GCN(4, 8, num_layers=2, out_channels=2)):
        with pytest.raises(
            ValueError,
            match=rf"^model: {type(model).__name__} holds no attention layer .*pass "
            r"strict=False",
        ) as e:
            graph_rma.convert(model)
        assert "\n" not in str(e.value)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        assert graph_rma.convert(model, strict=False) is model  # generic code: unchanged, as asked
        assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # a model that already holds drop-ins, or stock attention convert does not swap, has heads: no error
    assert graph_rma.convert(graph_rma.convert(gat())) is not None
    from torch_geometric.nn import TransformerConv

    conv = TransformerConv(4, 4, heads=2)
    assert graph_rma.convert(torch.nn.Sequential(conv))[0] is conv


def test_convert_keeps_a_plain_subclass_and_warns_about_one_that_overrides_forward():
    from torch_geometric.nn import GATConv

    class MyGAT(GATConv):
        def hello(self):
            return "hi"

    class Doubled(GATConv):
        def forward(self, x, edge_index, **kwargs):
            return 2 * super().forward(x, edge_index, **kwargs)

    torch.manual_seed(0)
    model = torch.nn.Sequential(MyGAT(4, 4, heads=2, dropout=0.3), Doubled(8, 2))
    x, ei = torch.randn(3, 4), torch.tensor([[0, 1], [1, 2]])
    before = model[0].eval()(x, ei)
    with pytest.warns(UserWarning, match=r"convert: 1 \(Doubled\) left unconverted: it overrides GATConv.forward"):
        graph_rma.convert(model, drop_attention=graph_rma.DropAttention())
    assert isinstance(model[0], MyGAT) and isinstance(model[0], graph_rma.nn.RepulsiveGATConv)
    assert model[0].hello() == "hi" and model[0].drop_attention is not None
    assert torch.equal(model[0].eval()(x, ei), before)  # same outputs until DropAttention trains
    assert type(model[1]) is Doubled
    first = model[0]
    with pytest.warns(UserWarning, match="Doubled"):
        graph_rma.convert(model)  # converting again changes nothing
    assert model[0] is first
