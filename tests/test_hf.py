"""graph_rma.hf: DropAttention, heads as particles, diagnostics and pruning in HuggingFace models (tiny random models
built from configs; nothing is downloaded)."""

import ast
import copy
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers", minversion="5", reason="transformers>=5 (extra 'hf') is not installed")
from conftest import REPO
from transformers import (
    AlbertConfig,
    AlbertModel,
    BartConfig,
    BartModel,
    BertConfig,
    BertForSequenceClassification,
    DebertaV2Config,
    DebertaV2Model,
    DistilBertConfig,
    DistilBertModel,
    GPT2Config,
    GPT2Model,
    LlamaConfig,
    LlamaForCausalLM,
)

import graph_rma
import graph_rma.hf as hf
from graph_rma.diagnostics import HeadCapture, head_diversity, head_importance, mask_heads
from graph_rma.dropattention import drop_attention_dense
from graph_rma.particles import svgd_direction

D = 4  # head dimension of every tiny model


def bert(layers=2, attention_dropout=0.0, seed=0):
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=attention_dropout,
        num_labels=3,
        attn_implementation="eager",
    )
    return BertForSequenceClassification(cfg)


def llama(layers=2, kv_heads=2, seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        intermediate_size=32,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    return LlamaForCausalLM(cfg)


MODELS = {"bert": bert, "llama": llama}


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 40, (3, 7), generator=g)
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[1, 5:] = 0  # right padding
    mask[2, 3:] = 0
    return ids, mask


def run(model, ids, mask=None, **kw):
    out = model(input_ids=ids, attention_mask=mask, output_attentions=True, **kw)
    return out.logits, out.attentions


def with_drop(model, drop):
    dropped = copy.deepcopy(model)
    hf.use_drop_attention(dropped, drop)
    return dropped


# ---------------------------------------------------------------------------------------------------------------
# 1. DropAttention
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", MODELS)
def test_p0_and_eval_equal_the_eager_implementation(family):
    model = MODELS[family]()
    ids, mask = batch()
    zero = with_drop(model, graph_rma.DropAttention(0.0))
    active = with_drop(model, graph_rma.DropAttention(0.4, window=2, mode="column"))
    assert zero.config._attn_implementation == hf.ATTENTION_NAME and model.config._attn_implementation == "eager"
    for train in (True, False):  # p = 0 in train(), any p in eval(): bit-identical to eager
        for m in (model, zero, active):
            m.train(train)
        logits, attn = run(model, ids, mask)
        others = [zero] if train else [zero, active]
        for other in others:
            logits2, attn2 = run(other, ids, mask)
            assert torch.equal(logits, logits2)
            assert all(torch.equal(a, b) for a, b in zip(attn, attn2))


@pytest.mark.parametrize("family", MODELS)
def test_the_padding_mask_is_kept(family):
    model = with_drop(MODELS[family](), graph_rma.DropAttention(0.5))
    ids, mask = batch()
    model.eval()
    padded, _ = run(model, ids, mask)
    for row in (1, 2):
        n = int(mask[row].sum())
        alone, _ = run(model, ids[row : row + 1, :n])
        if family == "llama":  # logits per token: the real tokens
            assert torch.allclose(padded[row, :n], alone[0], atol=1e-5)
        else:  # one prediction per sequence
            assert torch.allclose(padded[row], alone[0], atol=1e-5)
    _, plain = run(model, ids, mask)
    model.train()  # dropped weights: still nothing on padded keys, and rows sum to 1
    torch.manual_seed(0)
    _, attn = run(model, ids, mask)
    for a, b in zip(attn, plain):
        assert torch.all(a[1, :, :, 5:] == 0) and torch.all(a[2, :, :, 3:] == 0)
        assert torch.allclose(a.sum(-1), torch.ones(()), atol=1e-5) and not torch.equal(a, b)


