"""A table of bad values for the public constructors, parse_variant, load_state_dict and every CLI command: each
is refused with a one-line error naming the argument, a non-zero exit, no traceback, and no file changed."""

import pytest
import torch
from conftest import snapshot

import graph_rma
from graph_rma.cli import main
from graph_rma.dropattention import DropAttention
from graph_rma.models import ResidualGAT, TwoLayerGAT
from graph_rma.nn import RepulsiveGATConv
from graph_rma.tasks.protocols import resolve_protocol
from graph_rma.variants import parse_variant

BAD_NUMBERS = [float("nan"), float("inf"), -float("inf"), "0.1", None, True, [0.1]]


def _mha():
    return torch.nn.MultiheadAttention(8, 4)


CONSTRUCTORS = [
    ("alpha", lambda v: graph_rma.SVGD(_mha(), alpha=v)),
    ("alpha", lambda v: graph_rma.SPOS(_mha(), alpha=v)),
    ("eps", lambda v: graph_rma.SVGD(_mha(), eps=v)),
    ("beta", lambda v: graph_rma.SPOS(_mha(), beta=v)),
    ("eps", lambda v: graph_rma.SGLD(_mha(), eps=v)),
    ("max_repulsive_step", lambda v: graph_rma.SVGD(_mha(), max_repulsive_step=v if v is not None else "x")),
    ("p", lambda v: DropAttention(p=v if v is not None else "x")),
    ("dropout", lambda v: TwoLayerGAT(4, 2, dropout=v if v is not None else "x")),
    ("dropout", lambda v: ResidualGAT(4, 2, hidden=8, heads=2, dropout=v if v is not None else "x")),
    ("lr", lambda v: resolve_protocol("ggcn", "chameleon", {"lr": v if v is not None else "x"})),
    ("weight_decay", lambda v: resolve_protocol("ggcn", "chameleon", {"weight_decay": v if v is not None else "x"})),
]


@pytest.mark.parametrize("name,build", CONSTRUCTORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONSTRUCTORS)])
@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
def test_constructors_refuse_bad_numbers_naming_the_argument(name, build, value):
    if name == "alpha" and value is True:
        pass  # refused as any bool
    with pytest.raises(ValueError, match=name) as e:
        build(value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "spec,word",
    [
        ("svgd:alpha=nan", "alpha"),
        ("svgd:alpha=inf", "alpha"),
        ("svgd:alpha=", "alpha"),
        ("svgd:eps=-1", "eps"),
        ("spos:beta=0", "beta"),
        ("svgd:kernel_grad=maybe", "kernel_grad"),
        ("", "spec"),
        ("\ufeffma", "ma"),
        ("svgd:alpha=1e999", "alpha"),
        ("dropattn:p=1", "p"),
        ("svgd:alpha=0.1,alpha=0.2", "alpha"),
    ],
)
def test_parse_variant_refuses_bad_specs(spec, word):
    with pytest.raises(ValueError, match=word) as e:
        parse_variant(spec)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "state",
    [
        None,
        3,
        "x",
        {},
        {"generator": None},
        {"generator": torch.zeros(3)},
        {"generator": torch.Generator().get_state(), "steps": float("nan")},
        {"generator": torch.Generator().get_state(), "steps": -1},
    ],
)
def test_load_state_dict_refuses_bad_states(state):
    sampler = graph_rma.SVGD(_mha())
    with pytest.raises(ValueError, match="state") as e:
        sampler.load_state_dict(state)
    assert "\n" not in str(e.value) and sampler.steps == 0


def test_gat_layer_refuses_bad_heads():
    for heads in (0, -1, 1.5, "8", True):
        with pytest.raises((ValueError, TypeError), match="heads"):
            RepulsiveGATConv(4, 4, heads=heads)


