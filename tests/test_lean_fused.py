"""The fused lean kernels (graph_rma.nn.lean.fused) and the strategy choice (GRAPH_RMA_LEAN).

Without a GPU the kernels run under Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET=1 before triton
is imported), in float64; with one they compile for it and run in float32. Graphs are small: the interpreter runs
every program in Python.
"""

import sys
import types
import warnings

import pytest
import torch
from torch_geometric.nn import GATConv, GATv2Conv
from torch_geometric.utils import softmax

from graph_rma import DropAttention, GraphRMAError
from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv
from graph_rma.nn.lean import csr_supported, strategy

triton = pytest.importorskip("triton")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.float64 if DEVICE == "cpu" else torch.float32
TOL = dict(rtol=1e-9, atol=1e-11) if DTYPE == torch.float64 else dict(rtol=1e-4, atol=1e-5)
if DEVICE == "cpu" and not triton.knobs.runtime.interpret:
    pytest.skip("triton was imported before TRITON_INTERPRET=1 was set", allow_module_level=True)


@pytest.fixture
def fused(monkeypatch):
    monkeypatch.setenv("GRAPH_RMA_LEAN", "fused")


# ----------------------------------------------------------------------------------------------------------------
# Strategy
# ----------------------------------------------------------------------------------------------------------------
def _on(device_type):
    return types.SimpleNamespace(device=types.SimpleNamespace(type=device_type))


def test_strategy_defaults_and_the_variable(monkeypatch):
    monkeypatch.delenv("GRAPH_RMA_LEAN", raising=False)
    assert strategy.lean_strategy(torch.zeros(1)) == "csr"
    monkeypatch.setattr(strategy, "triton_available", lambda: True)
    assert strategy.lean_strategy(_on("cuda")) == "fused"
    for value in ("fused", "chunked", "csr"):
        monkeypatch.setenv("GRAPH_RMA_LEAN", value)
        assert strategy.lean_strategy(torch.zeros(1)) == value
        assert strategy.lean_strategy(_on("cuda")) == value
    monkeypatch.setenv("GRAPH_RMA_LEAN", "triton")
    with pytest.raises(GraphRMAError, match="GRAPH_RMA_LEAN: expected one of fused, chunked, csr") as info:
        strategy.lean_strategy(torch.zeros(1))
    assert "\n" not in str(info.value)


def test_without_triton_cuda_falls_back_to_chunked_with_one_warning(monkeypatch):
    monkeypatch.delenv("GRAPH_RMA_LEAN", raising=False)
    monkeypatch.setattr(strategy, "triton_available", lambda: False)
    monkeypatch.setattr(strategy, "_WARNED", False)
    with pytest.warns(RuntimeWarning, match="Triton is not installed"):
        assert strategy.lean_strategy(_on("cuda")) == "chunked"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert strategy.lean_strategy(_on("cuda")) == "chunked"  # said once


def test_chunked_forced_turns_the_cpu_kernels_off(monkeypatch):
    x = torch.zeros(2)
    assert csr_supported(x)
    monkeypatch.setenv("GRAPH_RMA_LEAN", "chunked")
    assert not csr_supported(x)


@pytest.mark.slow  # a fresh Python process
def test_the_package_imports_without_triton():
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import graph_rma.nn, graph_rma.nn.lean.fused\n"
        "assert 'graph_rma.nn.lean._triton_kernels' not in sys.modules\n"
    )
    import os
    import subprocess
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]


# ----------------------------------------------------------------------------------------------------------------
# Equivalence with the stock layers
# ----------------------------------------------------------------------------------------------------------------
def graph(n_src=7, n_dst=None, edges=18, edge_dim=None, seed=0):
    """A small graph with multi-edges, self-loops and (with more nodes than edge ends) isolated nodes: the last
    destination never receives an edge."""
    g = torch.Generator().manual_seed(seed)
    n_dst = n_src if n_dst is None else n_dst
    src = torch.randint(0, n_src, (edges,), generator=g)
    dst = torch.randint(0, n_dst - 1, (edges,), generator=g)
    src[1], dst[1] = src[0], dst[0]  # a multi-edge
    edge_index = torch.stack([src, dst]).to(DEVICE)
    attr = None if edge_dim is None else torch.randn(edges, edge_dim, generator=g, dtype=DTYPE).to(DEVICE)
    return edge_index, attr


def features(n, dim, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g, dtype=DTYPE).to(DEVICE).requires_grad_()


