"""benchmarks/report.py: the verdicts on the benchmarks page are computed from the recorded runs, on hand-checked
records (what the page shows is checked against the committed records in test_studies.py)."""

import pytest


@pytest.fixture(scope="module")
def report():
    from benchmarks import report

    return report


META = {
    "command": "python -m benchmarks.bench_x",
    "device": "CPU",
    "torch": "2.13.0",
    "machine": "x86_64",
    "cpus": 2,
    "memory_gib": 23.4,
    "load_average_before": 0.5,
    "date": "2026-11-25",
}


def memory_run(rows, layer="GATConv", glibc=False):
    def cell(n, e, b):
        return {"error": "exit code -9"} if b is None else {"bytes_per_edge": b, "peak_above_inputs": b * e}

    out = [{"edges": e, **{n: cell(n, e, b) for n, b in cells.items()}} for e, cells in rows]
    return {
        "meta": META,
        "comparisons": {
            "memory": {"layer": layer, "loss": "ce", "glibc_defaults": glibc, "rows": out},
            "time": {"layer": layer, "threads": 2, "repeats": 3, "rows": []},
        },
    }


def test_memory_table_ratios_targets_and_the_largest_graph(report):
    runs = [
        memory_run(
            [
                (1_000_000, {"pyg": 1500, "lean": 150}),
                (2_000_000, {"pyg": None, "lean": 180}),
                (10_000_000, {"lean": 190}),
            ]
        ),
        memory_run([(1_000_000, {"pyg": 1600, "lean": 200})]),
        memory_run([(1_000_000, {"pyg": 2000, "lean": 400})], layer="GATv2Conv"),
    ]  # another table
    text = report.render_memory(runs)
    assert "| 1,000,000 | 1,500 / 1,600 | 150 / 200 | 10.0x / 8.0x |" in text
    assert "| 2,000,000 | killed (out of memory) | 180 |  |" in text
    assert "| 10,000,000 | - | 190 |  |" in text
    assert (
        "`lean=True` keeps 150-200 B/edge, 8.0-10.0x less than stock (target: at most 200 B/edge and at least "
        "7x less: met)" in text
    )
    # stock trains 1e6 and is killed at 2e6; lean trains 1e7: 10x, target at least 5x
    assert (
        "on this machine: stock 1,000,000 edges (failed at 2,000,000), `lean=True` 10,000,000 (the largest "
        "tried): 10.0x the stock layer's (target: at least 5x: met)" in text
    )
    assert "2 runs of" in text and "23.4 GiB of memory" in text
    over = report.render_memory([memory_run([(1_000_000, {"pyg": 1500, "lean": 201})])])
    assert "(target: at most 200 B/edge and at least 7x less: not met)" in over and "Largest graph" not in over
    assert "GATv2Conv" in report.render_memory(runs, "GATv2Conv") and "400" in report.render_memory(runs, "GATv2Conv")


def test_a_cell_over_the_memory_cap_says_so(report):
    run = memory_run([(1_000_000, {"pyg": 1500, "lean": 150}), (2_000_000, {"pyg": 1500, "lean": 150})])
    run["comparisons"]["memory"]["memory_limit_gib"] = 22.0
    run["comparisons"]["memory"]["rows"][1]["pyg"] = {
        "error": "exit code 1: RuntimeError: [enforce fail at "
        "alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"
    }
    text = report.render_memory([run])
    assert "| 2,000,000 | out of memory (over the 22 GiB cap) | 150 | |" in text.replace("|  |", "| |")
    assert "within a 22 GiB cap on each process's memory: stock 1,000,000 edges (failed at 2,000,000)" in text


