"""SelfAttentiveEncoder (Lin et al. 2017): attention, padding, Frobenius penalty, heads as particles."""

import pytest
import torch
from torch import nn

from graph_rma import SVGD, find_particle_groups, regularization_loss
from graph_rma.nn import SelfAttentiveEncoder


def _enc(**kw):
    torch.manual_seed(0)
    return SelfAttentiveEncoder(5, 6, 7, heads=3, **kw).eval()


def test_shapes_rows_and_padding():
    enc = _enc()
    x = torch.randn(2, 4, 5)
    M, A = enc(x)
    assert M.shape == (2, 3, 12) and A.shape == (2, 3, 4)
    torch.testing.assert_close(A.sum(-1), torch.ones(2, 3))
    # A equals softmax(W_s2 tanh(W_s1 H^T)) computed by hand from the LSTM states
    h, _ = enc.lstm(x)
    expect = torch.softmax(enc.ws2.weight @ torch.tanh(enc.ws1.weight @ h.transpose(1, 2)), dim=-1)
    torch.testing.assert_close(A, expect)
    torch.testing.assert_close(M, A @ h)
    # padding: zero attention there, and the outputs of a padded sentence equal the unpadded ones
    xp = torch.cat([x, torch.randn(2, 3, 5)], dim=1)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[:, 4:] = True
    Mp, Ap = enc(xp, key_padding_mask=pad)
    assert (Ap[:, :, 4:] == 0).all()
    torch.testing.assert_close(Ap[:, :, :4], A)
    torch.testing.assert_close(Mp, M)
    with pytest.raises(ValueError, match="key_padding_mask"):
        enc(xp, key_padding_mask=pad.float())
    with pytest.raises(ValueError, match="heads"):
        SelfAttentiveEncoder(5, 6, 7, heads=0)


def test_frobenius_penalty_hand_checked():
    # A = [[.5, .5], [1, 0]]: AA^T = [[.5, .5], [.5, 1]], AA^T - I = [[-.5, .5], [.5, 0]] -> .25 + .25 + .25
    A = torch.tensor([[[0.5, 0.5], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])
    assert SelfAttentiveEncoder.penalty(A[:1]).item() == pytest.approx(0.75)
    assert SelfAttentiveEncoder.penalty(A[1:]).item() == pytest.approx(0.0)  # orthogonal one-hot heads
    assert SelfAttentiveEncoder.penalty(A).item() == pytest.approx(0.375)  # batch mean
    two_same = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # collapsed heads: off-diagonal ones -> 2
    assert SelfAttentiveEncoder.penalty(two_same).item() == pytest.approx(2.0)
    assert regularization_loss("reg:kind=frobenius,weight=2", attention=[A[:1]]).item() == pytest.approx(1.5)


def test_heads_are_rows_of_ws2():
    enc = _enc()
    (g,) = find_particle_groups(enc)
    assert g.num_heads == 3 and g.roles == ["ws2"] and g.dim == 7
    torch.testing.assert_close(g.theta(), enc.ws2.weight.detach())
    x = torch.randn(2, 4, 5)
    _, A = enc(x)
    with torch.no_grad():
        enc.ws2.weight[1] += 1.0  # perturb head 1's particle: only head 1's attention moves
    _, A2 = enc(x)
    torch.testing.assert_close(A2[:, [0, 2]], A[:, [0, 2]])
    assert not torch.allclose(A2[:, 1], A[:, 1])


def test_per_head_ws1_blocks():
    shared = _enc()
    own = SelfAttentiveEncoder(5, 6, 7, heads=3, shared_ws1=False).eval()
    own.lstm.load_state_dict(shared.lstm.state_dict())
    with torch.no_grad():
        own.ws1.weight.copy_(shared.ws1.weight.repeat(3, 1))  # every head's block = the shared W_s1
        own.ws2.weight.copy_(shared.ws2.weight)
    x = torch.randn(2, 4, 5)
    torch.testing.assert_close(own(x)[1], shared(x)[1])
    (g,) = find_particle_groups(own)
    assert g.roles == ["ws1", "ws2"] and g.dim == 7 + 7 * 12
    theta = g.theta()
    for h in range(3):
        torch.testing.assert_close(
            theta[h], torch.cat([own.ws2.weight[h], own.ws1.weight[7 * h : 7 * (h + 1)].flatten()]).detach()
        )


def test_svgd_replaces_only_head_gradients():
    enc = _enc()
    enc.train()
    sampler = SVGD(enc, alpha=1.0)
    M, A = enc(torch.randn(2, 4, 5))
    M.pow(2).sum().backward()
    ws1_grad = enc.ws1.weight.grad.clone()
    ws2_grad = enc.ws2.weight.grad.clone()
    sampler.step()
    torch.testing.assert_close(enc.ws1.weight.grad, ws1_grad)  # shared W_s1 is not a particle
    assert not torch.allclose(enc.ws2.weight.grad, ws2_grad)


def test_drop_attention_receives_heads_by_tokens():
    seen = []

    class Spy(nn.Module):
        def forward(self, a):
            seen.append(a.shape)
            return a

    enc = _enc(drop_attention=Spy())
    x = torch.randn(2, 4, 5)
    enc.train()
    enc(x)
    enc.eval()
    enc(x)
    assert seen == [torch.Size([2, 3, 4])]  # [B, r, n], training mode only
