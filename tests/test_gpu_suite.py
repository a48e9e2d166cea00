"""The GPU suite's smoke mode runs every step on tiny sizes on the CPU, so that the suite cannot rot between the
sessions that are lent a GPU."""

import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.slow
def test_gpu_suite_smoke_runs_every_step_and_writes_its_tables(tmp_path):
    out = tmp_path / "suite"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_suite", "--smoke", "--device", "cpu", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "suite.json").read_text())
    assert "errors" not in result, result.get("errors")
    assert result["smoke"] is True and set(result) >= {
        "memory",
        "layers",
        "profile",
        "chunks",
        "peer",
        "largest",
        "node",
        "webnlg",
        "device",
        "torch",
    }
    # the fused kernels run on the CPU under Triton's interpreter (the smoke switches it on) wherever they exist,
    # seconds per step there: in the memory step's tiny cells only, beside stock and chunked
    fused = importlib.util.find_spec("triton") is not None and (REPO / "src/graph_rma/nn/lean/fused.py").exists()
    assert ("interpreter" in result["fused"]) == fused, result["fused"]
    tiny = {(r["layer"], r["contender"]) for r in result["memory"] if r["edges"] == 50 and "ms" in r}
    assert tiny == ({(k, c) for k in ("gat", "gatv2") for c in ("stock", "chunked", "fused")} if fused else set())
    lean = {"stock", "chunked"}
    assert {r["contender"] for r in result["peer"]["rows"]} == lean  # no turbo-gnn on the CPU
    assert {r["contender"] for r in result["chunks"]} == {
        "stock",
        "lean 1 MiB",
        "lean 16 MiB",
        "lean 64 MiB",
        "lean 256 MiB",
    }
    assert all(r["error"] == "the largest graph is searched on CUDA only" for r in result["largest"])
    assert set(result["profile"]) == {f"{name} {kind}" for name in lean for kind in ("gat", "gatv2")}
    assert {r["contender"] for r in result["memory"]} == lean | ({"fused"} if fused else set())
    assert {r["layer"] for r in result["memory"]} == {"gat", "gatv2"}
    assert {r["contender"] for r in result["largest"]} == lean
    # every row carries the step's bandwidth bound: the bytes of benchmarks/bound.py over the measured bandwidth
    assert result["bandwidth_gb_per_s"] > 0
    for r in result["memory"]:
        assert r["bound_ms"] == pytest.approx(1e3 * r["step_bytes"] / (result["bandwidth_gb_per_s"] * 1e9))
    assert "dropattention_fused" not in result["layers"]  # on CUDA only
    assert result["layers"]["compile_graph_breaks"] == 0  # the drop-in layer compiles without graph breaks
    assert result["layers"]["sampler"]["SVGD on every layer"]["ms"] > 0
    assert result["node"]["seconds_per_epoch"]["graph_rma"]["ms"] > 0
    assert set(result["webnlg"]) == {"ma", "svgd"} and all(r["steps"] > 0 for r in result["webnlg"].values())
    md = (out / "suite.md").read_text()
    assert "## Memory-lean attention against stock PyG" in md and "## Node pipeline" in md


@pytest.mark.slow
def test_largest_search_doubles_then_bisects_to_the_first_failure():
    """A contender that runs out of memory above 50,000 edges: the search ends within 10% below it."""
    import torch

    from benchmarks import gpu_memory

    def make(x, edge_index, y):
        if edge_index.size(1) > 50_000:
            raise torch.OutOfMemoryError("planted")
        return lambda: None

    r = gpu_memory.largest(make, torch.device("cpu"), torch.float32, 1000, seconds=60)
    assert r["largest_edges"] <= 50_000 < r["first_failing_edges"] <= 1.1 * r["largest_edges"]
    assert r["probes"][:7] == [1000, 2000, 4000, 8000, 16000, 32000, 64000] and not r["bounded"]
    assert r["failure"] == "out of memory"
    bounded = gpu_memory.largest(make, torch.device("cpu"), torch.float32, 1000, seconds=0)
    assert bounded["bounded"] and bounded["largest_edges"] == 0 and bounded["probes"] == []


class _ReferenceTurbo:
    """turbo-gnn's documented ``gatv2_aggr`` (its docstring: e_uv = a_h . LeakyReLU(x[v] + x_neighbors[u]), softmax
    over the incoming u of v, out[v] = sum alpha_uv x_neighbors[u]) written with PyG's utilities, to check on the
    CPU that TurboGATv2 feeds it a GATv2Conv's parameters the right way round."""

    class AdjacencyForwardBackwardWithNodeBuckets:
        @classmethod
        def from_edge_list(cls, edge_index, num_nodes):
            graph = cls()
            graph.edge_index, graph.num_nodes = edge_index, num_nodes
            return graph

        def to(self, device):
            return self

    @staticmethod
    def gatv2_aggr(graph, x, x_neighbors, attention_weights, negative_slope):
        import torch.nn.functional as F
        from torch_geometric.utils import scatter, softmax

        u, v = graph.edge_index
        e = (F.leaky_relu(x[v] + x_neighbors[u], negative_slope) * attention_weights).sum(-1)
        alpha = softmax(e, v, num_nodes=graph.num_nodes)
        out = scatter(alpha.unsqueeze(-1) * x_neighbors[u], v, dim=0, dim_size=graph.num_nodes, reduce="sum")
        return out.reshape(graph.num_nodes, -1)


