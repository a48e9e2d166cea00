import pytest
import torch
from torch_geometric.nn import GATConv

from graph_rma import SGLD, SPOS, SVGD
from graph_rma.variants import make_sampler, parse_variant, regularization_loss


@pytest.mark.parametrize(
    "spec",
    [
        "ma",
        "svgd",
        "svgd:alpha=0.1,eps=0.5",
        "spos:alpha=1,beta=1000,bandwidth=liu",
        "sgld:beta=100",
        "svgd:roles=att_src/att_dst,layers=conv1",
        "reg:kind=disagreement,weight=0.1,target=parameters",
        "reg:kind=frobenius,weight=0.01",
        "dropattn:p=0.2,w=3,mode=column,rescale=inverse",
        "svgd:alpha=0.5+dropattn:p=0.1",
        "svgd:kernel_grad=0",
        "svgd:alpha=0.01,update=authors",
        "spos:alpha=0.1,eps=0.5,beta=2,update=authors,roles=lin",
        "svgd:update=paper",
        "svgd:update=authors,view=heads,roles=ws2",
    ],
)
def test_spec_round_trip(spec):
    v = parse_variant(spec)
    assert parse_variant(v.spec) == v


def test_parsed_values():
    v = parse_variant("spos:alpha=0.1,eps=2,beta=1000,roles=query/key+dropattn:p=0.3,w=2,mode=c")
    assert (v.sampler, v.alpha, v.eps, v.beta, v.roles) == ("spos", 0.1, 2.0, 1000.0, ("query", "key"))
    assert v.drop_attention_kwargs == {"p": 0.3, "window": 2, "mode": "column", "rescale": "normalized"}
    assert v.name == "spos+dropattn"
    assert parse_variant("dropattn").name == "dropattn" and parse_variant("reg").name == "reg"


@pytest.mark.parametrize(
    "bad, word",
    [
        ("", "variant"),
        ("svgd+spos", "two samplers"),
        ("svgd:alpha=x", "alpha"),
        ("foo", "unknown part"),
        ("svgd:gamma=1", "gamma"),
        ("reg:kind=l2", "kind"),
        ("dropattn:mode=q", "mode"),
        ("svgd:alpha", "key=value"),
    ],
)
def test_bad_specs(bad, word):
    with pytest.raises(ValueError, match=word):
        parse_variant(bad)


def test_make_sampler_types_and_options():
    conv = GATConv(4, 2, heads=3)
    assert make_sampler("ma", conv) is None and make_sampler("reg", conv) is None
    s = make_sampler("svgd:alpha=0.3,eps=0.5,roles=att_src", conv)
    assert isinstance(s, SVGD) and s.alpha == 0.3 and s.eps == 0.5 and s.groups[0].roles == ["att_src"]
    assert isinstance(make_sampler("spos:beta=10", conv, seed=3), SPOS)
    assert isinstance(make_sampler("sgld", conv), SGLD)


def test_regularization_loss_weights_terms():
    A = torch.full((2, 2), 0.5)
    assert regularization_loss("reg:kind=frobenius,weight=0.1", attention=[A]).item() == pytest.approx(0.1)
    alpha = torch.tensor([[1.0, 1.0]])
    sparse = regularization_loss("reg:kind=frobenius,weight=1", attention=[(alpha, torch.tensor([0]))])
    assert sparse.item() == pytest.approx(2.0)
    assert regularization_loss("svgd", attention=[A]) is None
    with pytest.raises(ValueError, match="attention"):
        regularization_loss("reg")
    outs = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])
    assert regularization_loss(
        "reg:kind=disagreement,weight=2,target=outputs", head_outputs=[outs]
    ).item() == pytest.approx(2.0)


@pytest.mark.parametrize(
    "bad, word",
    [
        ("svgd:kernel_grad=maybe", "kernel_grad"),
        ("dropattn:window=2.7", "window"),
        ("dropattn:w=0", "window"),
        ("svgd:alpha=1,alpha=2", "duplicate key 'alpha'"),
        ("dropattn:w=2,window=3", "duplicate key 'window'"),
        ("svgd:alpha=-1", "alpha"),
        ("svgd:alpha=nan", "alpha"),
        ("svgd:eps=0", "eps"),
        ("spos:beta=-1", "beta"),
        ("svgd:bandwidth=silverman", "bandwidth"),
        ("svgd:bandwidth=-2", "bandwidth"),
        ("dropattn:p=1.5", "p"),
        ("dropattn:rescale=sum", "rescale"),
        ("reg:weight=-0.1", "weight"),
        ("svgd:roles=/", "roles"),
        ("dropattn:p=0.1+dropattn:p=0.2", "twice"),
        ("reg+reg:weight=1", "twice"),
    ],
)
def test_strict_parsing_names_the_key(bad, word):
    with pytest.raises(ValueError, match=word):
        parse_variant(bad)


