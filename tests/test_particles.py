import copy
import math

import pytest
import torch
from torch import nn
from torch_geometric.nn import GATConv, GATv2Conv, TransformerConv

import graph_rma
from graph_rma import (
    SGLD,
    SPOS,
    SVGD,
    find_particle_groups,
    median_bandwidth,
    rbf_kernel,
    spos_direction,
    svgd_direction,
)
from graph_rma.particles import sgld_direction


def direct_svgd(theta, grad, alpha, h):
    """Eq. (4) by a direct double loop, with the kernel gradient taken by autograd (h held constant)."""
    M = theta.size(0)
    phi = torch.zeros_like(theta)
    for i in range(M):
        for j in range(M):
            tj = theta[j].clone().requires_grad_(True)
            k = torch.exp(-((tj - theta[i]) ** 2).sum() / h)
            (dk,) = torch.autograd.grad(k, tj)
            phi[i] += -k.detach() * grad[j] + alpha * dk
    return phi / M


def paper_bandwidth(theta):
    M = theta.size(0)
    d = [float((theta[i] - theta[j]).norm()) for i in range(M) for j in range(i + 1, M)]
    d.sort()
    n = len(d)
    med = d[n // 2] if n % 2 else 0.5 * (d[n // 2 - 1] + d[n // 2])
    return med**2 / math.log(M)


def test_two_particles_by_hand():
    # theta_1 = (0, 0), theta_2 = (1, 0): med = 1, h = 1 / log 2, K_12 = exp(-log 2) = 1/2.
    theta = torch.tensor([[0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    h = median_bandwidth(theta)
    assert h.item() == pytest.approx(1 / math.log(2))
    K, rep = rbf_kernel(theta)
    assert torch.allclose(K, torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=torch.float64))
    # rep_1 = (2/h) (theta_1 - theta_2) K_12 = 2 log 2 * (-1, 0) * 1/2
    assert torch.allclose(rep, torch.tensor([[-math.log(2), 0.0], [math.log(2), 0.0]], dtype=torch.float64))
    g = torch.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=torch.float64)
    phi = svgd_direction(theta, g, alpha=0.5)
    expected_1 = 0.5 * (-(g[0] + 0.5 * g[1]) + 0.5 * torch.tensor([-math.log(2), 0.0], dtype=torch.float64))
    expected_2 = 0.5 * (-(0.5 * g[0] + g[1]) + 0.5 * torch.tensor([math.log(2), 0.0], dtype=torch.float64))
    assert torch.allclose(phi, torch.stack([expected_1, expected_2]))


def test_median_bandwidth_three_points_on_a_line():
    theta = torch.tensor([[0.0], [1.0], [3.0]], dtype=torch.float64)  # distances 1, 3, 2 -> median 2
    assert median_bandwidth(theta).item() == pytest.approx(4 / math.log(3))


@pytest.mark.parametrize("M", [2, 3])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_svgd_matches_direct_loop(M, alpha):
    g = torch.Generator().manual_seed(M)
    theta = torch.randn(M, 2, generator=g, dtype=torch.float64)
    grad = torch.randn(M, 2, generator=g, dtype=torch.float64)
    h = paper_bandwidth(theta)
    assert median_bandwidth(theta).item() == pytest.approx(h)
    assert torch.allclose(svgd_direction(theta, grad, alpha=alpha), direct_svgd(theta, grad, alpha, h))
    # A fixed bandwidth is used as given.
    assert torch.allclose(svgd_direction(theta, grad, alpha=alpha, h=0.7), direct_svgd(theta, grad, alpha, 0.7))


def test_spos_matches_direct_formula():
    theta = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    grad = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    alpha, beta, eps = 0.7, 50.0, 0.1
    phi = spos_direction(theta, grad, alpha=alpha, beta=beta, eps=eps, generator=torch.Generator().manual_seed(5))
    xi = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    ref = direct_svgd(theta, grad, alpha, paper_bandwidth(theta)) - grad / beta + math.sqrt(2 / (beta * eps)) * xi
    assert torch.allclose(phi, ref)


def test_sgld_direction_formula():
    grad = torch.randn(4, 3, dtype=torch.float64)
    phi = sgld_direction(grad, beta=10.0, eps=0.5, generator=torch.Generator().manual_seed(3))
    xi = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert torch.allclose(phi, -grad + math.sqrt(2 / 5.0) * xi)


def test_kernel_grad_false_gives_own_gradient_plus_repulsion():
    theta = torch.randn(3, 4, dtype=torch.float64)
    grad = torch.randn(3, 4, dtype=torch.float64)
    _, rep = rbf_kernel(theta)
    phi = svgd_direction(theta, grad, alpha=2.0, kernel_grad=False)
    assert torch.allclose(phi, -grad + 2.0 * rep / 3)


def test_liu_bandwidth():
    theta = torch.tensor([[0.0], [1.0], [3.0]], dtype=torch.float64)
    # Median over all 9 entries {0,0,0,1,1,2,2,3,3} is 1; h = 1 / log(4).
    K, _ = rbf_kernel(theta, h="liu")
    assert K[0, 1].item() == pytest.approx(math.exp(-1 * math.log(4)))


def test_single_particle_is_plain_gradient_bitwise():
    grad = torch.randn(1, 10)
    phi = svgd_direction(torch.randn(1, 10), grad, alpha=5.0)
    assert torch.equal(phi, -grad)


def test_identical_particles_no_nan():
    theta = torch.ones(4, 3)
    grad = torch.randn(4, 3)
    K, rep = rbf_kernel(theta)
    assert torch.equal(K, torch.ones(4, 4)) and torch.equal(rep, torch.zeros(4, 3))
    phi = svgd_direction(theta, grad, alpha=1.0)
    assert torch.allclose(phi, -grad.mean(0, keepdim=True).expand(4, 3))
    assert median_bandwidth(theta).item() == 1.0
    # More than half the pairs coincide: the largest distance is used, still finite and positive.
    theta = torch.zeros(5, 2)
    theta[4, 0] = 2.0
    assert median_bandwidth(theta).item() == pytest.approx(4 / math.log(5))


@pytest.mark.parametrize("scale", [1e-30, 1e-12, 1e12, 1e30])
def test_extreme_scales_are_finite_and_equivariant(scale):
    theta = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
    grad = torch.randn(6, 5, generator=torch.Generator().manual_seed(1))
    K1, rep1 = rbf_kernel(theta)
    K2, rep2 = rbf_kernel(theta * scale)
    assert torch.isfinite(K2).all() and torch.isfinite(rep2).all()
    assert torch.allclose(K1, K2, rtol=1e-4, atol=1e-6)
    assert torch.allclose(rep2 * scale, rep1, rtol=1e-4, atol=1e-5)
    assert torch.isfinite(svgd_direction(theta * scale, grad, alpha=1.0)).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_computed_in_float32(dtype):
    theta = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    grad = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    phi = svgd_direction(theta.to(dtype), grad.to(dtype), alpha=1.0)
    assert phi.dtype == dtype and torch.isfinite(phi).all()
    ref = svgd_direction(theta.to(dtype).float(), grad.to(dtype).float(), alpha=1.0)
    assert torch.allclose(phi.float(), ref, rtol=1e-2, atol=1e-2)
    K, _ = rbf_kernel(theta.to(dtype))
    assert K.dtype == torch.float32


def test_bad_inputs_raise_value_errors():
    with pytest.raises(ValueError, match="theta"):
        svgd_direction(torch.randn(3), torch.randn(3))
    with pytest.raises(ValueError, match="grad"):
        svgd_direction(torch.randn(3, 2), torch.randn(2, 2))
    with pytest.raises(ValueError, match="grad"):
        svgd_direction(torch.randn(3, 2), torch.tensor([[1.0, float("nan")]] * 3))
    with pytest.raises(ValueError, match="theta"):
        median_bandwidth(torch.randn(1, 2))
    with pytest.raises(ValueError, match="theta"):
        svgd_direction(torch.tensor([[0.0, float("nan")], [1.0, 2.0]]), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="theta"):
        rbf_kernel(torch.tensor([[0.0, float("inf")], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="h"):
        rbf_kernel(torch.randn(3, 2), h=-1.0)
    with pytest.raises(ValueError, match="beta"):
        spos_direction(torch.randn(3, 2), torch.randn(3, 2), beta=0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        rbf_kernel(torch.randn(3, 2), h="silverman")


def _toy_particles_run(alpha, steps=1000, eps=0.05, kernel_grad=True):
    """Particles in 2-D, target N(0, I) (U = |theta|^2 / 2), plain SGD with lr 1 on the sampler's gradients."""
    theta = nn.Parameter(torch.randn(8, 2, generator=torch.Generator().manual_seed(0)) * 3 + 5)
    for _ in range(steps):
        grad = theta.detach().clone()  # grad U
        phi = svgd_direction(theta.detach(), grad, alpha=alpha, kernel_grad=kernel_grad)
        with torch.no_grad():
            theta += eps * phi
    return torch.pdist(theta.detach()).mean().item()


@pytest.mark.slow
def test_repulsion_spreads_particles_while_gradient_descent_collapses():
    start = torch.pdist(torch.randn(8, 2, generator=torch.Generator().manual_seed(0)) * 3).mean().item()
    spread = _toy_particles_run(alpha=1.0)
    collapsed = _toy_particles_run(alpha=0.0, kernel_grad=False)  # plain gradient descent on each particle
    assert collapsed < 1e-6 * start  # every particle at the mode
    assert spread > 0.8  # SVGD approximates N(0, I): mean pairwise distance of N(0, I) samples is about 1.77
    print(f"start {start:.3f}, svgd {spread:.3f}, gd {collapsed:.2e}")


# ----------------------------------------------------------------------------------------------------------------
# Head layouts: each particle is exactly one head
# ----------------------------------------------------------------------------------------------------------------
def test_gatconv_particle_is_one_head():
    H, C, F = 3, 4, 5
    conv = GATConv(F, C, heads=H, edge_dim=2)
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
    # Not the authors' reshape [hidden, H*d] -> [hidden*d, H], which mixes heads.
    mixed = conv.lin.weight.detach().t().reshape(-1, H).t()
    assert not torch.equal(theta[:, : C * F], mixed)


def test_gatconv_set_grad_touches_only_that_head():
    H, C, F = 3, 2, 4
    conv = GATConv(F, C, heads=H)
    for p in conv.parameters():
        p.grad = torch.zeros_like(p)
    (group,) = find_particle_groups(conv)
    value = torch.zeros(H, group.dim)
    value[1] = 1.0
    group.set_grad(value)
    assert torch.equal(conv.lin.weight.grad[C : 2 * C], torch.ones(C, F))
    assert conv.lin.weight.grad[:C].abs().sum() == 0 and conv.lin.weight.grad[2 * C :].abs().sum() == 0
    assert torch.equal(conv.att_src.grad[0, 1], torch.ones(C)) and conv.att_src.grad[0, [0, 2]].abs().sum() == 0
    assert conv.bias.grad.abs().sum() == 0  # not a head parameter


def test_mha_particle_is_one_head_and_roles_select():
    E, H = 8, 2
    hd = E // H
    mha = nn.MultiheadAttention(E, H)
    (q,) = find_particle_groups(mha, roles={"query"})
    for h in range(H):
        expected = torch.cat(
            [mha.in_proj_weight[h * hd : (h + 1) * hd].flatten(), mha.in_proj_bias[h * hd : (h + 1) * hd]]
        )
        assert torch.equal(q.theta()[h], expected.detach())
    (o,) = find_particle_groups(mha, roles=["out"])
    assert torch.equal(o.theta()[1], mha.out_proj.weight[:, hd:].t().flatten().detach())
    (v,) = find_particle_groups(mha, roles=["value"])
    assert torch.equal(v.theta()[0, : hd * E], mha.in_proj_weight[2 * E : 2 * E + hd].flatten().detach())
    with pytest.raises(ValueError, match="roles"):
        find_particle_groups(mha, roles=["keys"])


def test_other_stock_layouts():
    conv = GATv2Conv(4, 3, heads=2)
    (g,) = find_particle_groups(conv)
    assert g.roles == ["att", "lin_l", "lin_r"]
    assert torch.equal(g.theta()[1, :12], conv.lin_l.weight[3:6].flatten().detach())
    conv = TransformerConv(4, 3, heads=2)
    (g,) = find_particle_groups(conv, roles={"key"})
    assert torch.equal(g.theta()[0], torch.cat([conv.lin_key.weight[:3].flatten(), conv.lin_key.bias[:3]]).detach())


def test_layer_selection_and_single_head_warning():
    import warnings

    model = nn.ModuleDict({"conv1": GATConv(4, 3, heads=4), "conv2": GATConv(12, 2, heads=1)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # searching the whole model skips the one-head layer without a word
        groups = find_particle_groups(model)
    assert [g.name for g in groups] == ["conv1"]
    with pytest.warns(UserWarning, match="conv2: 1 head"):  # naming it is a request: say why nothing happens
        assert find_particle_groups(model, layers=["conv2"]) == []
    assert [g.name for g in find_particle_groups(model, layers=["conv1"])] == ["conv1"]
    assert [g.name for g in find_particle_groups(model, layers=lambda n, m: n == "conv1")] == ["conv1"]
    with pytest.raises(ValueError, match="layers"):
        find_particle_groups(model, layers=["conv3"])
    with pytest.raises(ValueError, match="layers"):
        find_particle_groups(nn.Sequential(nn.Linear(2, 2)), layers=["0"])


def test_a_layer_given_twice_is_refused():
    """`SVGD(model, layers=[L, L])` (by name twice, or by name and as the module) made two particle groups of one
    layer and moved its heads twice per step."""
    import graph_rma

    model = nn.ModuleDict({"conv1": GATConv(4, 3, heads=4), "conv2": GATConv(12, 2, heads=4)})
    for layers, how in ((["conv1", "conv1"], "by name"), (["conv1", model["conv1"]], "as a module")):
        with pytest.raises(graph_rma.GraphRMAError, match=rf"^layers: 'conv1' is given twice \(again {how}\)"):
            graph_rma.SVGD(model, layers=layers)
    with pytest.raises(graph_rma.GraphRMAError, match="given twice"):
        find_particle_groups(model, layers=[model["conv2"], "conv1", "conv2"])
    assert [g.name for g in find_particle_groups(model, layers=["conv2", model["conv1"]])] == ["conv2", "conv1"]


# ----------------------------------------------------------------------------------------------------------------
# Samplers in training
# ----------------------------------------------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self, heads=4):
        super().__init__()
        self.conv = GATConv(6, 3, heads=heads)
        self.out = nn.Linear(3 * heads, 2)

    def forward(self, x, edge_index):
        return self.out(self.conv(x, edge_index).relu())


def _graph():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10, 6, generator=g)
    edge_index = torch.randint(0, 10, (2, 30), generator=g)
    y = torch.randint(0, 2, (10,), generator=g)
    return x, edge_index, y


def _train(model, sampler_factory=None, steps=5, opt_cls=torch.optim.Adam):
    x, edge_index, y = _graph()
    opt = opt_cls(model.parameters(), lr=0.01)
    if sampler_factory is not None:
        sampler_factory(model).attach(opt)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x, edge_index), y).backward()
        opt.step()
    return model


def test_single_head_eps_one_is_plain_training_bit_for_bit():
    torch.manual_seed(0)
    base = Net(heads=1)
    plain = _train(copy.deepcopy(base))
    forced = _train(copy.deepcopy(base), lambda m: SVGD(m, alpha=3.0, eps=1.0, min_heads=1))
    with pytest.warns(UserWarning, match="head"):  # strict=False: a sampler that does nothing, with a warning
        skipped = _train(copy.deepcopy(base), lambda m: SPOS(m, alpha=3.0, eps=1.0, beta=1.0, strict=False))
    for a, b, c in zip(plain.parameters(), forced.parameters(), skipped.parameters()):
        assert torch.equal(a, b) and torch.equal(a, c)
    with pytest.raises(ValueError, match="holds no multi-head attention layer to sample .*strict=False"):
        SPOS(copy.deepcopy(base), alpha=3.0)  # by default a sampler with nothing to sample is an error


def test_sampler_attached_to_adam_changes_only_head_parameters():
    torch.manual_seed(0)
    base = Net(heads=4)
    x, edge_index, y = _graph()
    model = copy.deepcopy(base)
    nn.functional.cross_entropy(model(x, edge_index), y).backward()
    before = {n: p.grad.clone() for n, p in model.named_parameters()}
    sampler = SVGD(model, alpha=1.0, eps=0.5)
    sampler.step()
    head = {"conv.lin.weight", "conv.att_src", "conv.att_dst"}
    for n, p in model.named_parameters():
        if n in head:
            assert not torch.equal(p.grad, before[n]), n
        else:
            assert torch.equal(p.grad, before[n]), n
    # Through Adam: the sampler is applied before every step, and removable.
    plain = _train(copy.deepcopy(base))
    svgd = _train(copy.deepcopy(base), lambda m: SVGD(m, alpha=1.0, eps=0.5))
    assert not torch.equal(plain.conv.lin.weight, svgd.conv.lin.weight)
    assert not torch.equal(plain.conv.att_src, svgd.conv.att_src)
    m = copy.deepcopy(base)
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    handle = SVGD(m).attach(opt)
    handle.remove()
    for _ in range(5):
        opt.zero_grad()
        nn.functional.cross_entropy(m(x, edge_index), y).backward()
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), m.parameters()))


def test_sampler_gradient_equals_minus_eps_phi():
    torch.manual_seed(0)
    model = Net(heads=3)
    x, edge_index, y = _graph()
    nn.functional.cross_entropy(model(x, edge_index), y).backward()
    (group,) = find_particle_groups(model)
    theta, grad = group.theta(), group.grad()
    SVGD(model, alpha=0.5, eps=0.25).step()
    assert torch.allclose(group.grad(), -0.25 * svgd_direction(theta, grad, alpha=0.5))


def test_spos_noise_reproducible_and_resumable():
    torch.manual_seed(0)
    base = Net(heads=4)
    a = _train(copy.deepcopy(base), lambda m: SPOS(m, alpha=0.1, eps=1.0, beta=100.0, seed=7))
    b = _train(copy.deepcopy(base), lambda m: SPOS(m, alpha=0.1, eps=1.0, beta=100.0, seed=7))
    c = _train(copy.deepcopy(base), lambda m: SPOS(m, alpha=0.1, eps=1.0, beta=100.0, seed=8))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.conv.lin.weight, c.conv.lin.weight)
    # state_dict continues the noise sequence exactly.
    m = copy.deepcopy(base)
    s1 = SGLD(m, eps=1.0, beta=10.0, seed=3)
    (g,) = s1.groups
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    s1.step()
    state = s1.state_dict()
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    s1.step()
    expected = g.grad().clone()
    s2 = SGLD(m, eps=1.0, beta=10.0, seed=3)
    s2.load_state_dict(state)
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    s2.step()
    assert torch.equal(g.grad(), expected)


