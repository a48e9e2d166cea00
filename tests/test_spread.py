"""One seed has no spread: ``format_spread`` prints the mean alone (no ``± 0.00`` or ``± nan``), in the node table
and the examples that print one."""

import math
import runpy
import sys

import pytest
from conftest import REPO, needs_cora

from graph_rma.engine import format_spread, mean_std, paired_comparison


@pytest.mark.parametrize(
    "mean,spread,n,sign,text",
    [
        (61.04, 2.13, 10, False, "61.04 ± 2.13"),
        (61.04, 0.0, 1, False, "61.04"),
        (0.5, math.nan, 1, True, "+0.50"),
        (0.5, math.nan, 3, True, "+0.50"),  # no finite spread: none stated
        (-1.234, 0.5, 2, True, "-1.23 ± 0.50"),
    ],
)
def test_format_spread(mean, spread, n, sign, text):
    assert format_spread(mean, spread, n, sign=sign) == text


def test_one_seed_prints_neither_a_zero_sd_nor_a_nan_se():
    m, s = mean_std([63.8])
    pc = paired_comparison({0: 62.5}, {0: 63.8})
    line = f"{format_spread(m, s, 1)} {format_spread(pc['mean'], pc['se'], pc['n'], sign=True)}"
    assert line == "63.80 +1.30" and "±" not in line


@pytest.mark.slow
@needs_cora
def test_the_quickstart_example_with_one_seed_states_no_spread(monkeypatch, capsys):
    path = REPO / "examples" / "quickstart_vs_stock.py"
    monkeypatch.setattr(sys, "argv", [str(path), "--seeds", "0", "--epochs", "1", "--dataset", "cora"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(path), run_name="__main__")
    assert done.value.code == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("mean over 1 seeds:") and "±" not in last and "nan" not in last, last
