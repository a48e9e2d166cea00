"""The authors' published update (graph_rma.particles.authors): hand-checked kernel, bandwidth and direction, the
mixing particle view, SPOS noise, and that nothing else changes."""

import math

import pytest
import torch
from torch import nn
from torch_geometric.nn import GATConv

from graph_rma.particles import SPOS, SVGD, HeadParam, svgd_direction
from graph_rma.particles.authors import (
    AuthorsSPOS,
    AuthorsSVGD,
    MixingHeadParam,
    authors_bandwidth,
    authors_kernel,
    authors_spos_grad,
    authors_svgd_grad,
)
from graph_rma.variants import make_sampler, parse_variant

# Three particles in the plane: theta_0 = (0, 0), theta_1 = (1, 0), theta_2 = (0, 2).
# Squared distances d01 = 1, d02 = 4, d12 = 5; all 9 entries sorted: 0 0 0 1 1 4 4 5 5, lower median (index 4) = 1.
# h = sqrt(0.5 * 1 / log 4) = 1 / (2 sqrt(log 2)), so 2 h^2 = 1 / log 4 and K_ij = exp(-d_ij log 4) = 4^-d_ij:
# K01 = 1/4, K02 = 1/256, K12 = 1/1024.  R_i = sum_j K_ij (theta_i - theta_j) / h, with 1/h = c = 2 sqrt(log 2):
# R_0 = c * (1/4 (-1, 0) + 1/256 (0, -2))           = c * (-1/4, -1/128)
# R_1 = c * (1/4 (1, 0) + 1/1024 (1, -2))           = c * (1/4 + 1/1024, -1/512)
# R_2 = c * (1/256 (0, 2) + 1/1024 (-1, 2))         = c * (-1/1024, 1/128 + 1/512)
THETA = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
C = 2.0 * math.sqrt(math.log(2.0))
K_HAND = torch.tensor([[1, 1 / 4, 1 / 256], [1 / 4, 1, 1 / 1024], [1 / 256, 1 / 1024, 1]], dtype=torch.float64)
R_HAND = C * torch.tensor(
    [[-1 / 4, -1 / 128], [1 / 4 + 1 / 1024, -1 / 512], [-1 / 1024, 1 / 128 + 1 / 512]], dtype=torch.float64
)
# Gradients g_0 = (1, 0), g_1 = (0, 1), g_2 = (1, 1):
# (K g)_0 = (1, 0) + 1/4 (0, 1) + 1/256 (1, 1)      = (1 + 1/256, 1/4 + 1/256)
# (K g)_1 = 1/4 (1, 0) + (0, 1) + 1/1024 (1, 1)     = (1/4 + 1/1024, 1 + 1/1024)
# (K g)_2 = 1/256 (1, 0) + 1/1024 (0, 1) + (1, 1)   = (1 + 1/256, 1 + 1/1024)
GRAD = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
KG_HAND = torch.tensor(
    [[1 + 1 / 256, 1 / 4 + 1 / 256], [1 / 4 + 1 / 1024, 1 + 1 / 1024], [1 + 1 / 256, 1 + 1 / 1024]], dtype=torch.float64
)