def pair(stock_cls, ours_cls, *args, **kwargs):
    torch.manual_seed(0)
    stock = stock_cls(*args, **kwargs).to(DEVICE, DTYPE)
    ours = ours_cls(*args, **kwargs, lean=True).to(DEVICE, DTYPE)
    ours.load_state_dict(stock.state_dict())
    return stock, ours


def step(layer, x, *args, **kwargs):
    """Output, returned weights and every gradient (parameters and inputs) of a weighted sum of both."""
    xs = x if isinstance(x, tuple) else (x,)
    for t in xs:
        t.grad = None
    layer.zero_grad()
    out, (edge_index, alpha) = layer(x, *args, return_attention_weights=True, **kwargs)
    loss = (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype, device=out.device).view_as(out)).sum()
    # the returned weights carry gradients too (a penalty on the attention reads them)
    (
        loss + (alpha * torch.linspace(2, -1, alpha.numel(), dtype=out.dtype, device=out.device).view_as(alpha)).sum()
    ).backward()
    grads = {n: p.grad.clone() for n, p in layer.named_parameters() if p.grad is not None}
    grads.update({f"x{i}": t.grad.clone() for i, t in enumerate(xs)})
    return out, edge_index, alpha, grads


def assert_same(a, b):
    (o1, e1, a1, g1), (o2, e2, a2, g2) = a, b
    torch.testing.assert_close(o2, o1, **TOL)
    assert torch.equal(e1, e2)
    torch.testing.assert_close(a2, a1, **TOL)
    assert g1.keys() == g2.keys()
    for name in g1:
        torch.testing.assert_close(g2[name], g1[name], **TOL, msg=lambda m, name=name: f"{name}: {m}")


GAT_CASES = [  # heads, channels, edge_dim, add_self_loops, concat, residual
    (8, 8, 3, True, True, False),
    (1, 1, None, False, True, True),
    (2, 3, 2, True, False, False),
    (1, 64, None, True, True, False),
]


@pytest.fixture
def small_tiles(monkeypatch):
    """Four edges and two heads per tile: rows span several edge blocks (the online softmax rescales) and several
    head blocks (the last one part masked)."""
    from graph_rma.nn.lean import fused as fused_module

    monkeypatch.setattr(fused_module, "_blocks", lambda H, C: (4, 2, 1 << max(0, (C - 1).bit_length())))


@pytest.mark.parametrize("v2", [False, True])
def test_rows_and_heads_over_several_tiles_equal_stock(fused, small_tiles, v2):
    edge_index, attr = graph(n_src=7, edges=24, edge_dim=2)
    x = features(7, 5, 1)
    stock_cls, ours_cls = (GATv2Conv, RepulsiveGATv2Conv) if v2 else (GATConv, RepulsiveGATConv)
    stock, ours = pair(stock_cls, ours_cls, 5, 3, heads=3, edge_dim=2)
    assert_same(step(stock, x, edge_index, attr), step(ours, x, edge_index, attr))


@pytest.mark.parametrize("heads,channels,edge_dim,loops,concat,residual", GAT_CASES)
def test_gat_equals_stock(fused, heads, channels, edge_dim, loops, concat, residual):
    edge_index, attr = graph(edge_dim=edge_dim)
    x = features(7, 5, 1)
    stock, ours = pair(
        GATConv,
        RepulsiveGATConv,
        5,
        channels,
        heads=heads,
        edge_dim=edge_dim,
        add_self_loops=loops,
        concat=concat,
        residual=residual,
    )
    assert_same(step(stock, x, edge_index, attr), step(ours, x, edge_index, attr))


def test_gat_bipartite_equals_stock(fused):
    edge_index, _ = graph(n_src=6, n_dst=4, edges=12)
    x = (features(6, 5, 1), features(4, 3, 2))
    stock, ours = pair(GATConv, RepulsiveGATConv, (5, 3), 3, heads=2, add_self_loops=False)
    assert_same(step(stock, x, edge_index), step(ours, x, edge_index))


def test_the_fused_node_keeps_no_per_edge_tensor(fused):
    edge_index, _ = graph(n_src=7, edges=18)
    layer = RepulsiveGATConv(5, 4, heads=2, dropout=0.5, add_self_loops=False, lean=True).to(DEVICE, DTYPE)
    out = layer(features(7, 5, 1), edge_index)
    node = out.grad_fn
    while type(node).__name__ != "_FusedAttentionBackward":
        node = node.next_functions[0][0]
    saved = [t for t in node.saved_tensors if t is not None]
    assert saved and all(t.size(0) in (7, 1, 2) for t in saved), [tuple(t.shape) for t in saved]