def test_turbo_layer_computes_the_stock_gatv2_function_on_its_parameters():
    import pytest
    import torch
    from torch_geometric.nn import GATv2Conv

    from benchmarks.turbo_peer import TurboGATv2

    torch.manual_seed(0)
    x, ei = torch.randn(30, 16), torch.randint(0, 30, (2, 120))
    conv = GATv2Conv(16, 32, heads=2).eval()
    with torch.no_grad():
        conv.bias.normal_()  # a zero bias would hide a missing one
    layer = TurboGATv2(conv, _ReferenceTurbo)
    torch.testing.assert_close(layer(x, layer.graph(ei, 30)), conv(x, ei), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="dropout=0"):
        TurboGATv2(GATv2Conv(16, 32, heads=2, dropout=0.5), _ReferenceTurbo)


@pytest.mark.slow
def test_suite_refuses_an_unwritable_out_before_any_work(tmp_path):
    """Issue 32, item 7: --out naming a file used to fail on mkdir after every measurement was taken."""
    target = tmp_path / "a-file"
    target.write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_suite", "--smoke", "--device", "cpu", "--out", str(target)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "--out:" in proc.stderr and "is a file" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "suite.json").exists()


BAD_OPTIONS = [
    (["--out", ""], "--out: expected a folder, got an empty path"),
    (["--device", "bogus"], "--device: expected cpu, cuda or cuda:N, got 'bogus'"),
    (["--edges", "nan"], "--edges: expected a whole number of edges >= 1, got 'nan'"),
    (["--edges", "inf"], "--edges: expected a whole number of edges >= 1, got 'inf'"),
    (["--edges", "1.5"], "--edges: expected a whole number of edges >= 1, got '1.5'"),
    (["--edges", "1e6", "0"], "--edges: expected a whole number of edges >= 1, got '0'"),
    (["--edges", "many"], "--edges: expected an edge count such as 1e6, got 'many'"),
    (["--deadline", "-1"], "--deadline: expected a finite number > 0, got '-1'"),
    (["--deadline", "0"], "--deadline: expected a finite number > 0, got '0'"),
    (["--deadline", "nan"], "--deadline: expected a finite number, got 'nan'"),
    (["--chunk-steps", "0"], "--chunk-steps: expected a positive integer, got '0'"),
    (["--chunk-steps", "-5"], "--chunk-steps: expected a positive integer, got '-5'"),
    (["--largest-start", "0"], "--largest-start: expected a whole number of edges >= 1, got '0'"),
    (["--turbo-wait", "-1"], "--turbo-wait: expected a finite number >= 0, got '-1'"),
    (["--repeats", "0"], "--repeats: expected a positive integer, got '0'"),
]
if not __import__("torch").cuda.is_available():
    BAD_OPTIONS += [
        (["--device", "cuda"], "--device: 'cuda' asked for, but this torch build sees no CUDA device"),
        (["--device", "cuda:0"], "--device: 'cuda:0' asked for, but this torch build sees no CUDA device"),
    ]


@pytest.mark.parametrize("argv,line", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_suite_refuses_bad_options_in_one_line_before_any_work(argv, line, tmp_path, monkeypatch, capsys):
    """Issue 67, items 2 and 6, issue 65, items 9 and 11: --out '' wrote into the current folder, --deadline -1,
    --edges 1.5 or --chunk-steps 0 exited 0 having measured nothing, --edges inf / --device cuda without CUDA ended
    in a traceback."""
    from benchmarks import gpu_suite

    monkeypatch.chdir(tmp_path)
    out = [] if argv[0] == "--out" else ["--out", str(tmp_path / "suite")]
    with pytest.raises(SystemExit) as e:
        gpu_suite.main(["--smoke", "--steps", "memory", *out, *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err[-1].endswith(f"error: argument {line}"), err
    assert list(tmp_path.iterdir()) == []  # nothing measured, nothing written


def test_suite_reads_edge_counts_in_float_notation():
    from benchmarks.gpu_suite import edge_count

    assert edge_count("1e6") == 10**6 and edge_count("2000") == 2000 and edge_count("2.5e3") == 2500


@pytest.mark.parametrize("name, strategy", [("chunked", "chunked"), ("lean", "chunked"), ("stock", None)])
def test_a_lean_contender_forces_its_strategy_during_its_step_only(monkeypatch, name, strategy):
    """GRAPH_RMA_LEAN is set while the contender's layers run forward (where the strategy is read) and restored."""
    import os

    import torch

    from benchmarks import gpu_memory

    monkeypatch.setenv("GRAPH_RMA_LEAN", "csr")
    seen = []
    hook = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda module, args: seen.append(os.environ.get("GRAPH_RMA_LEAN"))
    )
    try:
        x, ei, y = torch.randn(30, 8), torch.randint(0, 30, (2, 90)), torch.randint(0, 4, (30,))
        make = gpu_memory.contender(
            "gat", name, heads=2, channels=4, dropout=0.0, device=torch.device("cpu"), dtype=torch.float32
        )
        make(x, ei, y)()
    finally:
        hook.remove()
    assert seen and set(seen) == {strategy or "csr"} and os.environ["GRAPH_RMA_LEAN"] == "csr"


def test_the_fused_contender_says_why_it_cannot_run(monkeypatch):
    import torch

    from benchmarks import gpu_memory

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert (
        "TRITON_INTERPRET" in gpu_memory.fused_unavailable(torch.device("cpu"))
        or not (REPO / "src/graph_rma/nn/lean/fused.py").exists()
    )
    monkeypatch.setattr(gpu_memory.importlib.util, "find_spec", lambda name: None)
    assert gpu_memory.fused_unavailable(torch.device("cuda")) == "Triton is not installed"