def test_sampler_rejects_non_finite_gradients():
    model = Net(heads=2)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    model.conv.att_src.grad[0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match="att_src"):
        SVGD(model).step()
    with pytest.raises(ValueError, match="eps"):
        SVGD(model, eps=0)
    with pytest.raises(ValueError, match="optimizer"):
        SVGD(model).attach("adam")


def test_sampler_on_multihead_attention_and_repr():
    mha = nn.MultiheadAttention(8, 4)
    s = SPOS(mha, alpha=0.1, eps=0.5, beta=10.0, roles=["query", "key"])
    assert "SPOS" in repr(s) and "4x" in repr(s)
    x = torch.randn(5, 2, 8)
    out, _ = mha(x, x, x)
    out.sum().backward()
    s.step()
    assert torch.isfinite(mha.in_proj_weight.grad).all()
    # The value rows were not particles: their gradient is untouched by the sampler.
    ref = nn.MultiheadAttention(8, 4)
    ref.load_state_dict(mha.state_dict())
    out, _ = ref(x, x, x)
    out.sum().backward()
    assert torch.equal(ref.in_proj_weight.grad[16:], mha.in_proj_weight.grad[16:])
    assert not torch.equal(ref.in_proj_weight.grad[:16], mha.in_proj_weight.grad[:16])


