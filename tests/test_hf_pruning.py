"""graph_rma.hf.prune_heads and from_pretrained: original head indexes, the config record, the optimizer and an
attached sampler, bad indexes, and a pruned model saved and loaded back (tiny models built from configs)."""

import pytest
import torch

pytest.importorskip("transformers", minversion="5", reason="transformers>=5 (extra 'hf') is not installed")
from transformers import (
    AutoModelForCausalLM,
    BertConfig,
    BertForSequenceClassification,
    DebertaV2Config,
    DebertaV2Model,
    LlamaConfig,
    LlamaForCausalLM,
)

import graph_rma
import graph_rma.hf as hf
from graph_rma.diagnostics import mask_heads


def bert_config():
    return BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=3,
        attn_implementation="eager",
    )


def bert(seed=0, config=None):
    torch.manual_seed(seed)
    return BertForSequenceClassification(config or bert_config())


def llama(seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    return LlamaForCausalLM(cfg)


def logits(model, seed=1):
    ids = torch.randint(1, 40, (2, 6), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_indexes_are_the_original_layers_and_the_config_remembers_them():
    model = bert().eval()
    layer = model.get_submodule("bert.encoder.layer.0.attention")
    with mask_heads(layer, [1, 2]):
        masked = logits(model)
    assert hf.prune_heads(model, {0: [1]}) == {"bert.encoder.layer.0.attention": [1]}
    # original head 2 is now the layer's second head; [2] still means original head 2, and head 1 is skipped
    assert hf.prune_heads(model, {0: [1, 2]}) == {"bert.encoder.layer.0.attention": [2]}
    assert model.config.pruned_heads == {0: [1, 2]}
    assert torch.allclose(logits(model), masked, rtol=1e-5, atol=1e-6)
    assert hf.attention_layers(model)["bert.encoder.layer.0.attention"].heads == 2
    with pytest.raises(graph_rma.GraphRMAError, match=r"has 4 heads \(original indexes 0 to 3\), got \[4\]"):
        hf.prune_heads(model, {0: [4]})
    with pytest.raises(graph_rma.GraphRMAError, match="pruning all 4 heads"):
        hf.prune_heads(model, {0: [0, 3]})


def test_pruning_never_changes_a_config_the_user_holds():
    config = bert_config()
    first, second = bert(config=config), bert(config=config)
    hf.prune_heads(first, {1: [0]})
    assert not hasattr(config, "pruned_heads") and second.config is config
    assert first.config is not config and first.bert.config is first.config
    assert first.bert.encoder.layer[0].attention.self.config is first.config
    assert logits(second).shape == (2, 3)  # the other model still runs whole


def test_grouped_query_pruning_with_original_indexes():
    model = llama().eval()
    with mask_heads(model.get_submodule("model.layers.1.self_attn"), [0, 1, 2, 3][2:]):
        masked = logits(model)
    hf.prune_heads(model, {1: [2, 3]})
    assert model.config.pruned_heads == {1: [2, 3]}
    assert model.model.layers[1].self_attn.k_proj.out_features == 4
    assert torch.allclose(logits(model), masked, rtol=1e-5, atol=1e-6)
    with pytest.raises(graph_rma.GraphRMAError, match=r"query heads \[0, 1\] share key/value head 0"):
        hf.prune_heads(model, {0: [1]})


@pytest.mark.parametrize(
    "heads,message",
    [
        ({0: [1.5]}, r"layer 0 lists 1.5; head indexes are non-negative ints"),
        ({0: ["1"]}, r"layer 0 lists '1'; head indexes are non-negative ints"),
        ({0: [-0.5]}, r"layer 0 lists -0.5"),
        ({0: [-1]}, r"layer 0 lists -1"),
        ({0: [True]}, r"layer 0 lists True"),
        ({0: 1}, r"layer 0 maps to 1; give a list of head indexes, e.g. \{0: \[1, 3\]\}"),
        ({0: "1"}, r"layer 0 maps to '1'"),
        ([0, 1], r"expected a mapping layer -> head indexes, e.g. \{0: \[1, 3\]\}, got list \[0, 1\]"),
    ],
)
def test_bad_heads_are_refused_in_one_line(heads, message):
    model = bert()
    before = model.bert.encoder.layer[0].attention.self.query.weight
    with pytest.raises(graph_rma.GraphRMAError, match=message) as caught:
        hf.prune_heads(model, heads)
    assert "\n" not in str(caught.value)
    assert model.bert.encoder.layer[0].attention.self.query.weight is before  # nothing pruned


def test_a_model_without_recognised_attention_is_named():
    cfg = DebertaV2Config(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=4, intermediate_size=32
    )
    with pytest.raises(graph_rma.GraphRMAError, match=r"DebertaV2Model \(model_type 'deberta-v2'\) has no attention"):
        hf.prune_heads(DebertaV2Model(cfg), {0: [1]})


def test_a_given_optimizer_gets_the_pruned_parameters_and_its_state_sliced():
    model = bert()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([1])).loss.backward()
    optimizer.step()
    query = model.bert.encoder.layer[0].attention.self.query
    moment = optimizer.state[query.weight]["exp_avg"].clone()
    hf.prune_heads(model, {0: [1, 3]}, optimizer=optimizer)
    held = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert all(id(p) in held for p in model.parameters())
    rows = torch.tensor([0, 1, 2, 3, 8, 9, 10, 11])
    assert torch.equal(optimizer.state[query.weight]["exp_avg"], moment[rows])
    before = query.weight.detach().clone()
    optimizer.zero_grad()
    model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([1])).loss.backward()
    optimizer.step()
    assert not torch.equal(query.weight, before)  # the pruned layer trains


