"""Silent-wrong results turned into exact values or one-line errors (issue: 'Wrong without a word')."""
import pytest
import torch

import graph_rma
from graph_rma.engine import read_json
from graph_rma.engine.files import read_lines
from graph_rma.variants import parse_variant


def test_variant_specs_keep_the_users_exact_float():
    for spec, value in (("svgd:alpha=0.123456789", 0.123456789), ("spos:alpha=0.1000000001", 0.1000000001)):
        v = parse_variant(spec)
        assert v.alpha == value and parse_variant(v.spec).alpha == value and v.spec == spec
    # values that 6 digits already give exactly keep their short form (existing run names do not change)
    assert parse_variant("sgld:eps=8,beta=1e7").spec == "sgld:eps=8,beta=1e07"
    assert parse_variant("reg:kind=frobenius,weight=0.0123456789").reg_weight == 0.0123456789
    assert parse_variant(parse_variant("reg:kind=frobenius,weight=0.0123456789").spec).reg_weight == 0.0123456789


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
    for bad, match in (({**good, "steps": torch.tensor(-5)}, "'steps' must be an integer >= 0, got -5"),
                       ({**good, "steps": 2.7}, "'steps' must be an integer >= 0, got 2.7"),
                       ({**good, "steps": "x"}, "'steps' must be an integer >= 0"),
                       ({**good, "generator": good["generator"][:10]}, "'generator' must be a CPU torch.Generator"),
                       ({**good, "generator": good["generator"].float()}, "'generator' must be"),
                       ({**good, "extra": 1}, r"unknown key\(s\) \['extra'\]")):
        with pytest.raises(ValueError, match=match):
            sampler.load_state_dict(bad)
    assert sampler.steps == 0  # nothing half-applied
    sampler.load_state_dict({**good, "steps": torch.tensor(7)})
    assert sampler.steps == 7


def test_a_byte_order_mark_is_not_text(tmp_path):
    path = tmp_path / "hyp.txt"
    path.write_bytes("\ufeffthe cat sat\nline two\n".encode("utf-8"))
    assert read_lines(path) == ["the cat sat", "line two"]
    (tmp_path / "a.json").write_bytes("\ufeff{\"a\": 1}".encode("utf-8"))
    assert read_json(tmp_path / "a.json") == {"a": 1}


def test_score_is_the_same_with_and_without_a_bom(tmp_path, capsys):
    pytest.importorskip("pycocoevalcap")
    from graph_rma.cli import main

    text = "the cat sat on the mat today\na dog ran in the park\n"
    (tmp_path / "ref.txt").write_text(text)
    (tmp_path / "plain.txt").write_text(text)
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    scores = []
    for hyp in ("plain.txt", "bom.txt"):
        out = tmp_path / f"{hyp}.json"
        assert main(["score", "--hyp", str(tmp_path / hyp), "--ref", str(tmp_path / "ref.txt"), "--meteor", "none", "--json",
                     str(out)]) == 0
        scores.append(read_json(out))
    capsys.readouterr()
    assert scores[0] == scores[1]