def test_public_names():
    """``graph_rma``'s public names are exactly these, and each is the object defined in its home module."""
    from graph_rma import _errors, dropattention, variants
    from graph_rma.nn import conversion
    from graph_rma.particles import kernel, layouts, samplers

    home = {
        "GraphRMAError": _errors.GraphRMAError,
        "SVGD": samplers.SVGD,
        "SPOS": samplers.SPOS,
        "SGLD": samplers.SGLD,
        "median_bandwidth": kernel.median_bandwidth,
        "rbf_kernel": kernel.rbf_kernel,
        "svgd_direction": kernel.svgd_direction,
        "spos_direction": kernel.spos_direction,
        "HeadParam": layouts.HeadParam,
        "ParticleGroup": layouts.ParticleGroup,
        "find_particle_groups": layouts.find_particle_groups,
        "register_head_layout": layouts.register_head_layout,
        "convert": conversion.convert,
        "register_conversion": conversion.register_conversion,
        "DropAttention": dropattention.DropAttention,
        "drop_attention": dropattention.drop_attention,
        "drop_attention_dense": dropattention.drop_attention_dense,
        "Variant": variants.Variant,
        "parse_variant": variants.parse_variant,
        "make_sampler": variants.make_sampler,
        "VariantSetup": variants.VariantSetup,
        "apply_variant": variants.apply_variant,
        "make_drop_attention": variants.make_drop_attention,
        "regularization_loss": variants.regularization_loss,
    }
    assert sorted(graph_rma.__all__) == sorted(home)
    for name, obj in home.items():
        assert getattr(graph_rma, name) is obj, name
    assert graph_rma.SVGD.__module__ == "graph_rma.particles.samplers"