GATV2_CASES = [  # heads, channels, edge_dim, share_weights, bipartite
    (2, 3, 2, False, False),
    (8, 1, None, True, False),
    (1, 8, 3, False, True),
]


@pytest.mark.parametrize("heads,channels,edge_dim,share,bipartite", GATV2_CASES)
def test_gatv2_equals_stock(fused, heads, channels, edge_dim, share, bipartite):
    n_dst = 4 if bipartite else 7
    edge_index, attr = graph(n_src=7, n_dst=n_dst, edges=15, edge_dim=edge_dim)
    x = (features(7, 5, 1), features(n_dst, 5, 2)) if bipartite else features(7, 5, 1)
    stock, ours = pair(
        GATv2Conv,
        RepulsiveGATv2Conv,
        5,
        channels,
        heads=heads,
        edge_dim=edge_dim,
        share_weights=share,
        add_self_loops=not bipartite,
        residual=share,
    )
    assert_same(step(stock, x, edge_index, attr), step(ours, x, edge_index, attr))


@pytest.mark.parametrize("channels,heads", [(16, 2), (8, 8)])
def test_graph_transformer_equals_its_default_path(fused, channels, heads):
    from graph_rma.nn import GraphTransformerLayer

    edge_index, _ = graph(n_src=7, edges=16)
    x = features(7, channels, 1)
    torch.manual_seed(0)
    plain = GraphTransformerLayer(channels, heads, dropout=0.0, attention_dropout=0.0).to(DEVICE, DTYPE)
    lean = GraphTransformerLayer(channels, heads, dropout=0.0, attention_dropout=0.0, lean=True).to(DEVICE, DTYPE)
    lean.load_state_dict(plain.state_dict())
    assert_same(step(plain, x, edge_index), step(lean, x, edge_index))


# ----------------------------------------------------------------------------------------------------------------
# Dropout and DropAttention drawn in the kernels
# ----------------------------------------------------------------------------------------------------------------
class _Masked:
    """The default path with an explicit mask in place of its dropout: ``keep`` (a softmax over the kept edges) or
    ``factor`` (the softmax times it)."""

    keep = factor = None

    def _softmax_and_drop(self, logits, src, dst, ptr, num_src, num_dst):
        if self.keep is not None:
            return softmax(logits.masked_fill(~self.keep, float("-inf")), dst, ptr, num_dst)
        return softmax(logits, dst, ptr, num_dst) * self.factor


class MaskedGAT(_Masked, RepulsiveGATConv):
    pass


class MaskedGATv2(_Masked, RepulsiveGATv2Conv):
    pass


DROPS = [  # layer, dropout, DropAttention(p, window, mode, rescale) or None
    ("gat", 0.5, None),
    ("gat", 0.0, (0.5, 1, "element", "inverse")),
    ("gat", 0.0, (0.5, 3, "element", "normalized")),
    ("gatv2", 0.0, (0.4, 2, "column", "normalized")),
    ("gatv2", 0.5, (None, 2, "column", "inverse")),
]


@pytest.mark.parametrize("kind,rate,drop", DROPS)
def test_the_mask_of_forward_is_the_mask_of_backward(fused, kind, rate, drop, request):
    """The weights the kernels return (after dropout, drawn from the forward's seed) give, applied as an explicit mask
    on the default path, the same output and every gradient: backward drew the forward's mask again."""
    if drop is not None and drop[1] == 3:
        request.getfixturevalue("small_tiles")  # windows and survivor counts across edge blocks
    edge_index, _ = graph(n_src=7, edges=24)
    x = features(7, 5, 1)
    ours_cls, ref_cls = (RepulsiveGATConv, MaskedGAT) if kind == "gat" else (RepulsiveGATv2Conv, MaskedGATv2)
    make = dict(heads=3, dropout=rate)
    torch.manual_seed(0)
    ours = ours_cls(5, 4, **make, lean=True, drop_attention=None if drop is None else DropAttention(*drop))
    ref = ref_cls(5, 4, **make)
    ours, ref = ours.to(DEVICE, DTYPE), ref.to(DEVICE, DTYPE)
    ref.load_state_dict(ours.state_dict())
    with torch.no_grad():
        alpha = ours.eval()(x, edge_index, return_attention_weights=True)[1][1]
    ours.train()
    torch.manual_seed(5)
    result = step(ours, x, edge_index)
    weights = result[2].detach()
    dropped = weights == 0
    assert 0 < dropped.float().mean() < 1
    if drop is not None and drop[3] == "normalized":
        ref.keep = ~dropped
    else:
        ref.factor = torch.round(weights / alpha)
        assert set(ref.factor.unique().tolist()) <= {0.0, 1.0, 2.0}
    assert_same(step(ref, x, edge_index), result)


