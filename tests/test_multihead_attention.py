"""RepulsiveMultiheadAttention against torch.nn.MultiheadAttention, convert() on Transformer stacks, head layout."""

import itertools

import pytest
import torch
from torch import nn

import graph_rma
from graph_rma import find_particle_groups
from graph_rma.nn import RepulsiveMultiheadAttention, record_attention

E, H, L, S, B = 8, 2, 4, 5, 3


def _pair(dtype, **kw):
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(E, H, dtype=dtype, **kw)
    if ref.in_proj_bias is not None:  # stock init zeroes the biases: make them matter
        nn.init.normal_(ref.in_proj_bias)
        nn.init.normal_(ref.out_proj.bias)
    ours = RepulsiveMultiheadAttention(E, H, dtype=dtype, **kw)
    ours.load_state_dict(ref.state_dict())
    return ref.eval(), ours.eval()


def _masks(kind_kpm, kind_mask, dtype, g):
    kpm = None
    if kind_kpm != "none":
        kpm = torch.zeros(B, S, dtype=torch.bool)
        kpm[0, -2:] = True
        kpm[2, 1] = True
        if kind_kpm == "float":
            kpm = torch.zeros(B, S, dtype=dtype).masked_fill(kpm, float("-inf"))
    mask = None
    if kind_mask == "bool2d":
        mask = torch.rand(L, S, generator=g) < 0.3
        mask[:, 0] = False  # never mask a whole row
    elif kind_mask == "float3d":
        mask = torch.randn(B * H, L, S, generator=g, dtype=dtype)
    return kpm, mask


GRID = list(
    itertools.product(
        [False, True],
        [False, True],
        [True, False],
        [False, True],
        [False, True],
        ["none", "bool", "float"],
        ["none", "bool2d", "float3d"],
    )
)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equivalence_over_argument_grid(dtype):
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-12, rtol=1e-10)
    g = torch.Generator().manual_seed(1)
    checked = 0
    for batch_first, kvdim, bias, bias_kv, zero_attn, kind_kpm, kind_mask in GRID:
        if kind_kpm == "float" and kind_mask == "bool2d":
            continue  # torch itself rejects mixing bool and float masks
        kw = dict(batch_first=batch_first, bias=bias, add_bias_kv=bias_kv, add_zero_attn=zero_attn)
        if kvdim:
            kw.update(kdim=6, vdim=7)
        ref, ours = _pair(dtype, **kw)
        q = torch.randn(L, B, E, generator=g, dtype=dtype)
        k = torch.randn(S, B, kw.get("kdim", E), generator=g, dtype=dtype)
        v = torch.randn(S, B, kw.get("vdim", E), generator=g, dtype=dtype)
        if batch_first:
            q, k, v = (x.transpose(0, 1) for x in (q, k, v))
        kpm, mask = _masks(kind_kpm, kind_mask, dtype, g)
        for need_weights, average in ((True, True), (True, False), (False, True)):
            args = dict(key_padding_mask=kpm, attn_mask=mask, need_weights=need_weights, average_attn_weights=average)
            out_ref, w_ref = ref(q, k, v, **args)
            for explicit in (False, True):  # default path (stock forward) and the explicit probability path
                ours.store_attention = explicit
                out, w = ours(q, k, v, **args)
                torch.testing.assert_close(out, out_ref, **tol)
                if need_weights:
                    torch.testing.assert_close(w, w_ref, **tol)
                else:
                    assert w is None and w_ref is None
                if explicit:
                    assert ours.last_attention.shape == (B, H, L, S + bias_kv + zero_attn)
            checked += 1
    assert checked > 300


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unbatched_causal_and_fast_path(dtype):
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-12, rtol=1e-10)
    ref, ours = _pair(dtype, batch_first=True)
    x = torch.randn(B, L, E, dtype=dtype)
    causal = nn.Transformer.generate_square_subsequent_mask(L, dtype=dtype)
    for need_weights in (True, False):
        a = ref(x, x, x, attn_mask=causal, is_causal=True, need_weights=need_weights)
        for explicit in (False, True):
            ours.store_attention = explicit
            b = ours(x, x, x, attn_mask=causal, is_causal=True, need_weights=need_weights)
            torch.testing.assert_close(b[0], a[0], **tol)
    # unbatched [L, E] input
    ours.store_attention = True
    a, wa = ref(x[0], x[0], x[0], average_attn_weights=False)
    b, wb = ours(x[0], x[0], x[0], average_attn_weights=False)
    torch.testing.assert_close(b, a, **tol)
    torch.testing.assert_close(wb, wa, **tol)
    assert wb.shape == (H, L, L)
    # inference fast path (eval + no_grad) of the stock layer vs our explicit path
    with torch.no_grad():
        a, _ = ref(x, x, x, need_weights=False)
        b, _ = ours(x, x, x, need_weights=False)
    torch.testing.assert_close(b, a, **tol)
    with pytest.raises(ValueError, match="attn_mask"):
        ours(x, x, x, is_causal=True)


def test_train_mode_dropout_zero_matches_and_bad_args():
    ref, ours = _pair(torch.float64, batch_first=True)
    ref.train(), ours.train()
    x = torch.randn(B, L, E, dtype=torch.float64)
    ours.store_attention = True
    torch.testing.assert_close(ours(x, x, x)[0], ref(x, x, x)[0])
    with pytest.raises(ValueError, match="num_heads"):
        RepulsiveMultiheadAttention(8, 3)
    with pytest.raises(ValueError, match="drop_attention"):
        RepulsiveMultiheadAttention(8, 2, drop_attention=0.1)
    with pytest.raises(ValueError, match="key_padding_mask"):
        ours(x, x, x, key_padding_mask=torch.zeros(B, L + 1, dtype=torch.bool))