# ----------------------------------------------------------------------------------------------------------------
# PyTorch's semantics kept (issue 14): frozen parameters, attach/detach, arguments, bounded repulsion
# ----------------------------------------------------------------------------------------------------------------
def _step_once(model, opt):
    x, edge_index, y = _graph()
    opt.zero_grad()
    nn.functional.cross_entropy(model(x, edge_index), y).backward()
    opt.step()


def test_frozen_parameter_is_never_touched():
    torch.manual_seed(0)
    model = Net(heads=4)
    model.conv.att_src.requires_grad_(False)
    frozen = model.conv.att_src.detach().clone()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    SVGD(model, alpha=1.0).attach(opt)
    lin = model.conv.lin.weight.detach().clone()
    for _ in range(3):
        _step_once(model, opt)
    assert model.conv.att_src.grad is None
    assert torch.equal(model.conv.att_src, frozen)
    assert not torch.equal(model.conv.lin.weight, lin)  # the trainable slices still move
    # The particle is the heads' trainable slices: the same as a sampler over the other roles only.
    a, b = Net(heads=4), Net(heads=4)
    b.load_state_dict(a.state_dict())
    a.conv.att_src.requires_grad_(False)
    for m, roles in ((a, None), (b, ["lin", "att_dst"])):
        opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1)
        SVGD(m, alpha=1.0, roles=roles).attach(opt)
        _step_once(m, opt)
    assert torch.equal(a.conv.lin.weight, b.conv.lin.weight) and torch.equal(a.conv.att_dst, b.conv.att_dst)
    # A layer whose head slices are all frozen is left alone.
    c = Net(heads=4)
    for p in c.conv.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD([p for p in c.parameters() if p.requires_grad], lr=0.1)
    SVGD(c).attach(opt)
    _step_once(c, opt)
    assert all(p.grad is None for p in c.conv.parameters())