def test_masks_differ_between_steps_and_repeat_for_a_seed(fused):
    edge_index, _ = graph(n_src=7, edges=24)
    x = features(7, 5, 1)
    layer = RepulsiveGATConv(5, 2, heads=2, dropout=0.5, lean=True).to(DEVICE, DTYPE)
    with torch.no_grad():
        torch.manual_seed(7)
        first, second = (layer(x, edge_index, return_attention_weights=True)[1][1] for _ in range(2))
        torch.manual_seed(7)
        again = layer(x, edge_index, return_attention_weights=True)[1][1]
    assert torch.equal(first, again)
    assert not torch.equal(first == 0, second == 0)


def _shuffled_complete_graph(n_src, n_dst, seed=0):
    src = torch.arange(n_src).repeat(n_dst)
    dst = torch.arange(n_dst).repeat_interleave(n_src)
    order = torch.randperm(src.numel(), generator=torch.Generator().manual_seed(seed))
    return src[order], dst[order]


@pytest.mark.parametrize(
    "mode,window,rescale,n_src,n_dst", [("element", 3, "normalized", 96, 16), ("column", 2, "inverse", 512, 3)]
)
def test_drop_statistics_match_the_mask_path(mode, window, rescale, n_src, n_dst):
    """Rate of dropped (edge, head) pairs, against DropAttention's 1 - (1 - p/w)^w (the first w - 1 positions of a
    segment have fewer chances), and the rate at which two neighbours (by source id, within a destination) are
    both dropped, against the [E, H]-mask path's."""
    from graph_rma.dropattention.masks import _sparse_mask
    from graph_rma.nn.lean.csr import edge_csr
    from graph_rma.nn.lean.fused import GAT_SCORE, INVERSE, NORMALIZED, Dropout, fused_weights

    p, heads = 0.3, 8
    src, dst = _shuffled_complete_graph(n_src, n_dst)
    csr = edge_csr(src.to(DEVICE), dst.to(DEVICE), n_src, n_dst, by_source=True)
    v = torch.zeros(n_src, heads, 1, dtype=DTYPE, device=DEVICE)
    a = torch.zeros(n_src, heads, dtype=DTYPE, device=DEVICE)
    drop = Dropout(NORMALIZED if rescale == "normalized" else INVERSE, p, window, mode == "column")
    w = fused_weights(GAT_SCORE, csr, v, a=a, dropout=drop, seed=11).cpu()
    kernel = (w == 0)[csr.perm.cpu().long()]  # CSR order: rows by destination, each by source id
    g = torch.Generator().manual_seed(0)
    masks = [_sparse_mask(src, dst, heads, n_src, n_dst, p, window, mode, g)[csr.perm.cpu().long()] for _ in range(4)]
    reference = torch.cat(masks)
    # the first window - 1 positions of a segment (by source id, in both modes here) have fewer chances
    rank = torch.arange(n_src).repeat(n_dst).view(-1, 1).expand(-1, heads).to(torch.float64)
    theory = (1 - (1 - p / window) ** torch.clamp(rank + 1, max=window)).mean().item()
    draws = heads * (n_src if mode == "column" else n_src * n_dst)  # independent windows
    tol = 4.5 * (theory * (1 - theory) * window / draws) ** 0.5
    assert abs(kernel.double().mean().item() - theory) < tol
    assert abs(reference.double().mean().item() - theory) < tol
    same_row = (csr.row[1:] == csr.row[:-1]).cpu()

    def both(mask):
        m = mask.view(-1, csr.row.numel(), heads)
        return (m[:, 1:] & m[:, :-1])[:, same_row].double().mean().item()

    assert abs(both(kernel) - both(reference)) < 1.5 * tol
    independent = theory**2
    assert both(reference) > independent + 0.05  # windows make neighbours drop together: the check can tell


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 5e-3), (torch.bfloat16, 4e-2)])
def test_half_precision_reads_and_writes_its_dtype(fused, dtype, tol):
    """float16 / bfloat16 in and out (float32 inside): close to the float64 stock layer, to the dtype's rounding."""
    edge_index, _ = graph(n_src=7, edges=18)
    x = features(7, 5, 1)
    torch.manual_seed(0)
    stock = GATConv(5, 4, heads=2).to(DEVICE, torch.float64)
    half = RepulsiveGATConv(5, 4, heads=2, lean=True).to(DEVICE, dtype)
    half.load_state_dict(stock.state_dict())
    x_half = x.detach().to(dtype).requires_grad_()
    out = half(x_half, edge_index)
    assert out.dtype == dtype
    out.float().sum().backward()
    stock(x, edge_index).sum().backward()
    assert x_half.grad.dtype == dtype
    torch.testing.assert_close(out.double(), stock(x, edge_index).detach(), atol=tol, rtol=tol)
    torch.testing.assert_close(x_half.grad.double(), x.grad, atol=tol, rtol=tol)
    torch.testing.assert_close(half.att_src.grad.double(), stock.att_src.grad, atol=2 * tol, rtol=2 * tol)


