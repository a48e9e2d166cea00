"""Messages that say what to do where the user is: a misspelt ``layers=`` found before the data are read, with
the valid names; a model with no multi-head layer to sample, with the command line's way out."""

import pytest
import torch
from conftest import needs_cora

import graph_rma
from graph_rma.cli import main


def test_a_misspelt_layer_is_refused_before_the_data_with_the_valid_names(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GRAPH_RMA_DATA", str(tmp_path / "empty"))  # no data: reading them would fail differently
    argv = ["cora", "--variants", "svgd:alpha=0.1,layers=conv9", "--seeds", "0", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "layers: no module named 'conv9' in the model (its attention layers: conv1, conv2)" in err


def test_find_particle_groups_lists_the_attention_layers():
    model = torch.nn.Sequential(graph_rma.nn.RepulsiveGATConv(4, 2, heads=2), torch.nn.Linear(4, 4))
    with pytest.raises(ValueError, match=r"no module named 'conv1' in the model \(its attention layers: 0\)"):
        graph_rma.find_particle_groups(model, layers=["conv1"])


@needs_cora
def test_one_head_and_a_sampler_says_what_to_do_on_the_command_line(tmp_path, capsys):
    argv = ["cora", "--variants", "svgd", "--heads", "1", "--seeds", "0", "--epochs", "1", "--out", str(tmp_path)]
    assert main(argv + ["--no-plot"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "on the command line: --heads" in err, err
