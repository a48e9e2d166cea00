import itertools

import pytest
import torch
from torch import nn
from torch_geometric.nn import GATConv

from graph_rma.regularizers import disagreement, frobenius_penalty, frobenius_penalty_sparse, parameter_disagreement


def test_frobenius_by_hand():
    assert frobenius_penalty(torch.eye(2)).item() == 0.0
    # Two identical uniform heads over 2 keys: A A^T = [[.5, .5], [.5, .5]], minus I -> 4 entries of 0.5^2.
    A = torch.full((2, 2), 0.5)
    assert frobenius_penalty(A).item() == pytest.approx(1.0)
    # Batch mean.
    assert frobenius_penalty(torch.stack([torch.eye(2), A])).item() == pytest.approx(0.5)


def test_frobenius_sparse_equals_dense_on_complete_graph():
    N, H = 4, 3
    src, dst = zip(*itertools.product(range(N), range(N)))
    index = torch.tensor(dst)
    alpha = torch.rand(N * N, H)
    # Normalise per destination so that rows are distributions.
    sums = torch.zeros(N, H).index_add_(0, index, alpha)
    alpha = alpha / sums[index]
    dense = torch.zeros(N, H, N)  # [dst, head, src]
    dense[index, :, torch.tensor(src)] = alpha
    assert torch.allclose(frobenius_penalty_sparse(alpha, index, N), frobenius_penalty(dense))


def test_frobenius_sparse_skips_isolated_nodes_and_checks_shapes():
    alpha = torch.tensor([[1.0, 1.0]])
    index = torch.tensor([2])
    # Node 2 has one edge: A = [[1], [1]], A A^T = ones(2, 2); minus I -> 2 off-diagonal ones.
    assert frobenius_penalty_sparse(alpha, index, num_nodes=5).item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="index"):
        frobenius_penalty_sparse(alpha, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="alpha"):
        frobenius_penalty_sparse(torch.ones(3), torch.tensor([0, 1, 2]))


def test_disagreement_by_hand():
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # pairs: cos 1, 0, 0
    assert disagreement(x, head_dim=0).item() == pytest.approx(1 / 3)
    assert disagreement(torch.eye(3), head_dim=0).item() == 0.0
    out = torch.stack([x, -x])  # [N=2, H=3, C=2]: same cosines in both
    assert disagreement(out).item() == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="heads"):
        disagreement(torch.ones(1, 4), head_dim=0)


def test_parameter_disagreement_is_differentiable_and_matches_direct():
    conv = GATConv(4, 2, heads=3)
    value = parameter_disagreement(conv)
    value.backward()
    assert conv.att_src.grad is not None
    heads = torch.cat([conv.lin.weight.view(3, -1), conv.att_src[0], conv.att_dst[0]], dim=1).detach()
    cos = torch.nn.functional.cosine_similarity
    direct = sum(cos(heads[i], heads[j], dim=0) for i, j in [(0, 1), (0, 2), (1, 2)]) / 3
    assert value.item() == pytest.approx(direct.item(), abs=1e-6)
    with pytest.raises(ValueError, match="model"):
        parameter_disagreement(nn.Linear(2, 2))