def test_attach_twice_or_two_samplers_on_the_same_parameters_raise_and_detach():
    model = Net(heads=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    s = SVGD(model)
    s.attach(opt)
    with pytest.raises(ValueError, match="already attached"):
        s.attach(opt)
    other = SVGD(model, roles=["att_src"])
    with pytest.raises(ValueError, match="att_src.*already sampled"):
        other.attach(torch.optim.SGD(model.parameters(), lr=0.1))
    s.detach()
    handle = other.attach(opt)  # free again once detached
    handle.remove()
    s.attach(opt)
    # After detach() the optimizer is plain again.
    s.detach(opt)
    ref = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    _step_once(model, opt)
    _step_once(ref, ref_opt)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), ref.parameters()))


def test_one_sampler_on_two_optimizers_transforms_each_gradient_once():
    torch.manual_seed(0)
    base = Net(heads=4)
    single = copy.deepcopy(base)
    opt = torch.optim.SGD(single.parameters(), lr=0.05)
    SVGD(single, alpha=1.0).attach(opt)
    split = copy.deepcopy(base)
    # The head's lin slices in one optimizer, its attention vectors and the rest in another.
    opt_a = torch.optim.SGD([split.conv.lin.weight], lr=0.05)
    opt_b = torch.optim.SGD([p for n, p in split.named_parameters() if n != "conv.lin.weight"], lr=0.05)
    s = SVGD(split, alpha=1.0)
    s.attach(opt_a)
    s.attach(opt_b)
    x, edge_index, y = _graph()
    for _ in range(3):
        _step_once(single, opt)
        opt_a.zero_grad(), opt_b.zero_grad()
        nn.functional.cross_entropy(split(x, edge_index), y).backward()
        opt_a.step(), opt_b.step()
    for (n, p), q in zip(single.named_parameters(), split.parameters()):
        assert torch.allclose(p, q, atol=1e-7), n
    # A manual step() after the hook does nothing until the next backward.
    g = split.conv.lin.weight.grad.clone()
    s.step()
    assert torch.equal(split.conv.lin.weight.grad, g)