CLI_CASES = [
    (["cora", "--epochs", "nan"], "--epochs"),
    (["cora", "--lr", "inf"], "--lr"),
    (["cora", "--lr", "1e999"], "--lr"),
    (["cora", "--weight-decay", "-inf"], "--weight-decay"),
    (["cora", "--out", ""], "--out"),
    (["cora", "--seeds", "x"], "--seeds"),
    (["cora", "--dropout", "1"], "--dropout"),
    (["cora", "--variants", "svgd:alpha=nan"], "alpha"),
    (["cora", "--out", "{file}"], "not a folder"),
    (["node"], "--dataset"),
    (["node", "--dataset", ""], "--dataset"),
    (["node", "--dataset", "cora", "--protocol", "x"], "--protocol"),
    (["node", "--dataset", "cora", "--edges", "both"], "--edges"),
    (["node", "--dataset", "cora", "--heads", "0"], "--heads"),
    (["text", "--epochs", "0"], "--epochs"),
    (["text", "--datasets", "nope"], "--datasets"),
    (["text", "--out", ""], "--out"),
    (["agenda", "train", "--lr", "nan"], "--lr"),
    (["agenda", "train", "--out", "{file}"], "not a folder"),
    (["webnlg", "train", "--epochs", "-1"], "--epochs"),
    (["webnlg", "evaluate", "--out", "{dir}"], "no trained run"),
    (["score", "--hyp", "{missing}", "--ref", "{missing}"], "missing"),
    (["score", "--hyp", "{dir}", "--ref", "{dir}"], "{dir}"),
    (["score", "--hyp", "{file}", "--ref", "{file}", "--json", "{dir}"], "--json"),
    (["report", "--checkpoint", "{missing}"], "missing"),
    (["report", "--checkpoint", "{file}"], "{file}"),
    (["report", "--checkpoint", "{file}", "--bins", "0"], "--bins"),
    # issue 32: sizes that cannot be allocated, seeds torch refuses, devices the tasks do not run on, a file as root
    (["cora", "--seeds", "0-10000000000"], "--seeds: expected at most"),
    (["cora", "--seeds", str(2**70)], "--seeds"),
    (["cora", "--seeds", "0-99999", "100000"], "--seeds: expected at most 100000 seeds, got 100001"),
    (["cora", "--device", "mps"], "--device"),
    (["cora", "--device", "meta"], "--device"),
    (["node", "--dataset", "cora", "--device", "xpu"], "--device"),
    (["text", "--device", "cuda:x"], "--device"),
    (["agenda", "train", "--seed", str(2**70)], "--seed"),
    (["agenda", "train", "--device", "meta"], "--device"),
    (["webnlg", "generate", "--device", "mps"], "--device"),
    (["cora", "--root", "{file}"], "is a file, not a data folder"),
    (["node", "--dataset", "chameleon", "--root", "{file}"], "is a file, not a data folder"),
    # issue 65: an option the chosen model does not read was accepted and ignored
    (["node", "--dataset", "minesweeper", "--protocol", "luo", "--out-heads", "2"], "out_heads: only the gat model"),
    (["node", "--dataset", "chameleon_filtered", "--protocol", "luo", "--model", "gat", "--norm", "layer"], "norm:"),
    (["node", "--dataset", "minesweeper", "--protocol", "luo", "--ffn-multiplier", "2"], "ffn_multiplier: only"),
    (["node", "--dataset", "cora", "--sep"], "sep:"),
]


@pytest.mark.parametrize("argv,word", CLI_CASES, ids=[" ".join(a) for a, _ in CLI_CASES])
def test_every_command_refuses_bad_values_in_one_line(argv, word, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "file").write_text("not a checkpoint\n")
    (work / "dir").mkdir()
    fill = {"{file}": str(work / "file"), "{dir}": str(work / "dir"), "{missing}": str(work / "missing")}
    argv = [fill.get(a, a) for a in argv]
    word = fill.get(word, word)
    monkeypatch.chdir(work)
    before = snapshot(work)
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code != 0, argv
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert word in err, (word, err)
    assert snapshot(work) == before  # nothing written, nothing changed