OPTIONS = [
    dict(p=0.3),
    dict(p=0.3, window=2, mode="column"),
    dict(p=0.3, window=3, rescale="inverse"),
    dict(p=0.4, mode="column", rescale="inverse"),
    dict(),
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "layer-rate")
@pytest.mark.parametrize("family", MODELS)
def test_train_weights_are_the_dense_dropattention_of_the_eager_weights(family, options):
    """One layer: the weights output_attentions returns are drop_attention_dense(eager weights) from the same seed."""
    model = bert(layers=1, attention_dropout=0.3) if family == "bert" else llama(layers=1)
    if family == "llama" and not options:  # Llama's attention_dropout: a rate of 0, so DropAttention() is identity
        model.config.attention_dropout = 0.3
        for layer in model.model.layers:
            layer.self_attn.attention_dropout = 0.3
    ids, mask = batch()
    model.train()
    _, plain = run(with_drop(model, graph_rma.DropAttention(0.0)), ids, mask)
    dropped = with_drop(model, graph_rma.DropAttention(**options))
    torch.manual_seed(7)
    _, got = run(dropped, ids, mask)
    torch.manual_seed(7)
    full = {"p": 0.3, "window": 1, "mode": "element", "rescale": "normalized", **options}
    expected = drop_attention_dense(plain[0], **full)
    assert torch.equal(got[0], expected) and not torch.equal(got[0], plain[0])


def test_a_family_without_the_interface_gets_one_error_naming_it():
    cfg = DebertaV2Config(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=4, intermediate_size=32
    )
    model = DebertaV2Model(cfg)
    message = r"^model: DebertaV2Model \(model_type 'deberta-v2'\) computes attention in its own code"
    with pytest.raises(ValueError, match=message):
        hf.use_drop_attention(model, graph_rma.DropAttention(0.1))
    with pytest.raises(ValueError, match=message):
        graph_rma.apply_variant("dropattn:p=0.1", model)
    with pytest.raises(ValueError, match="holds no transformers PreTrainedModel"):
        hf.use_drop_attention(torch.nn.Linear(2, 2), graph_rma.DropAttention(0.1))


def test_removing_restores_the_implementation_and_a_rate_change_is_named():
    model = bert(attention_dropout=0.1)
    with pytest.warns(UserWarning, match=r"DropAttention\(p=0.3\) replaces the model's attention dropout 0.1"):
        installed = hf.use_drop_attention(model, graph_rma.DropAttention(0.3))
    assert len(installed) == 2 and model.bert.encoder.layer[0].attention.self.drop_attention is installed[0]
    assert set(model.state_dict()) == set(bert().state_dict())
    assert hf.use_drop_attention(model, None) == []
    assert model.config._attn_implementation == "eager"
    assert not hasattr(model.bert.encoder.layer[0].attention.self, "drop_attention")


@pytest.mark.parametrize("family", MODELS)
def test_two_models_built_from_one_config_keep_their_own_implementation(family):
    """A model keeps the config object it was built from: switching the implementation there switched every other
    model built from the same config (which then failed for want of a DropAttention). The user's config and the
    other model stay as they were, through install and removal."""
    first = MODELS[family]()
    config = first.config
    second = type(first)(config)
    ids, mask = batch()
    second.eval()
    before, _ = run(second, ids, mask)
    hf.use_drop_attention(first, graph_rma.DropAttention(0.3))
    assert config._attn_implementation == "eager" and second.config is config
    assert first.config is not config and first.config._attn_implementation == hf.ATTENTION_NAME
    inner = first.model if family == "llama" else first.bert
    assert inner.config is first.config  # the inner model and every layer read the same private copy
    assert all(
        m.config is first.config for m in first.modules() if isinstance(getattr(m, "config", None), type(config))
    )
    second.train()
    run(second, ids, mask)  # used to fail: "runs attn_implementation=... without a DropAttention installed"
    second.eval()
    assert torch.equal(run(second, ids, mask)[0], before)
    first.train()
    run(first, ids, mask)
    hf.use_drop_attention(first, None)
    assert first.config._attn_implementation == "eager" and config._attn_implementation == "eager"
    hf.use_drop_attention(first, graph_rma.DropAttention(0.3))  # again: the model's own copy, the user's untouched
    assert config._attn_implementation == "eager" and first.config._attn_implementation == hf.ATTENTION_NAME