_COMPILE = """
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from graph_rma.nn.lean import _triton_kernels as K

assert not triton.knobs.runtime.interpret
CONST = {"KIND", "HAS_B", "HAS_C", "DROP", "COLUMN", "ACC", "BLOCK_E", "BLOCK_H", "BLOCK_C", "HAS_GW"}
TYPES = dict(H="i32", C="i32", E="i32", NS="i32", window="i32", seed="i64", scale="fp32", slope="fp32",
             gamma="fp32", inv_keep="fp32", ALIVE="*i8", LSE="*fp32", DD="*fp32", G="*bf16")
for name in ("CROW", "COL", "PERM", "CROW_T", "COL_T", "PERM_T"):
    TYPES[name] = "*i32"
for kind, drop, column in ((0, 3, True), (1, 1, False), (2, 2, False)):
    consts = dict(KIND=kind, HAS_B=True, HAS_C=kind != 1, DROP=drop, COLUMN=column, ACC=tl.float32,
                  BLOCK_E=16, BLOCK_H=4, BLOCK_C=8)
    for fn in (K.attention_forward, K.attention_weights, K.backward_rows, K.backward_columns):
        sig = {n: "constexpr" if n in CONST else TYPES.get(n, "*fp32" if n.startswith("G") else "*bf16")
               for n in fn.arg_names}
        extra = dict(HAS_GW=kind != 1) if "HAS_GW" in fn.arg_names else {}
        triton.compile(ASTSource(fn, sig, constexprs={**consts, **extra}), target=GPUTarget("cuda", 90, 32))
        print(kind, fn.fn.__name__, flush=True)
"""


@pytest.mark.slow  # a fresh Python process compiling twelve kernels (no GPU needed: Triton's own ptxas)
def test_the_kernels_compile_for_a_gpu():
    """Every kernel, each score kind and dropout mode, compiles to a CUDA binary for sm_90 (Triton's compiler and
    ptxas, offline): the interpreter runs Python, and would not catch what the compiler refuses."""
    import os
    import subprocess
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    done = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("\n") == 12, done.stdout


def test_graph_transformer_attention_dropout_is_one_mask(fused, monkeypatch):
    """The transformer's attention dropout in the kernels: its mask, read back from the weights kernel with the
    forward's seed and applied in place of F.dropout on the default path, gives the same output and gradients."""
    from graph_rma.nn import GraphTransformerLayer
    from graph_rma.nn.lean import fused as fused_module
    from graph_rma.nn.lean.layers import fused_csr

    edge_index, _ = graph(n_src=7, edges=20)
    x = features(7, 8, 1)
    torch.manual_seed(0)
    lean = GraphTransformerLayer(8, 2, dropout=0.0, attention_dropout=0.5, lean=True).to(DEVICE, DTYPE)
    plain = GraphTransformerLayer(8, 2, dropout=0.0, attention_dropout=0.5).to(DEVICE, DTYPE)
    plain.load_state_dict(lean.state_dict())
    torch.manual_seed(3)
    seed = fused_module.draw_seed()  # the draw the fused forward makes first
    with torch.no_grad():
        q = lean.lin_query(x).view(7, 2, 4) * 0.5
        k, v = lean.lin_key(x).view(7, 2, 4), lean.lin_value(x).view(7, 2, 4)
        csr = fused_csr(lean, edge_index, 7, 7, 0)
        drop = fused_module.plain_dropout(0.5, True)
        w = fused_module.fused_weights(fused_module.DOT_SCORE, csr, v, q=q, k=k, dropout=drop, seed=seed)
    factor = (w != 0).to(DTYPE) * 2
    torch.manual_seed(3)
    result = step(lean, x, edge_index)
    dropout = torch.nn.functional.dropout

    def explicit(t, p=0.5, training=True, inplace=False):
        return t * factor if t.shape == factor.shape and p > 0 else dropout(t, p, training, inplace)

    monkeypatch.setattr(torch.nn.functional, "dropout", explicit)
    assert_same(step(plain, x, edge_index), result)