def test_an_attached_sampler_is_refused_until_detached():
    model = bert()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    sampler = graph_rma.SVGD(model, alpha=0.1, eps=1)
    sampler.attach(optimizer)
    with pytest.raises(graph_rma.GraphRMAError, match=r"held by an attached SVGD.*prune before building the sampler"):
        hf.prune_heads(model, {0: [1, 3]}, optimizer=optimizer)
    assert model.bert.encoder.layer[0].attention.self.query.out_features == 16
    sampler.detach()
    hf.prune_heads(model, {0: [1, 3]}, optimizer=optimizer)
    groups = {g.name: g.num_heads for g in graph_rma.SVGD(model, alpha=0.1, eps=1).groups}
    assert groups["bert.encoder.layer.0.attention"] == 2


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_a_pruned_model_saved_loads_back(tmp_path, family):
    model = (bert if family == "bert" else llama)().eval()
    heads = {0: [1, 3], 1: [0]} if family == "bert" else {1: [0, 1]}
    hf.prune_heads(model, heads)
    hf.prune_heads(model, {0: [2]} if family == "bert" else {0: [2, 3]})
    expected = logits(model)
    model.save_pretrained(tmp_path)
    cls = BertForSequenceClassification if family == "bert" else AutoModelForCausalLM
    loaded = hf.from_pretrained(cls, str(tmp_path))
    assert not loaded.training and type(loaded) is type(model)
    assert loaded.config.pruned_heads == model.config.pruned_heads
    saved, back = model.state_dict(), loaded.state_dict()
    assert saved.keys() == back.keys() and all(torch.equal(saved[k], back[k]) for k in saved)
    assert torch.allclose(logits(loaded), expected, rtol=1e-5, atol=1e-6)  # sdpa or eager: rounding only
    with pytest.raises(Exception):  # transformers' own loader refuses the smaller weights
        type(model).from_pretrained(tmp_path)


def test_an_unpruned_model_loads_through_transformers(tmp_path):
    model = bert().eval()
    model.save_pretrained(tmp_path)
    assert torch.equal(logits(hf.from_pretrained(BertForSequenceClassification, str(tmp_path))), logits(model))
    with pytest.raises(graph_rma.GraphRMAError, match="is not a folder written by save_pretrained"):
        hf.from_pretrained(BertForSequenceClassification, str(tmp_path / "nothing"))