def _stack(decoder=False):
    torch.manual_seed(0)
    if decoder:
        layer = nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, dropout=0.1, batch_first=True)
        return nn.TransformerDecoder(layer, num_layers=2)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=True)


@pytest.mark.parametrize("decoder", [False, True])
def test_convert_transformer_outputs_unchanged(decoder):
    ref = _stack(decoder)
    model = graph_rma.convert(ref, inplace=False)
    attn = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    assert attn and all(type(m) is RepulsiveMultiheadAttention for m in attn)
    assert not any(type(m) is nn.MultiheadAttention for m in model.modules())
    for m in attn:  # the attributes the fast path reads are kept
        assert m._qkv_same_embed_dim and m.batch_first and m.in_proj_weight is not None
    x = torch.randn(3, 6, 16)
    mem = torch.randn(3, 5, 16)
    kpm = torch.zeros(3, 6, dtype=torch.bool)
    kpm[1, 4:] = True
    run = (lambda m: m(x, mem, tgt_key_padding_mask=kpm)) if decoder else (lambda m: m(x, src_key_padding_mask=kpm))
    for train in (True, False):
        ref.train(train), model.train(train)
        torch.manual_seed(5)
        a = run(ref)
        torch.manual_seed(5)
        b = run(model)
        torch.testing.assert_close(b, a)
        if not train:
            with torch.no_grad():  # the nested-tensor fast path
                torch.testing.assert_close(run(model), run(ref))
            with record_attention(model) as layers:  # explicit path, fast path switched off
                c = run(model)
            torch.testing.assert_close(c[kpm.logical_not()], a[kpm.logical_not()], atol=1e-5, rtol=1e-5)
            assert all(m.last_attention is not None for m in layers)
            assert torch.backends.mha.get_fastpath_enabled()
            assert not any(m.store_attention for m in layers)


def test_particles_are_per_head_slices():
    torch.manual_seed(0)
    m = RepulsiveMultiheadAttention(E, H, add_bias_kv=True)
    (group,) = find_particle_groups(m)
    assert group.num_heads == H and group.roles == ["key", "out", "query", "value"]
    theta = group.theta()
    d = E // H
    W, b = m.in_proj_weight.detach(), m.in_proj_bias.detach()
    for h in range(H):
        rows = slice(h * d, (h + 1) * d)
        expect = torch.cat(
            [
                W[:E][rows].flatten(),
                W[E : 2 * E][rows].flatten(),
                W[2 * E :][rows].flatten(),
                b[:E][rows],
                b[E : 2 * E][rows],
                b[2 * E :][rows],
                m.bias_k.detach()[0, 0, rows],
                m.bias_v.detach()[0, 0, rows],
                m.out_proj.weight.detach()[:, rows].t().flatten(),
            ]
        )
        torch.testing.assert_close(theta[h], expect)
    # the head's slice really is what head h uses: zero head 1's query rows -> only head 1's attention changes
    x = torch.randn(L, 1, E)
    _, before = m(x, x, x, average_attn_weights=False)
    with torch.no_grad():
        m.in_proj_weight[d : 2 * d].zero_()
        m.in_proj_bias[d : 2 * d].zero_()
    _, after = m(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(after[:, 0], before[:, 0])
    assert not torch.allclose(after[:, 1], before[:, 1])
    # roles select the paper's Table 10 subsets
    (qk,) = find_particle_groups(m, roles=("query", "key"))
    assert qk.dim == 2 * (d * E + d) + d


# ---------------------------------------------------------------------------------------------------------------
# With DropAttention (graph_rma.dropattention, the `layers` branch): all tests that need it are here.
# ---------------------------------------------------------------------------------------------------------------
def test_drop_attention_column_mode_on_probabilities():
    from graph_rma.dropattention import DropAttention

    torch.manual_seed(0)
    m = RepulsiveMultiheadAttention(E, H, batch_first=True, drop_attention=DropAttention(0.4, mode="column"))
    ref = nn.MultiheadAttention(E, H, batch_first=True)
    ref.load_state_dict(m.state_dict())
    x = torch.randn(B, 6, E)
    m.train()
    out, w = m(x, x, x, average_attn_weights=False)  # [B, H, L, S] after DropAttention
    assert w.shape == (B, H, 6, 6) and torch.isfinite(out).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, 6))  # "normalized": rows renormalised
    dropped = w == 0
    assert dropped.any()
    # column mode: a key is dropped for every query of that (batch, head), independently per head
    assert torch.equal(dropped, dropped[:, :, :1].expand_as(dropped))
    assert not torch.allclose(out, ref(x, x, x)[0])
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())
    # eval: DropAttention is off and the stock path is used
    m.eval()
    torch.testing.assert_close(m(x, x, x)[0], ref.eval()(x, x, x)[0])
    # p = 0 in training: the explicit path equals the stock layer
    m0 = RepulsiveMultiheadAttention(E, H, batch_first=True, drop_attention=DropAttention(0.0)).train()
    m0.load_state_dict(ref.state_dict())
    torch.testing.assert_close(m0(x, x, x)[0], ref.train()(x, x, x)[0])


def test_convert_passes_drop_attention_to_every_layer():
    from graph_rma.dropattention import DropAttention

    enc = _stack()
    da = DropAttention(0.2, mode="element")
    model = graph_rma.convert(enc, drop_attention=da)
    layers = [m for m in model.modules() if isinstance(m, RepulsiveMultiheadAttention)]
    assert len(layers) == 2 and all(m.drop_attention is da for m in layers)
    model.train()
    x = torch.randn(2, 5, 16)
    torch.manual_seed(1)
    a = model(x)
    torch.manual_seed(2)
    b = model(x)
    assert not torch.allclose(a, b)  # training is stochastic (dropout + DropAttention)