@pytest.mark.skipif(not __import__("conftest").PLANETOID.joinpath("Cora", "raw").is_dir(), reason="needs Cora")
@pytest.mark.parametrize("option", ["--hidden", "--heads"])
def test_a_model_too_large_for_memory_is_refused_in_one_line_before_training(option, tmp_path, capsys):
    """It used to end in the allocator's traceback (or a MemoryError) after the data were read."""
    out = tmp_path / "out"
    assert main(["cora", option, "1000000000", "--seeds", "0", "--epochs", "1", "--out", str(out), "--no-plot"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert f"{option[2:]}" in err and "GiB" in err and "more than the" in err, err
    assert not out.exists()


def test_a_seed_outside_torchs_range_is_one_line():
    """A seed of 2**70 used to end in torch's "Overflow when unpacking long long"."""
    from graph_rma.engine import seed_everything
    from graph_rma.tasks.node_classification import run_study

    with pytest.raises(
        ValueError,
        match=r"^seed: expected a seed in \[0, 2\*\*64 - 1\], got "
        r"1180591620717411303424$",
    ):
        seed_everything(2**70)
    with pytest.raises(ValueError, match="seed: expected a seed"):
        seed_everything("1")
    with pytest.raises(ValueError, match=r"^seed: expected a seed in \[0, 2\*\*64 - 1\], got -1$"):
        seed_everything(-1)  # one seed check: the range its message says (it took -2**63 .. -1 too)
    seed_everything(2**64 - 1)  # the largest seed torch takes
    with pytest.raises(ValueError, match=r"seeds: expected a seed in \[0, 2\*\*64 - 1\]"):
        run_study(None, ["ma"], [2**70], "unused", dataset="cora")


@pytest.mark.parametrize("device", ["mps", "meta", "xpu", "cpu:1", "gpu"])
def test_the_tasks_refuse_devices_they_do_not_run_on_naming_the_argument(device, tmp_path):
    from graph_rma.tasks.node_classification import run_study
    from graph_rma.tasks.text_classification import run_benchmark

    with pytest.raises(ValueError, match=f"^device: expected cpu, cuda or cuda:N, got '{device}'"):
        run_study(None, ["ma"], [0], tmp_path / "o", dataset="cora", device=device)  # before any data is read
    with pytest.raises(ValueError, match=f"^device: expected cpu, cuda or cuda:N, got '{device}'"):
        run_benchmark(["trec"], ["selfattn"], ["ma"], [0], tmp_path / "t", device=device)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "query,key,value,word",
    [
        ((3, 1, 6), (3, 1, 6), (3, 1, 6), "query: expected 8 features in the last dimension (the layer's embed_dim)"),
        ((3, 1, 8), (3, 1, 5), (3, 1, 8), "key: expected 8 features"),
        ((3, 1, 8), (3, 1, 8), (3, 1, 7), "value: expected 8 features"),
        ((3, 1, 8), (3, 8), (3, 8), "key: expected a 2-D [L, E] or a batched 3-D tensor like query's [3, 1, 8]"),
        ((3, 1, 8), (4, 1, 8), (3, 1, 8), "value: expected the shape of key [4, 1]"),
    ],
)
@pytest.mark.parametrize("explicit", [False, True])
def test_multihead_attention_names_the_input_of_the_wrong_width(query, key, value, word, explicit):
    """torch's own errors were a bare AssertionError ("was expecting embedding dimension of 8, but got 6") or a
    matmul error; the drop-in names the argument, on both of its paths."""
    from graph_rma.nn import RepulsiveMultiheadAttention

    layer = RepulsiveMultiheadAttention(8, 2, store_attention=explicit)
    with pytest.raises(ValueError) as e:
        layer(torch.randn(*query), torch.randn(*key), torch.randn(*value))
    assert str(e.value).startswith(word) and "\n" not in str(e.value)


def test_multihead_attention_names_an_input_of_another_dtype():
    from graph_rma.nn import RepulsiveMultiheadAttention

    layer = RepulsiveMultiheadAttention(8, 2)
    x = torch.randn(3, 1, 8, dtype=torch.float64)
    with pytest.raises(
        ValueError,
        match=r"^query: expected dtype torch.float32 \(the layer's parameters\), got "
        r"torch.float64",
    ):
        layer(x, x, x)
    assert layer.to(torch.float64)(x, x, x)[0].dtype == torch.float64  # a layer of the input's dtype runs


BOOL_OPTIONS = (
    [("ClassicGAT", name) for name in ("residual", "pre_linear", "v2", "self_loops", "lean")]
    + [("TwoLayerGAT", name) for name in ("v2", "self_loops", "lean")]
    + [("ResidualGAT", name) for name in ("v2", "self_loops", "sep", "lean")]
)


@pytest.mark.parametrize("model,name", BOOL_OPTIONS, ids=[f"{m}-{n}" for m, n in BOOL_OPTIONS])
@pytest.mark.parametrize("value", ["false", "no", "False", 0, 1, None])
def test_model_boolean_options_take_a_bool_only(model, name, value):
    """Issue 67, item 1: residual="false" built residual maps, v2="no" GATv2, lean="False" the lean path."""
    from graph_rma import GraphRMAError, models

    cls = getattr(models, model)
    with pytest.raises(GraphRMAError, match=rf"^{name}: expected a bool \(True or False\), got {value!r}$"):
        cls(5, 3, **{name: value})
    assert cls(5, 3, **{name: False}).model_kwargs[name] is False  # a bool builds, and is kept as given


@pytest.mark.parametrize("value", ["2", True, float("inf"), float("nan"), 0, -1.0, None])
def test_residual_gat_refuses_a_bad_ffn_multiplier_naming_it(value):
    """Issue 67, item 5 and issue 65, item 9: "2" and True were accepted, inf ended in an OverflowError."""
    with pytest.raises(graph_rma.GraphRMAError, match=r"^ffn_multiplier: expected a finite positive number") as e:
        ResidualGAT(4, 2, hidden=8, heads=2, ffn_multiplier=value)
    assert "\n" not in str(e.value)
    with pytest.raises(graph_rma.GraphRMAError, match=r"^ffn_multiplier: expected at least 1 / hidden \(0.125\)"):
        ResidualGAT(4, 2, hidden=8, heads=2, ffn_multiplier=0.1)  # 0 units
    assert ResidualGAT(4, 2, hidden=8, heads=2, ffn_multiplier=2).ffn_in[0].out_features == 16


@pytest.mark.parametrize(
    "build",
    [
        lambda: ResidualGAT(5, 2, hidden=8, heads=2),
        lambda: graph_rma.models.ClassicGAT(5, 2, hidden=8, heads=2, pre_linear=True),
        lambda: graph_rma.models.ClassicGAT(5, 2, hidden=8, heads=2),
    ],
)
def test_node_models_name_the_expected_feature_width(build):
    """Issue 65, item 9: ResidualGAT fed 3 features ended in torch's bare "mat1 and mat2 shapes cannot be
    multiplied"."""
    model, ei = build(), torch.tensor([[0, 1, 2], [1, 2, 0]])
    for call in (model, model.forward_with_attention, model.head_outputs):
        with pytest.raises(
            graph_rma.GraphRMAError,
            match=r"^x: expected node features of shape \[num_nodes, 5\] \(in_channels\), "
            r"got shape \[3, 3\]$",
        ):
            call(torch.randn(3, 3), ei)
    assert model(torch.randn(3, 5), ei).shape == (3, 2)