def test_sampler_arguments_checked_at_construction():
    model = Net(heads=2)
    for bad in ("abc", None, float("nan"), True):
        with pytest.raises(ValueError, match="alpha"):
            SVGD(model, alpha=bad)
    with pytest.raises(ValueError, match="alpha.*allow_attraction"):
        SVGD(model, alpha=-0.5)
    with pytest.raises(ValueError, match="alpha"):
        svgd_direction(torch.randn(3, 2), torch.randn(3, 2), alpha=-1.0)
    assert SVGD(model, alpha=-0.5, allow_attraction=True).alpha == -0.5
    for bad in ("silverman", -1.0, 0.0, float("inf")):
        with pytest.raises(ValueError, match="bandwidth"):
            SVGD(model, bandwidth=bad)
    with pytest.raises(ValueError, match="beta"):
        SPOS(model, beta="x")
    with pytest.raises(ValueError, match="generator"):
        SPOS(model).load_state_dict({})
    with pytest.raises(ValueError, match="generator"):
        SPOS(model).load_state_dict({"generator": 3})


def _near_identical_gatconv(noise=None, scale=1.0, heads=4):
    torch.manual_seed(0)
    conv = GATConv(8, 4, heads=heads)
    with torch.no_grad():
        w = conv.lin.weight.view(heads, 4, 8)
        params = [(w, 0), (conv.att_src, 1), (conv.att_dst, 1)]
        for t, axis in params:
            if noise is not None:
                t.copy_(t.narrow(axis, 0, 1) + noise * torch.randn_like(t))
            t.mul_(scale)
    return conv