def test_bad_models_are_refused_in_one_line_when_installing():
    """``None`` for a model was an AttributeError; a Gemma-2-style model (attention logit soft-capping) was refused
    only at its first forward."""
    from transformers import Gemma2Config, Gemma2Model

    with pytest.raises(graph_rma.GraphRMAError, match=r"^model: expected a transformers model .*got NoneType$"):
        hf.use_drop_attention(None, graph_rma.DropAttention(0.1))
    with pytest.raises(graph_rma.GraphRMAError, match="got NoneType$"):
        hf.use_drop_attention(None, None)
    cfg = Gemma2Config(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=4,
        intermediate_size=32,
        attn_logit_softcapping=50.0,
        attn_implementation="eager",
    )
    gemma = Gemma2Model(cfg)
    with pytest.raises(graph_rma.GraphRMAError, match=r"^model: Gemma2Model uses attention logit soft-capping"):
        hf.use_drop_attention(gemma, graph_rma.DropAttention(0.1))
    assert gemma.config._attn_implementation == "eager"
    assert not any(hasattr(m, "drop_attention") for m in gemma.modules())
    cfg.attn_logit_softcapping = None  # without soft-capping the family is plain attention: installed
    assert len(hf.use_drop_attention(Gemma2Model(cfg), graph_rma.DropAttention(0.1))) == 2


# ---------------------------------------------------------------------------------------------------------------
# 2. Heads as particles
# ---------------------------------------------------------------------------------------------------------------
def rows(t, h):
    return t[h * D : (h + 1) * D]


def test_bert_particles_are_one_heads_rows_and_output_columns():
    model = bert()
    groups = graph_rma.find_particle_groups(model)
    assert [g.name for g in groups] == [f"bert.encoder.layer.{i}.attention" for i in range(2)]
    att = model.bert.encoder.layer[1].attention
    s = att.self
    h = 2
    by_hand = torch.cat(
        [
            rows(s.query.weight, h).flatten(),
            rows(s.query.bias, h),
            rows(s.key.weight, h).flatten(),
            rows(s.key.bias, h),
            rows(s.value.weight, h).flatten(),
            rows(s.value.bias, h),
            att.output.dense.weight[:, h * D : (h + 1) * D].t().flatten(),
        ]
    ).detach()
    assert groups[1].num_heads == 4 and groups[1].roles == ["key", "out", "query", "value"]
    assert torch.equal(groups[1].theta()[h], by_hand)
    only = graph_rma.find_particle_groups(model, layers=["bert.encoder.layer.1.attention"], roles=["query", "key"])
    assert len(only) == 1 and only[0].dim == 2 * (16 * D + D)
    assert torch.equal(only[0].theta()[h], by_hand[: 2 * (16 * D + D)])


def test_grouped_query_attention_gives_query_and_key_value_particles():
    model = llama(layers=1)
    attn = model.model.layers[0].self_attn
    q, kv = graph_rma.find_particle_groups(model)
    assert (q.name, q.num_heads, q.roles) == ("model.layers.0.self_attn", 4, ["out", "query"])
    assert (kv.name, kv.num_heads, kv.roles) == ("model.layers.0.self_attn:key/value", 2, ["key", "value"])
    h, g = 3, 1
    assert torch.equal(
        q.theta()[h],
        torch.cat(
            [rows(attn.q_proj.weight, h).flatten(), attn.o_proj.weight[:, h * D : (h + 1) * D].t().flatten()]
        ).detach(),
    )
    assert torch.equal(
        kv.theta()[g],
        torch.cat([rows(attn.k_proj.weight, g).flatten(), rows(attn.v_proj.weight, g).flatten()]).detach(),
    )
    mqa = graph_rma.find_particle_groups(llama(layers=1, kv_heads=1))  # one key/value head: nothing to repel
    assert [g.name for g in mqa] == ["model.layers.0.self_attn"]


