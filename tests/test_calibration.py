"""graph_rma.diagnostics.calibration's baselines and scores: temperature scaling, ensembles, NLL, Brier, OOD AUROC,
against known answers and scikit-learn."""

import math

import pytest
import torch

from graph_rma import GraphRMAError
from graph_rma.diagnostics import (
    apply_temperature,
    brier_score,
    class_probabilities,
    ensemble_probabilities,
    entropy_auroc,
    expected_calibration_error,
    fit_temperature,
    negative_log_likelihood,
)


def calibrated_set(n=20000, k=5, seed=0):
    """Logits whose softmax is the true label distribution: labels are drawn from it, so T = 1 is right."""
    g = torch.Generator().manual_seed(seed)
    z = 2.0 * torch.randn(n, k, generator=g, dtype=torch.float64)
    y = torch.multinomial(torch.softmax(z, -1), 1, generator=g).squeeze(1)
    return z, y


@pytest.mark.parametrize("t_true", [0.25, 2.5])
def test_a_known_temperature_is_recovered(t_true):
    z, y = calibrated_set()
    t = fit_temperature(z * t_true, y)  # logits a temperature t_true too sharp (or too soft): T = t_true undoes it
    assert t == pytest.approx(t_true, rel=0.04)
    # the minimiser of the NLL: a step either way costs likelihood
    nll = lambda s: negative_log_likelihood(class_probabilities(z * t_true, s), y)  # noqa: E731
    assert nll(t) < nll(t * 1.02) and nll(t) < nll(t / 1.02)


def test_ece_of_a_calibrated_set_is_near_zero_and_scaling_restores_it():
    z, y = calibrated_set()
    assert expected_calibration_error(class_probabilities(z), y, num_bins=15) < 0.01
    sharp = z * 3.0
    assert expected_calibration_error(class_probabilities(sharp), y, num_bins=15) > 0.1
    t = fit_temperature(sharp, y)
    assert expected_calibration_error(class_probabilities(sharp, t), y, num_bins=15) < 0.01


def test_binary_logits_go_through_the_sigmoid():
    z = torch.tensor([-2.0, 0.0, 3.0], dtype=torch.float64)
    p = class_probabilities(z)
    s = [1 / (1 + math.exp(2.0)), 0.5, 1 / (1 + math.exp(-3.0))]  # sigmoid by hand
    torch.testing.assert_close(p, torch.tensor([[1 - v, v] for v in s], dtype=torch.float64))
    assert torch.equal(class_probabilities(z[:, None]), p)  # [n, 1] as [n]
    # softmax([0, z]) = (1 - sigmoid(z), sigmoid(z)): the binary fit is the 2-class fit of those logits
    g = torch.Generator().manual_seed(1)
    zb = 3 * torch.randn(5000, generator=g, dtype=torch.float64)
    yb = torch.bernoulli(torch.sigmoid(zb / 3), generator=g).long()  # true temperature 3
    t1 = fit_temperature(zb, yb)
    t2 = fit_temperature(torch.stack([torch.zeros_like(zb), zb], -1), yb)
    assert t1 == pytest.approx(t2, rel=1e-6) and t1 == pytest.approx(3.0, rel=0.1)
    two = torch.softmax(torch.stack([torch.zeros_like(zb), zb], -1) / t1, -1)
    torch.testing.assert_close(class_probabilities(zb, t1), two)


def test_ensemble_averages_probabilities():
    a = torch.tensor([[0.9, 0.1], [0.2, 0.8]])
    b = torch.tensor([[0.5, 0.5], [0.6, 0.4]])
    torch.testing.assert_close(ensemble_probabilities([a, b]), torch.tensor([[0.7, 0.3], [0.4, 0.6]]))
    assert torch.equal(ensemble_probabilities(torch.stack([a, b])), ensemble_probabilities([a, b]))


def test_nll_brier_auroc_equal_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")  # the dev extra installs it
    g = torch.Generator().manual_seed(2)
    p = torch.softmax(torch.randn(300, 4, generator=g, dtype=torch.float64), -1)
    y = torch.randint(0, 4, (300,), generator=g)
    assert negative_log_likelihood(p, y) == pytest.approx(metrics.log_loss(y, p, labels=range(4)), rel=1e-12)
    ref = metrics.brier_score_loss(y, p, labels=range(4), scale_by_half=False)
    assert brier_score(p, y) == pytest.approx(ref, rel=1e-12)
    pb = class_probabilities(torch.randn(200, generator=g, dtype=torch.float64))
    yb = torch.randint(0, 2, (200,), generator=g)
    assert brier_score(pb, yb) == pytest.approx(2 * metrics.brier_score_loss(yb, pb[:, 1]), rel=1e-12)
    assert negative_log_likelihood(pb, yb) == pytest.approx(metrics.log_loss(yb, pb[:, 1]), rel=1e-12)
    s_in = torch.round(torch.rand(150, generator=g) * 10)  # ties within and across the groups
    s_out = torch.round(torch.rand(80, generator=g) * 10 + 2)
    ref = metrics.roc_auc_score([0] * 150 + [1] * 80, torch.cat([s_in, s_out]).numpy())
    assert entropy_auroc(s_in, s_out) == pytest.approx(ref, abs=1e-12)


def test_auroc_hand_cases():
    assert entropy_auroc(torch.tensor([0.1, 0.2]), torch.tensor([0.3, 0.4])) == 1.0
    assert entropy_auroc(torch.tensor([0.3, 0.4]), torch.tensor([0.1, 0.2])) == 0.0
    assert entropy_auroc(torch.tensor([1.0, 2.0]), torch.tensor([2.0])) == 0.75  # one win, one tie


def test_bad_input_is_one_error():
    with pytest.raises(GraphRMAError, match="temperature"):
        apply_temperature(torch.ones(2, 3), 0.0)
    with pytest.raises(GraphRMAError, match="labels"):
        fit_temperature(torch.ones(3, 2), torch.tensor([0, 2, 1]))
    with pytest.raises(GraphRMAError, match="logits"):
        fit_temperature(torch.tensor([[float("nan"), 1.0]]), torch.tensor([0]))
    with pytest.raises(GraphRMAError, match="members"):
        ensemble_probabilities([])
    with pytest.raises(GraphRMAError, match="out_of_distribution"):
        entropy_auroc(torch.ones(3), torch.ones(0))