def _one_sgd_step(conv, lr=0.01, **kwargs):
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    opt = torch.optim.SGD(conv.parameters(), lr=lr)
    sampler = SVGD(conv, **kwargs)
    sampler.attach(opt)
    before = conv.lin.weight.detach().clone()
    conv(x, edge_index).pow(2).mean().backward()
    opt.step()
    return (conv.lin.weight.detach() - before).abs().max().item(), sampler


@pytest.mark.parametrize("case", [dict(noise=1e-7), dict(scale=1e-7), dict(scale=1e-20)])
def test_repulsion_stays_bounded_for_nearly_identical_or_tiny_heads(case):
    moved, sampler = _one_sgd_step(_near_identical_gatconv(**case))
    assert moved < 1e-2, moved  # the paper's equation moves entries by about 2e2 (noise 1e-7) to 5e15 (scale 1e-20)
    assert sampler.limited_steps == 1
    # Without the step limit the equation blows up, as the paper's Eq. (4) gives it.
    unguarded, _ = _one_sgd_step(_near_identical_gatconv(**case), max_repulsive_step=None)
    assert unguarded > 1.0


def test_well_separated_heads_follow_the_paper_exactly():
    conv = _near_identical_gatconv()  # random init: well separated
    moved, sampler = _one_sgd_step(conv)
    ref, _ = _one_sgd_step(_near_identical_gatconv(), max_repulsive_step=None)
    assert sampler.limited_steps == 0 and moved == ref


@pytest.mark.slow
def test_identical_heads_warn_once_and_never_nan():
    conv = _near_identical_gatconv(noise=0.0, heads=16)
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    y = torch.randn(6, 64, generator=torch.Generator().manual_seed(2))
    opt = torch.optim.SGD(conv.parameters(), lr=0.01)
    SVGD(conv, alpha=10.0, eps=100.0).attach(opt)
    with pytest.warns(UserWarning, match="identical heads.*SPOS") as record:
        for _ in range(1000):
            opt.zero_grad()
            (conv(x, edge_index) - y).pow(2).mean().backward()
            opt.step()
    assert sum("identical heads" in str(w.message) for w in record) == 1
    assert all(torch.isfinite(p).all() for p in conv.parameters())
    # SPOS separates them (no warning), and stays finite too.
    conv = _near_identical_gatconv(noise=0.0, heads=16)
    opt = torch.optim.SGD(conv.parameters(), lr=0.01)
    SPOS(conv, alpha=10.0, eps=100.0, beta=1e9).attach(opt)
    for _ in range(200):
        opt.zero_grad()
        (conv(x, edge_index) - y).pow(2).mean().backward()
        opt.step()
    heads = conv.lin.weight.detach().view(16, -1)
    assert all(torch.isfinite(p).all() for p in conv.parameters()) and torch.pdist(heads).min() > 0


def test_warmup_keeps_plain_gradients_then_samples_and_resumes():
    """warmup=2: the first two backward passes keep their gradients, the third gets exactly the SVGD update; a second
    optimizer on the same backward pass does not count a step; the count survives state_dict/load_state_dict."""
    torch.manual_seed(0)
    conv = GATConv(6, 3, heads=4)
    x, ei = torch.randn(9, 6), torch.randint(0, 9, (2, 30))
    warm, plain = SVGD(conv, alpha=1.0, warmup=2), SVGD(conv, alpha=1.0)
    opt_a = torch.optim.SGD([conv.lin.weight], lr=0.0)  # lr 0: the parameters stay put, only gradients are compared
    opt_b = torch.optim.SGD([conv.att_src, conv.att_dst, conv.bias], lr=0.0)
    warm.attach(opt_a)
    warm.attach(opt_b)
    for step in range(3):
        conv.zero_grad()
        conv(x, ei).square().sum().backward()
        raw = {n: p.grad.clone() for n, p in conv.named_parameters()}
        opt_a.step()
        opt_b.step()  # the same backward pass: neither transformed nor counted again
        got = {n: p.grad.clone() for n, p in conv.named_parameters()}
        if step < 2:
            assert all(torch.equal(got[n], raw[n]) for n in raw) and warm.steps == step + 1
        else:
            for n, p in conv.named_parameters():
                p.grad = raw[n].clone()
            plain.step()
            expect = {n: p.grad for n, p in conv.named_parameters()}
            assert not torch.equal(got["att_src"], raw["att_src"])
            assert all(torch.allclose(got[n], expect[n]) for n in raw) and warm.steps == 3
    fresh = SVGD(conv, alpha=1.0, warmup=2)
    fresh.load_state_dict(warm.state_dict())
    assert fresh.steps == 3 and "warmup=2" in repr(fresh)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="warmup"):
            SVGD(conv, warmup=bad)
    v = graph_rma.parse_variant("svgd:alpha=0.1,eps=8,warmup=50")
    assert v.warmup == 50 and graph_rma.parse_variant(v.spec) == v and "warmup=50" in v.spec
    assert graph_rma.make_sampler(v, conv).warmup == 50
    with pytest.raises(ValueError, match="warmup"):
        graph_rma.parse_variant("svgd:warmup=-3")