def test_memory_time_verdict_is_the_worst_ratio(report):
    run = memory_run([])
    run["comparisons"]["time"]["rows"] = [
        {
            "edges": 100_000,
            "pyg": {"ms": 50.0, "ratio": 1.0, "paired": 1.0},
            "lean": {"ms": 40.0, "ratio": 0.8, "paired": 0.79},
        },
        {
            "edges": 10_000_000,
            "pyg": {"ms": 20_000.0, "ratio": 1.0, "paired": 1.0},
            "lean": {"ms": 21_000.0, "ratio": 1.05, "paired": 1.01},
        },
    ]
    text = report.render_memory_time([run, memory_run([])])  # a run without a time table is left out
    assert "| GATConv | 10,000,000 | 2 | 20.0 s |  | 21.0 s | 1.05, 1.01 |" in text
    assert "1 run of" in text and "GATConv 0.79-1.05 (target: at most 1.0x: not met)." in text
    run["comparisons"]["time"]["layer"] = "GATv2Conv"  # the target is GAT's
    assert "GATv2Conv 0.79-1.05." in report.render_memory_time([run])


def test_scaling_slopes_failures_and_bytes_per_edge(report):
    def run(lean, rows, failed=()):
        return {
            "meta": META,
            "comparisons": {
                "scaling": {
                    "rows": [
                        {"edges": e, "nodes": e // 10, "seconds_per_step": s, "peak_bytes": m * 2**20}
                        for e, s, m in rows
                    ],
                    "failed": [{"edges": e, "error": "exit code -9"} for e in failed],
                    "slope_time": 1.0,
                    "slope_memory": 0.9,
                    "device": "cpu",
                    "threads": 1,
                    "steps": 2,
                    "lean": lean,
                    "sorted_edges": False,
                    "keep_freed_memory": lean,
                }
            },
        }

    text = report.render_scaling(
        [
            run(False, [(10_000, 0.05, 400), (1_000_000, 5.0, 2380)], failed=[10_000_000]),
            run(True, [(10_000, 0.04, 400), (10_000_000, 16.0, 3400)]),
        ]
    )
    assert (
        "| edges: seconds per training step | default path, random order | lean=True, random order, freed "
        "memory kept |" in text
    )
    assert "| 10,000,000 | killed (out of memory) | 16 |" in text and "| 1,000,000 | 5 | - |" in text
    # (2380 - 400) MiB over 990,000 edges = 2.10 KB per edge; (3400 - 400) MiB over 9,990,000 edges = 0.31 KB
    assert "| bytes per edge above the smallest graph | 2.10 KB (to 1,000,000) | 0.31 KB (to 10,000,000) |" in text


def test_runs_table_counts_the_runs_within_the_aim(report):
    def run(paired):
        return {
            "meta": META,
            "comparisons": {
                "step": {
                    "plain": {"ms": 10, "ratio": 1.0, "paired": 1.0},
                    "sampler": {"ms": 11, "ratio": paired, "paired": paired},
                },
                "other table": [1, 2],
            },
        }  # a script's non-timing table is skipped

    text = report.render_runs([run(1.04), run(1.06)], aim=1.05)
    assert (
        "| step: plain | 10.0 / 10.0 |  |  |" in text
        and "| step: sampler | 11.0 / 11.0 | 1.040 / 1.060 | 1.040 / 1.060 |" in text
    )
    assert "paired ratios 1.040-1.060. The aim, at most 1.05x for every row, held in 1 of 2 runs." in text


# --- the GPU tables (benchmarks/report_gpu.py) on hand-checked records --------------------------------------------

GPU_META = {
    "command": "bash benchmarks/gpu_lease.sh",
    "device": "GPU X",
    "driver": "1.0",
    "torch": "2.11",
    "cuda": "13.0",
    "pyg": "2.8",
    "memory_gib": 80,
    "machine": "lent",
    "date": "2026-11-26",
}


def gpu_run(**suite):
    return {"meta": GPU_META, "suite": suite}


def mem_row(contender, b, ms, paired, edges=1000, layer="gat", dtype="float32"):
    return {
        "layer": layer,
        "dtype": dtype,
        "edges": edges,
        "contender": contender,
        "bytes_per_edge": b,
        "ms": ms,
        "paired_ratio_to_first": paired,
    }


def test_gpu_memory_verdicts_count_the_cells_that_meet_each_goal():
    from benchmarks import report_gpu

    rows = [
        mem_row("stock", 1000, 10, 1.0),
        mem_row("lean", 100, 9, 0.9),  # 10x less, faster: both goals met
        mem_row("stock", 600, 10, 1.0, edges=2000),
        mem_row("lean", 120, 20, 2.0, edges=2000),
    ]  # 5x, 2x slower
    text = report_gpu.render_memory([gpu_run(memory=rows)])
    # runs recorded before the fused kernels named the chunked strategy "lean"; no bandwidth known for "GPU X"
    assert "| gat | float32 | 1,000 | chunked | 100 | 10.0x | 9.00 | 0.90 | - | - |" in text
    assert "chunked strategy needs 5.0-10.0x less peak memory than stock (goal: at least 6x; met in 1 of 2" in text
    assert "takes 0.90-2.00x stock's step time (goal: at most 1x; met in 1 of 2 cells)" in text
    assert "Fused" not in text


def test_bandwidth_bound_counts_the_bytes_a_step_must_move():
    from benchmarks import bound

    # GAT 8x8 float32: 3 passes x (4 B index + 64 x 4 B features + 8 x 4 B scores) per edge; per node 2 x 64 x 4
    # (x and its gradient) + 3 x 256 (projection) + 2 x 256 (output) + 16 x 8 (four float32 values per head)
    assert bound.step_bytes("gat", 110, 10, 8, 8, 64, "float32") == 110 * 876 + 10 * 1920
    # GATv2 projects twice; bfloat16 halves the feature bytes, not the indices and float32 scores
    assert bound.step_bytes("gatv2", 1, 1, 2, 32, 64, "bfloat16") == 3 * (4 + 128 + 8) + 256 + 6 * 128 + 256 + 32
    assert bound.bound_ms(10**9, 1000.0) == pytest.approx(1.0) and bound.bound_ms(10**9, None) is None


def test_gpu_tables_render_the_fused_rows_their_targets_and_the_bound():
    from benchmarks import report_gpu

    measured = dict(GPU_META, device="NVIDIA H100 80GB HBM3", triton="3.9.0")
    nodes = 1000
    limit = 1e3 * (11000 * 876 + nodes * 1920) / 2000e9  # ms at the 2,000 GB/s the run measured
    rows = [
        mem_row("stock", 1000, 10, 1.0, edges=10000),
        mem_row("chunked", 140, 20, 2.0, edges=10000),
        mem_row("fused", 50, 4, 0.4, edges=10000),  # 0.4x stock (target 0.5x), 50 B/edge (target 60): both met
    ]
    run = {"meta": measured, "suite": {"memory": rows, "bandwidth_gb_per_s": 2000.0}}
    text = report_gpu.render_memory([run])
    assert f"| gat | float32 | 10,000 | fused | 50 | 20.0x | 4.00 | 0.40 | {limit:.2f} | {4 / limit:.1f}x |" in text
    assert "Fused, GAT 8x8 float32 at 10,000 edges: 0.40x stock's step time (target: at most 0.5x; met)" in text
    assert "50 B/edge (target: at most 60; met)" in text
    assert f"{4 / limit:.1f}x the bandwidth bound (aim: within 2x; missed by {4 / limit / 2 - 1:.0%})" in text
    assert "2,000 GB/s (measured)" in text and "Triton 3.9.0" in text
    # without a measured bandwidth, the card's nominal one (3,350 GB/s for this card), marked as such
    nominal = report_gpu.render_memory([{"meta": measured, "suite": {"memory": rows}}])
    assert "3,350 GB/s (nominal)" in nominal and f"| {limit * 2000 / 3350:.2f} |" in nominal
    slow = [mem_row("stock", 1000, 10, 1.0), mem_row("fused", 66, 6, 0.6)]
    text = report_gpu.render_memory([gpu_run(memory=slow)])
    assert "0.60x stock's step time (target: at most 0.5x; missed by 20%), 66 B/edge (target: at most 60; " in text
    assert "missed by 10%)" in text
    peer = {
        "shape": {"heads": 2, "channels": 32, "dropout": 0.0},
        "turbo": "turbo-gnn 0.1",
        "rows": [
            mem_row("stock", 1700, 10, 1.0, layer="gatv2"),
            mem_row("fused", 150, 2.0, 0.2, layer="gatv2"),
            mem_row("turbo", 154, 2.5, 0.25, layer="gatv2"),
        ],
    }
    text = report_gpu.render_peer([gpu_run(peer=peer)])
    assert "Fused / turbo-gnn: 0.80-0.80x its step time (target: at most 1x; met in 1 of 1 cells)" in text
    assert "0.97-0.97x its bytes per edge (target: at most 1x; met in 1 of 1)" in text
    largest = [
        largest_row("stock", 100, 105, False),
        largest_row("chunked", 700, 720, False),
        largest_row("fused", 1200, 1250, False),
    ]
    text = report_gpu.render_largest([gpu_run(largest=largest)])
    assert "| stock | chunked | fused | chunked / stock | fused / stock |" in text
    assert "| 700 (fails at 720: out of memory) | 1,200 (fails at 1,250: out of memory) | 7.0x | 12.0x |" in text
    assert "Fused trains a graph 12.0-12.0x larger than stock (target: at least 15x; met in 0 of 1" in text


def largest_row(contender, largest, failing, bounded, layer="gat"):
    return {
        "layer": layer,
        "contender": contender,
        "dtype": "float32",
        "shape": {"heads": 8, "channels": 8},
        "largest_edges": largest,
        "first_failing_edges": failing,
        "failure": "out of memory",
        "ms_at_largest": 1.0,
        "bytes_per_edge_at_largest": 100,
        "probes": [],
        "bounded": bounded,
    }


def test_gpu_largest_merges_runs_and_says_when_a_search_stopped_before_its_answer():
    from benchmarks import report_gpu

    first = gpu_run(largest=[largest_row("stock", 50, 54, False), largest_row("lean", 160, None, True)])
    second = gpu_run(largest=[largest_row("lean", 380, 452, True)])  # 452 / 380 > 1.1: still only a lower bound
    merged = report_gpu.largest_by_contender([first, second])
    assert merged[("gat", "8x8", "float32", "chunked")] == {  # "lean": the chunked strategy, as recorded before
        "largest": 380,
        "failing": 452,
        "failure": "out of memory",
        "ms": 1.0,
        "exact": False,
    }
    assert merged[("gat", "8x8", "float32", "stock")]["exact"] is True
    text = report_gpu.render_largest([first, second])
    # a lower bound: lean's 380 over the 54 edges stock failed at (stock's largest is below 54), not 380 / 50
    assert "| at least 380 (fails at 452: out of memory) | at least 7.0x |" in text
    assert "(goal: at least 6x; met in 1 of 1, 0 of them only bounded below the goal)." in text
    short = gpu_run(largest=[largest_row("stock", 100, 105, False), largest_row("lean", 400, None, True)])
    assert "met in 0 of 1, 1 of them only bounded below the goal" in report_gpu.render_largest([short])
    both = gpu_run(largest=[largest_row("stock", 100, 105, False), largest_row("lean", 700, 720, False)])
    assert "| 700 (fails at 720: out of memory) | 7.0x |" in report_gpu.render_largest([both])  # both within 10%
    # stock's search stopped by its time bound before any failure: its size, so the ratio, is not bounded
    stopped = gpu_run(largest=[largest_row("stock", 100, None, True), largest_row("lean", 400, None, True)])
    text = report_gpu.render_largest([stopped])
    assert "| at least 400 | not decided |" in text
    assert "No ratio is decided; 1 not decided (stock's search stopped before any failure" in text


def layers_record(sampler_paired):
    ratio = {"ms": 1.0, "ratio": 1.0, "paired": 1.0}
    return {
        "graph": {"nodes": 20000, "edges": 200000},
        "layer": {"GATConv": ratio, "RepulsiveGATConv": ratio},
        "sampler": {"plain 2-layer GAT": ratio, "SVGD on every layer": {**ratio, "paired": sampler_paired}},
        "dropattention": {"attention dropout": ratio, "DropAttention": ratio},
        "compile_graph_breaks": 0,
        "sampler_host_syncs_per_step": 3,
        "sampler_host_sync_sites": {
            "graph_rma/particles/kernel.py:36": 2,
            "/opt/venv/lib/python3.12/site-packages/torch_geometric/utils/loop.py:113": 1,
        },
    }


def test_gpu_layers_sampler_verdict_and_sync_sites():
    from benchmarks import report_gpu

    text = report_gpu.render_layers([gpu_run(layers=layers_record(1.02)), gpu_run(layers=layers_record(1.10))])
    assert "| SVGD on every layer / no sampler, 2-layer GAT with Adam | 1.020 / 1.100 |" in text
    assert "inside the fused kernels" not in text
    fused = dict(layers_record(1.0), dropattention_fused={"DropAttention": {"ms": 1.0, "ratio": 1.1, "paired": 1.08}})
    with_fused = report_gpu.render_layers([gpu_run(layers=fused)])
    assert "| DropAttention / attention dropout inside the fused kernels, one lean layer | 1.080 |" in with_fused
    assert "costs 1.02-1.10x a plain step (goal: at most 1.05x; met in 1 of 2 runs)" in text
    assert "`graph_rma/particles/kernel.py:36` (2), `torch_geometric/utils/loop.py:113` (1)" in text


def test_gpu_kernel_names_drop_return_type_namespaces_and_templates():
    from benchmarks import report_gpu

    assert (
        report_gpu.kernel_name("void at::native::vectorized_gather_kernel<16, long>(char*, long)")
        == "vectorized_gather_kernel"
    )
    assert (
        report_gpu.kernel_name("void at::native::indexFuncLargeIndex<float, at::native::(anonymous namespace)::R>(x)")
        == "indexFuncLargeIndex"
    )


def test_a_lease_folder_is_recorded_with_its_conditions_and_test_outcomes(tmp_path):
    """benchmarks/record_gpu.py: the lease's suite.json and JUnit files become one gpu.json run, which renders."""
    import json

    from benchmarks import record_gpu, report_gpu

    out = tmp_path / "lease"
    out.mkdir()
    suite = {
        "device": "NVIDIA H200",
        "torch": "2.11.0+cu130",
        "cuda": "13.0",
        "pyg": "2.8.0",
        "driver": "580",
        "memory_gib": 139.8,
        "triton": "3.5.0",
        "smoke": False,
        "command": "python -m benchmarks.gpu_suite --steps memory",
        "bandwidth_gb_per_s": 4000.0,
        "memory": [mem_row("stock", 1000, 10, 1.0), mem_row("fused", 50, 4, 0.4)],
    }
    (out / "suite.json").write_text(json.dumps(suite))
    (out / "junit_fused.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.test_lean_fused" name="test_a[8]"/>'
        '<testcase classname="tests.test_lean_fused" name="test_b"><failure message="x"/></testcase>'
        "</testsuite></testsuites>"
    )
    (out / "junit.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.test_cuda" name="test_c"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    (out / "turbo_build.log").write_text("compiling\nturbo-gnn built in 120 s\nexit 0 after 125 s\n")
    target = tmp_path / "gpu.json"
    assert record_gpu.main([str(out), "--machine", "lent H200", "--file", str(target)]) == 0
    (run,) = json.loads(target.read_text())
    assert run["meta"]["device"] == "NVIDIA H200" and run["meta"]["triton"] == "3.5.0"
    assert run["meta"]["machine"] == "lent H200" and run["meta"]["command"] == suite["command"]
    assert "device" not in run["suite"] and run["suite"]["bandwidth_gb_per_s"] == 4000.0
    assert run["tests"] == [
        {"test": "tests/test_lean_fused.py::test_a[8]", "outcome": "passed"},
        {"test": "tests/test_lean_fused.py::test_b", "outcome": "failed"},
        {"test": "tests/test_cuda.py::test_c", "outcome": "skipped"},
    ]
    assert run["turbo_build"] == ["turbo-gnn built in 120 s", "exit 0 after 125 s"]
    assert "1 of 3 CUDA tests passed on NVIDIA H200" in report_gpu.render_tests([run])
    assert "4,000 GB/s (measured)" in report_gpu.render_memory([run]) and "Triton 3.5.0" in report_gpu.render_memory(
        [run]
    )