def test_bandwidth_kernel_and_repulsion_by_hand():
    assert authors_bandwidth(THETA).item() == pytest.approx(1.0 / C, rel=1e-12)  # 0.60056...
    K, R = authors_kernel(THETA)
    torch.testing.assert_close(K, K_HAND, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(R, R_HAND, rtol=1e-12, atol=1e-14)
    # Scale-invariant (h grows with the spread, R is divided by h only) and translation-invariant.
    K2, R2 = authors_kernel(1e-6 * THETA + 3.0)
    torch.testing.assert_close(R2, R_HAND, rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(K2, K_HAND, rtol=1e-6, atol=1e-9)


def test_svgd_direction_by_hand():
    # g~ = (K g - w R) / 3 with w = 0.5; row 0 = ((1 + 1/256) + c/8, (1/4 + 1/256) + c/256) / 3 = (0.40402, 0.08680).
    out = authors_svgd_grad(THETA, GRAD, w=0.5)
    torch.testing.assert_close(out, (KG_HAND - 0.5 * R_HAND) / 3, rtol=1e-12, atol=1e-14)
    assert out[0].tolist() == pytest.approx([(1 + 1 / 256 + C / 8) / 3, (1 / 4 + 1 / 256 + C / 256) / 3])
    assert out[0, 0].item() == pytest.approx(0.404015, abs=1e-6)
    # It differs from the paper's Eq. (4) (phi = (-K g + alpha * 2/h' sum K' (theta_i - theta_j)) / M).
    assert not torch.allclose(-out, svgd_direction(THETA, GRAD, alpha=0.5))


def test_two_particles_fall_back_to_the_largest_distance():
    # theta = (0), (3): entries 0 9 9 0, lower median 0 (their code: h = 0, NaN). Fallback m = 9:
    # 2 h^2 = 9 / log 3, K01 = exp(-9 log 3 / 9) = 1/3, h = sqrt(4.5 / log 3), R_0 = (1/3)(0 - 3) / h = -1 / h.
    theta = torch.tensor([[0.0], [3.0]], dtype=torch.float64)
    h = math.sqrt(4.5 / math.log(3.0))
    assert authors_bandwidth(theta).item() == pytest.approx(h, rel=1e-12)
    K, R = authors_kernel(theta)
    assert K[0, 1].item() == pytest.approx(1 / 3, rel=1e-12)
    assert R[:, 0].tolist() == pytest.approx([-1 / h, 1 / h], rel=1e-12)
    same = torch.ones(3, 4)
    K, R = authors_kernel(same)  # all coincide: h = 1, K = 1, R = 0
    assert authors_bandwidth(same).item() == 1.0 and bool((K == 1).all()) and bool((R == 0).all())


def test_spos_noise_is_the_grad_median_scaled_gaussian():
    torch.manual_seed(0)
    theta, grad = torch.randn(4, 20000, dtype=torch.float64), 1e-3 * torch.randn(4, 20000, dtype=torch.float64)
    beta, stepsize, w = 2.0, 0.5, 0.1
    out = authors_spos_grad(theta, grad, w=w, beta=beta, stepsize=stepsize, generator=torch.Generator().manual_seed(0))
    residual = authors_svgd_grad(theta, grad, w=w) + beta * grad - out  # = sqrt(2 beta / s) med(|g|) xi
    med = grad.abs().flatten().sort().values[(grad.numel() - 1) // 2]  # lower median, about 0.6745e-3
    assert med.item() == pytest.approx(0.6745e-3, rel=0.02)
    z = residual / (math.sqrt(2 * beta / stepsize) * med)
    assert z.mean().item() == pytest.approx(0.0, abs=0.015)  # 80000 draws: SE 0.0035 (4 SE)
    assert z.std().item() == pytest.approx(1.0, abs=0.01)  # SE 0.0025
    xi = torch.randn(4, 20000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(z, xi)
    # GraphWriter's noise is not scaled by med(|g|).
    out = authors_spos_grad(
        theta,
        grad,
        w=w,
        beta=beta,
        stepsize=stepsize,
        grad_scaled_noise=False,
        generator=torch.Generator().manual_seed(0),
    )
    torch.testing.assert_close(authors_svgd_grad(theta, grad, w=w) + beta * grad - out, math.sqrt(8.0) * xi)


def test_mixing_view_is_the_transposed_reshape():
    lin = nn.Linear(6, 8, bias=True)  # 4 heads of 2 output rows
    W = lin.weight
    view = MixingHeadParam("weight", "lin", W, 4)
    torch.testing.assert_close(view.heads(W.detach()), W.detach().t().reshape(4, -1))
    head_view = HeadParam("weight", "lin", W, 4).heads(W.detach())
    assert view.size == 12 and head_view[0].tolist() == W[:2].flatten().tolist()
    t = torch.zeros_like(W)
    view.write(t, 2 * W.detach().t().reshape(4, -1))
    torch.testing.assert_close(t, 2 * W.detach())
    b = MixingHeadParam("bias", "lin", lin.bias, 4)  # a 1-D region is its own transpose
    torch.testing.assert_close(b.heads(lin.bias.detach()), lin.bias.detach().reshape(4, -1))
    # A region of a parameter (the query third of nn.MultiheadAttention's in_proj_weight), inputs not divisible by H.
    mha = nn.MultiheadAttention(6, 3)
    Wq = mha.in_proj_weight.detach()
    q = MixingHeadParam("in_proj_weight", "query", mha.in_proj_weight, 3, 0, 0, 6)
    torch.testing.assert_close(q.heads(Wq), Wq[:6].t().reshape(3, -1))
    t = torch.zeros_like(Wq)
    q.write(t, q.heads(Wq))
    torch.testing.assert_close(t[:6], Wq[:6])
    assert bool((t[6:] == 0).all())


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = GATConv(10, 3, heads=4)
        self.out = nn.Linear(12, 2)

    def forward(self, x, edge_index):
        return self.out(self.conv(x, edge_index))


def _backward(model):
    torch.manual_seed(1)
    x, ei = torch.randn(6, 10), torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    model.zero_grad()
    model(x, ei).pow(2).sum().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_sampler_updates_each_weight_as_its_own_mixing_particle_set():
    torch.manual_seed(0)
    model = _Net()
    sampler = AuthorsSVGD(model, w=0.3, eps=2.0)
    assert [g.name for g in sampler.groups] == ["conv.lin.weight", "conv.att_src", "conv.att_dst"]
    before = _backward(model)
    sampler.step()
    W = model.conv.lin.weight.detach()  # [12, 10], 4 heads of 3 rows; particles W.t().reshape(4, 30)
    want = 2.0 * authors_svgd_grad(W.t().reshape(4, -1), before["conv.lin.weight"].t().reshape(4, -1), w=0.3)
    torch.testing.assert_close(model.conv.lin.weight.grad, want.reshape(10, 12).t())
    a = model.conv.att_src.detach()  # [1, 4, 3]: the mixing view of [4, 3] is its transpose cut into 4 chunks
    want = 2.0 * authors_svgd_grad(a[0].t().reshape(4, -1), before["conv.att_src"][0].t().reshape(4, -1), w=0.3)
    torch.testing.assert_close(model.conv.att_src.grad[0], want.reshape(3, 4).t())
    for name in ("conv.bias", "out.weight", "out.bias"):  # not particles: untouched
        assert torch.equal(dict(model.named_parameters())[name].grad, before[name])


def test_roles_select_and_others_keep_their_gradients():
    torch.manual_seed(0)
    model = _Net()
    sampler = make_sampler("svgd:alpha=0.01,update=authors,roles=lin", model)
    assert isinstance(sampler, AuthorsSVGD) and [g.name for g in sampler.groups] == ["conv.lin.weight"]
    before = _backward(model)
    sampler.step()
    assert not torch.equal(model.conv.lin.weight.grad, before["conv.lin.weight"])
    for name, g in before.items():
        if name != "conv.lin.weight":
            assert torch.equal(dict(model.named_parameters())[name].grad, g), name


def test_heads_view_is_the_sentence_classifiers_rows():
    # Their sentence classifier's particles are the rows of Weight2 [hops, unit]: one per head, own kernel.
    torch.manual_seed(0)
    model = _Net()
    sampler = make_sampler("svgd:alpha=0.3,update=authors,view=heads,roles=lin", model)
    assert sampler.view == "heads" and all(type(p) is HeadParam for g in sampler.groups for p in g.params)
    before = _backward(model)
    sampler.step()
    W = model.conv.lin.weight.detach()  # [12, 10]: head i = rows 3i..3i+2
    want = authors_svgd_grad(W.reshape(4, -1), before["conv.lin.weight"].reshape(4, -1), w=0.3)
    torch.testing.assert_close(model.conv.lin.weight.grad, want.reshape(12, 10))


def test_spos_sampler_uses_its_seeded_generator():
    torch.manual_seed(0)
    model = _Net()
    sampler = make_sampler("spos:alpha=0.1,eps=0.5,beta=3,update=authors,roles=att_dst", model, seed=5)
    assert isinstance(sampler, AuthorsSPOS) and sampler.stepsize == 0.5
    before = _backward(model)
    sampler.step()
    a, g = model.conv.att_dst.detach()[0], before["conv.att_dst"][0]
    want = 0.5 * authors_spos_grad(
        a.t().reshape(4, -1),
        g.t().reshape(4, -1),
        w=0.1,
        beta=3.0,
        stepsize=0.5,
        generator=torch.Generator().manual_seed(5),
    )
    torch.testing.assert_close(model.conv.att_dst.grad[0], want.reshape(3, 4).t())


def test_default_samplers_are_unchanged():
    torch.manual_seed(0)
    model = _Net()
    for spec, cls in (("svgd:alpha=0.01", SVGD), ("spos:alpha=0.01,beta=10", SPOS)):
        s = make_sampler(spec, model)
        assert type(s) is cls and parse_variant(spec).update == "paper"
        assert all(type(p) is HeadParam for g in s.groups for p in g.params)
        assert [g.name for g in s.groups] == ["conv"]  # one particle per head, all roles concatenated
    s = make_sampler("svgd:alpha=0.5,eps=2", model)
    before = _backward(model)
    theta, grad = s.groups[0].theta(), s.groups[0].grad()
    s.step()
    torch.testing.assert_close(s.groups[0].grad(), -2.0 * svgd_direction(theta, grad, alpha=0.5))
    assert torch.equal(model.out.weight.grad, before["out.weight"])


@pytest.mark.parametrize(
    "bad, word",
    [
        ("svgd:update=theirs", "update"),
        ("svgd:update=authors,bandwidth=liu", "bandwidth"),
        ("spos:kernel_grad=0,update=authors", "kernel_grad"),
        ("sgld:update=authors", "update"),
        ("svgd:update=authors,w=0.01", "'w'"),
        ("svgd:view=heads", "view"),
        ("svgd:update=authors,view=rows", "view"),
    ],
)
def test_strict_spec(bad, word):
    with pytest.raises(ValueError, match=word):
        parse_variant(bad)


def test_argument_checks_name_the_argument():
    with pytest.raises(ValueError, match="^w: a negative repulsive weight"):
        authors_svgd_grad(THETA, GRAD, w=-1.0)
    with pytest.raises(ValueError, match="stepsize"):
        authors_spos_grad(THETA, GRAD, stepsize=0.0)
    with pytest.raises(ValueError, match="grad"):
        authors_svgd_grad(THETA, GRAD[:2])


def test_authors_update_errors_name_w_and_offer_no_missing_option():
    from graph_rma.particles.authors import AuthorsSVGD

    model = torch.nn.MultiheadAttention(8, 4)
    with pytest.raises(ValueError, match="w: a negative repulsive weight") as e:
        AuthorsSVGD(model, w=-1)
    assert "allow_attraction" not in str(e.value)
    with pytest.raises(ValueError, match="w: expected a finite repulsive weight"):
        AuthorsSVGD(model, w=float("nan"))