def test_flags_are_booleans_never_truthy_strings():
    model = torch.nn.MultiheadAttention(8, 4)
    for bad in ("false", "no", "0", 0, None):
        with pytest.raises(ValueError, match="kernel_grad: expected True or False"):
            graph_rma.SVGD(model, kernel_grad=bad)
    assert graph_rma.SVGD(model, kernel_grad=False).kernel_grad is False
    for name in ("eps", "max_repulsive_step"):
        with pytest.raises(ValueError, match=f"{name}: expected a positive finite number, got True"):
            graph_rma.SVGD(model, **{name: True})


def test_sampler_state_is_validated_whole_with_the_key_named():
    sampler = graph_rma.SVGD(torch.nn.MultiheadAttention(8, 4))
    good = sampler.state_dict()
    for bad, match in (
        ({**good, "steps": torch.tensor(-5)}, "'steps' must be an integer >= 0, got -5"),
        ({**good, "steps": 2.7}, "'steps' must be an integer >= 0, got 2.7"),
        ({**good, "steps": "x"}, "'steps' must be an integer >= 0"),
        ({**good, "generator": good["generator"][:10]}, "'generator' must be a torch.Generator state .* 5056 bytes"),
        ({**good, "generator": good["generator"].float()}, "'generator' must be"),
        ({**good, "extra": 1}, r"unknown key\(s\) \['extra'\]"),
    ):
        with pytest.raises(ValueError, match=match):
            sampler.load_state_dict(bad)
    assert sampler.steps == 0  # nothing half-applied
    sampler.load_state_dict({**good, "steps": torch.tensor(7)})
    assert sampler.steps == 7


def test_a_sampler_state_saved_on_cuda_resumes_on_the_cpu_from_a_seed_derived_from_it():
    """A CUDA generator's state (16 bytes: seed and offset) cannot drive a CPU generator: the noise goes on from a
    seed derived from the saved bytes (the same saved state, the same draws), with a warning; a CPU state is
    restored exactly and silently."""
    import warnings

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 4)
    cuda_state = torch.tensor(list(range(16)), dtype=torch.uint8)  # what torch.cuda's Philox generator saves
    draws = []
    for _ in range(2):
        sampler = graph_rma.SPOS(mha, seed=3)
        with pytest.warns(UserWarning, match=r"saved generator state \(16 bytes\) is not one of a cpu generator"):
            sampler.load_state_dict({"generator": cuda_state, "steps": torch.tensor(4)})
            draws.append(torch.randn(5, generator=sampler.generator))
        assert sampler.steps == 4
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[0], torch.randn(5, generator=graph_rma.SPOS(mha, seed=3).generator))
    other = torch.tensor(list(range(1, 17)), dtype=torch.uint8)
    sampler = graph_rma.SPOS(mha, seed=3)
    with pytest.warns(UserWarning):
        sampler.load_state_dict({"generator": other, "steps": 0})
        assert not torch.equal(torch.randn(5, generator=sampler.generator), draws[0])
    saved = graph_rma.SPOS(mha, seed=5)
    saved.generator.manual_seed(11)
    state = saved.state_dict()
    expected = torch.randn(5, generator=saved.generator)
    restored = graph_rma.SPOS(mha, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        restored.load_state_dict(state)
        assert torch.equal(torch.randn(5, generator=restored.generator), expected)


def test_zero_width_particles_and_meta_models_are_one_line_errors():
    from graph_rma.particles.kernel import svgd_direction

    with pytest.raises(ValueError, match=r"theta: expected shape \[M, D\] .* got \[3, 0\]"):
        svgd_direction(torch.zeros(3, 0), torch.zeros(3, 0))
    with torch.device("meta"):
        model = torch.nn.MultiheadAttention(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    graph_rma.SVGD(model).attach(opt)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    with pytest.raises(ValueError, match="meta device"):
        opt.step()
