"""graph_rma.kinds: one check per value kind, shared by the configurations and the command line's argument types."""

import argparse
import re

import pytest

from graph_rma import GraphRMAError, argtypes, kinds
from graph_rma.engine import EarlyStopping
from graph_rma.tasks.config_fields import check_value

# kind -> (a word and its value that are of the kind, a word and its value that are not)
CASES = {
    "positive_int": ("3", 3, "0", 0),
    "nonnegative_int": ("0", 0, "-1", -1),
    "positive_float": ("0.5", 0.5, "0", 0.0),
    "nonnegative_float": ("0", 0.0, "-0.5", -0.5),
    "probability": ("0.25", 0.25, "1", 1.0),
    "seed": ("18446744073709551615", 2**64 - 1, str(2**64), 2**64),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_the_argument_type_and_the_configuration_check_are_one_check(kind):
    good_word, good, bad_word, bad = CASES[kind]
    arg = getattr(argtypes, kind)
    assert arg(good_word) == good and kinds.check("x", kind, good) == good
    with pytest.raises(argparse.ArgumentTypeError) as word_error:
        arg(bad_word)
    with pytest.raises(GraphRMAError) as value_error:
        kinds.check("x", kind, bad)
    # the same words for the same kind: "expected <what>, got ..." on the command line and in Python
    what = kinds.describe(kind)
    assert str(word_error.value) == f"expected {what}, got {bad_word!r}"
    assert str(value_error.value) == f"x: expected {what}, got {bad!r}"
    if kind != "seed":  # a configuration field takes every kind but seeds (a run's seed is an argument)
        with pytest.raises(GraphRMAError, match=f"^lr: expected {re.escape(what)}, got "):
            check_value("lr", bad, {"kind": kind})


def test_no_bool_passes_for_a_number_and_no_nan_for_a_float():
    assert not kinds.holds("positive_int", True) and not kinds.holds("finite_float", float("nan"))
    assert not kinds.holds("probability", float("nan")) and kinds.holds("bool", False)


def test_one_seed_check():
    import numpy as np

    assert kinds.check_seed(np.int64(7)) == 7 and type(kinds.check_seed(np.int64(7))) is int
    for bad in (-1, 2**64, "1", 1.0):
        with pytest.raises(GraphRMAError, match=r"^seeds: expected a seed in \[0, 2\*\*64 - 1\], got "):
            kinds.check_seed(bad, "seeds")


def test_one_list_of_early_stopping_rules():
    from graph_rma.tasks.protocols import STOPPING

    assert EarlyStopping.RULES is kinds.EARLY_STOPPING_RULES
    assert STOPPING == ("val_metric",) + kinds.EARLY_STOPPING_RULES