def test_strict_parsing_accepts_the_documented_spellings():
    assert parse_variant("svgd:kernel_grad=false").kernel_grad is False
    assert parse_variant("svgd:kernel_grad=Yes").kernel_grad is True
    assert parse_variant("dropattn:window=3").drop_attention_kwargs["window"] == 3
    assert parse_variant("svgd:alpha=0").alpha == 0.0


def test_variant_specs_keep_the_users_exact_float():
    for spec, value in (("svgd:alpha=0.123456789", 0.123456789), ("spos:alpha=0.1000000001", 0.1000000001)):
        v = parse_variant(spec)
        assert v.alpha == value and parse_variant(v.spec).alpha == value and v.spec == spec
    # values that 6 digits already give exactly keep their short form (existing run names do not change)
    assert parse_variant("sgld:eps=8,beta=1e7").spec == "sgld:eps=8,beta=1e07"
    assert parse_variant("reg:kind=frobenius,weight=0.0123456789").reg_weight == 0.0123456789
    assert parse_variant(parse_variant("reg:kind=frobenius,weight=0.0123456789").spec).reg_weight == 0.0123456789


@pytest.mark.parametrize(
    "spec,message",
    [
        ("svgd:alpha=\u0660.\u0665", r"holds '\u0660' at position 11; a spec is written in ASCII without spaces"),
        ("svgd:eps=\uff11", r"holds '\uff11' at position 9"),
        ("svgd:alpha=0.1,\u00a0eps=1", r"holds '\\xa0' at position 15"),
        ("svgd:alpha =0.1", r"holds ' ' at position 10"),
        ("svgd:alpha=0.1, eps=1", r"holds ' ' at position 15"),
        ("svgd:alpha=0.1,\neps=1", r"holds '\\n' at position 15"),
        ("svgd: alpha=0.1", r"holds ' ' at position 5"),
        ("svgd:warmup=1_000", r"warmup='1_000' in 'svgd:warmup=1_000' is not an integer in ASCII digits$"),
        ("spos:beta=1_000", r"beta='1_000' in 'spos:beta=1_000' is not a number in ASCII digits \(e.g. 0.1, 1e-3\)$"),
        ("svgd:roles=query/key/query", r"roles='query/key/query' in 'svgd:roles=query/key/query' names 'query' twice$"),
        ("svgd:layers=conv1/conv1", r"layers='conv1/conv1' in 'svgd:layers=conv1/conv1' names 'conv1' twice$"),
        (
            "svgd:roles=" + "/".join(["query"] * 10_000),
            r"roles='query/query/.*'\.\.\. \(59999 characters\) in 'svgd:roles=.*'\.\.\. \(60010 characters\) "
            r"names 'query' twice$",
        ),
    ],
)
def test_specs_are_ascii_without_spaces_and_name_each_role_once(spec, message):
    """Issue 67, item 8: Unicode digits (alpha=٠.٥ read as 0.5, １ as 1), 1_000, no-break spaces, newlines and spaces
    around = and , were accepted, and 10,000 copies of one role made 10,000 particle roles."""
    from graph_rma import GraphRMAError

    with pytest.raises(GraphRMAError, match=r"^variant: .*" + message) as e:
        parse_variant(spec)
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_specs_in_ascii_still_parse_signs_points_and_exponents():
    assert parse_variant("svgd:alpha=.5,eps=5.").alpha == 0.5 and parse_variant("svgd:eps=5.").eps == 5.0
    assert parse_variant("sgld:beta=1e07,eps=2E-1").beta == 1e7 and parse_variant("sgld:eps=2E-1").eps == 0.2
    assert parse_variant("svgd:warmup=3").warmup == 3 and parse_variant("  svgd:alpha=0.1\n").alpha == 0.1
    assert parse_variant("svgd:roles=query/key").roles == ("query", "key")