FAMILIES = {  # model, the attention module of layer 0, its query projection and its heads/kv heads
    "albert": (
        lambda: AlbertModel(
            AlbertConfig(
                vocab_size=40,
                embedding_size=8,
                hidden_size=16,
                num_attention_heads=4,
                intermediate_size=32,
                num_hidden_layers=1,
            )
        ),
        "encoder.albert_layer_groups.0.albert_layers.0.attention",
        "query",
    ),
    "distilbert": (
        lambda: DistilBertModel(DistilBertConfig(vocab_size=40, dim=16, n_heads=4, n_layers=1, hidden_dim=32)),
        "transformer.layer.0.attention",
        "q_lin",
    ),
    "bart": (
        lambda: BartModel(
            BartConfig(
                vocab_size=40,
                d_model=16,
                encoder_layers=1,
                decoder_layers=1,
                encoder_attention_heads=4,
                decoder_attention_heads=4,
                encoder_ffn_dim=32,
                decoder_ffn_dim=32,
            )
        ),
        "encoder.layers.0.self_attn",
        "q_proj",
    ),
    "gpt2": (
        lambda: GPT2Model(GPT2Config(vocab_size=40, n_embd=16, n_layer=1, n_head=4, n_positions=32)),
        "h.0.attn",
        "c_attn",
    ),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_other_families_are_found_from_their_config(family):
    build, name, query = FAMILIES[family]
    torch.manual_seed(0)
    model = build()
    groups = {g.name: g for g in graph_rma.find_particle_groups(model)}
    group = groups[name]
    assert group.num_heads == 4 and group.roles == ["key", "out", "query", "value"]
    w = model.get_submodule(name).get_submodule(query).weight
    head1 = w[:, D : 2 * D].t() if family == "gpt2" else rows(w, 1)  # GPT-2's Conv1D weight is [in, out]
    assert torch.equal(group.theta()[1][: head1.numel()], head1.flatten().detach())


def test_svgd_changes_only_attention_gradients_and_matches_the_sampler_on_the_slices():
    model = bert()
    frozen = model.bert.encoder.layer[1].attention.self.value.weight
    frozen.requires_grad_(False)
    ids, mask = batch()
    labels = torch.tensor([0, 1, 2])
    model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
    before = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    sampler = graph_rma.SVGD(model, alpha=0.5, eps=0.1, max_repulsive_step=None)
    groups = sampler.groups
    expected = [-0.1 * svgd_direction(g.theta(), g.grad(), alpha=0.5) for g in [sampler._trainable(g) for g in groups]]
    sampler.step()
    assert frozen.grad is None
    attention = {id(p.param) for g in groups for p in g.params}
    for n, p in model.named_parameters():
        if p.grad is not None and id(p) not in attention:
            assert torch.equal(p.grad, before[n]), n  # everything outside the heads keeps its plain gradient
    for g, e in zip(groups, expected):
        assert torch.allclose(sampler._trainable(g).grad(), e, atol=1e-6)
    changed = [n for n, p in model.named_parameters() if p.grad is not None and not torch.equal(p.grad, before[n])]
    assert changed and all(".attention." in n for n in changed)


def test_apply_variant_reads_layers_roles_and_dropattn():
    model = bert()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    setup = graph_rma.apply_variant(
        "svgd:alpha=0.1,roles=query/key,layers=bert.encoder.layer.0.attention+dropattn:p=0.2,w=2,mode=column",
        model,
        opt,
        seed=0,
    )
    assert [g.name for g in setup.sampler.groups] == ["bert.encoder.layer.0.attention"]
    assert setup.sampler.groups[0].roles == ["key", "query"]
    assert [(d.p, d.window, d.mode) for d in setup.drop_attention] == [(0.2, 2, "column")] * 2
    assert model.config._attn_implementation == hf.ATTENTION_NAME


# ---------------------------------------------------------------------------------------------------------------
# 4. Diagnostics and pruning
# ---------------------------------------------------------------------------------------------------------------
def test_head_capture_diversity_and_importance():
    model = bert().eval()
    ids, mask = batch()
    layer = model.bert.encoder.layer[0].attention
    with HeadCapture(layer) as cap:
        logits, attn = run(model, ids, mask)
    assert cap.outputs.shape == (3, 7, 4, D) and torch.equal(cap.attn, attn[0]) and cap.calls == 1
    # the heads' outputs are the attention-weighted values: head 1 by hand
    v = layer.self.value(model.bert.embeddings(input_ids=ids)).view(3, 7, 4, D)[:, :, 1]
    assert torch.allclose(cap.outputs[:, :, 1], attn[0][:, 1] @ v, atol=1e-6)
    assert set(head_diversity(cap.outputs, cap.attn)) >= {"dist", "div", "disagreement", "entropy"}
    res = head_importance(model, ["bert.encoder.layer.0.attention"], lambda: run(model, ids, mask)[0].sum().item())
    assert len(res.drops["bert.encoder.layer.0.attention"]) == 4 and res.baseline == logits.sum().item()


@pytest.mark.parametrize(
    "family,layer,heads",
    [("bert", "bert.encoder.layer.0.attention", [1, 3]), ("llama", "model.layers.1.self_attn", [2, 3])],
)
def test_pruning_equals_masking(family, layer, heads):
    model = MODELS[family]().eval()
    ids, mask = batch()
    with mask_heads(model.get_submodule(layer), heads):
        masked, _ = run(model, ids, mask)
    key = 0 if family == "bert" else layer
    assert hf.prune_heads(model, {key: heads}) == {layer: heads}
    pruned, _ = run(model, ids, mask)
    full, _ = run(MODELS[family]().eval(), ids, mask)
    assert torch.allclose(pruned, masked, rtol=1e-5, atol=1e-7) and (pruned - full).abs().max() > 1e-5
    assert hf.attention_layers(model)[layer].heads == 2
    groups = {g.name: g.num_heads for g in graph_rma.find_particle_groups(model)}
    assert groups[layer] == 2


def test_pruning_refuses_part_of_a_key_value_group_and_every_head():
    model = llama()
    with pytest.raises(ValueError, match=r"prune whole groups; query heads \[0, 1\] share key/value head 0"):
        hf.prune_heads(model, {"model.layers.0.self_attn": [1, 2]})
    with pytest.raises(ValueError, match="would leave an empty layer"):
        hf.prune_heads(model, {0: [0, 1], 1: [0, 1, 2, 3]})
    assert model.model.layers[0].self_attn.q_proj.out_features == 16  # nothing changed: all layers checked first
    with pytest.raises(ValueError, match="is not an attention layer"):
        hf.prune_heads(model, {"model.layers.0": [0]})


# ---------------------------------------------------------------------------------------------------------------
# The boundary
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_only_graph_rma_hf_imports_transformers():
    offenders = []
    for path in (REPO / "src" / "graph_rma").rglob("*.py"):
        if "hf" in path.relative_to(REPO / "src" / "graph_rma").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("transformers", "accelerate")]
    assert offenders == []


@pytest.mark.slow
def test_models_without_transformers_modules_do_not_load_it():
    code = (
        "import sys, torch, graph_rma; graph_rma.find_particle_groups(torch.nn.MultiheadAttention(8, 2)); "
        "print('graph_rma.hf' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.stdout.split() == ["False"], out.stderr[-2000:]
