"""The fused-kernel peer of the GPU suite: turbo-gnn's GATv2 aggregation (Fomina et al., ICML 2026) behind a layer
that uses a stock ``GATv2Conv``'s own parameters, so that all three contenders compute the same function.

PyPI has no wheel of turbo-gnn, only a source distribution whose ``setup.py`` downloads a prebuilt wheel from the
project's releases (unreachable on the lent machine) or else compiles seven CUDA sources. ``build`` compiles the
extension with torch's own JIT builder (``torch.utils.cpp_extension.load``) for the card's architecture only and
imports the package's pure-Python API on top of it; nothing is installed.

    python -m benchmarks.turbo_peer build --sdist .whl/turbo_gnn-0.1.0rc4.tar.gz --dir /tmp/turbo   # on the GPU

The suite's ``peer`` step then calls :func:`load` with the same ``--dir`` (the build is reused when finished).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import sys
import tarfile
import time
from pathlib import Path
from typing import Optional

import torch

from graph_rma import GraphRMAError

SOURCES = (
    "turbo_gnn.cpp",
    "reduction/reduction_aggr.cu",
    "reduction/reduction_aggr_base.cu",
    "gatv2/gatv2_kernel.cu",
    "gt/graph_transformer.cu",
    "spmm/cusparse_spmm.cpp",
    "spmm/edge_norm_kernels.cu",
)
DONE = "built.ok"  # written into --dir when the extension imported; the suite waits for it


def _unpack(sdist: Path, into: Path) -> Path:
    """The source tree of ``sdist`` (a ``.tar.gz``) under ``into``, unpacked once."""
    into.mkdir(parents=True, exist_ok=True)
    roots = [p for p in into.iterdir() if p.is_dir() and (p / "csrc").is_dir()]
    if not roots:
        with tarfile.open(sdist) as tar:
            tar.extractall(into, filter="data")
        roots = [p for p in into.iterdir() if p.is_dir() and (p / "csrc").is_dir()]
    if len(roots) != 1:
        raise FileNotFoundError(f"{sdist}: expected one source tree with a csrc/ folder, found {len(roots)}")
    return roots[0]


def _nvidia_dirs(kind: str):
    """The include or lib folders of the pip-installed ``nvidia-*`` packages (cuSPARSE lives there on pip torch)."""
    try:
        import nvidia
    except ImportError:
        return []
    return sorted(d for root in nvidia.__path__ for d in glob.glob(os.path.join(root, "*", kind)))


def build(sdist: Path, folder: Path, verbose: bool = True):
    """Compile turbo-gnn's extension into ``folder`` (reused when already built) and import the package on it."""
    from torch.utils import cpp_extension

    src = _unpack(sdist, folder / "src")
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    os.environ.setdefault("MAX_JOBS", str(max(1, (os.cpu_count() or 2) // 2)))
    libs = _nvidia_dirs("lib")
    (folder / "ext").mkdir(parents=True, exist_ok=True)
    ext = cpp_extension.load(
        name="turbo_gnn_C",
        sources=[str(src / "csrc" / s) for s in SOURCES],
        extra_include_paths=[str(src / "csrc")] + _nvidia_dirs("include"),
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3", "--use_fast_math"],
        extra_ldflags=[f"-L{d}" for d in libs] + [f"-Wl,-rpath,{d}" for d in libs] + ["-lcusparse"],
        build_directory=str(folder / "ext"),
        verbose=verbose,
    )
    sys.modules["turbo_gnn._C"] = ext  # the package imports its kernels as turbo_gnn._C
    return _import_package(src / "turbo_gnn")


def _import_package(folder: Path):
    """The package in ``folder`` (its pure-Python API, imported once as ``turbo_gnn``), loaded from its files: the
    import path stays as it is."""
    if folder.name in sys.modules:
        return sys.modules[folder.name]
    spec = importlib.util.spec_from_file_location(
        folder.name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[folder.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[folder.name]
        raise
    return module


def load(folder: Path, wait: float = 0.0):
    """The built package from ``folder``, waiting up to ``wait`` seconds for a build running beside; ``None`` and
    the reason when there is none."""
    deadline = time.monotonic() + wait
    while not (folder / DONE).is_file() and time.monotonic() < deadline:
        time.sleep(1.0)
    if not (folder / DONE).is_file():
        return None, f"no finished turbo-gnn build in {folder} (see its build log)"
    sdist = Path((folder / DONE).read_text().strip())
    return build(sdist, folder, verbose=False), None


class TurboGATv2(torch.nn.Module):
    """A stock ``GATv2Conv``'s function computed by turbo-gnn's fused aggregation, on the conv's own parameters.

    ``lin_r`` projects the target (turbo-gnn's ``x``), ``lin_l`` the source (its ``x_neighbors``); the CSR graph,
    with the self-loops ``GATv2Conv`` adds, is built by :meth:`graph` (once per graph, like the lean layer's CSR).
    Attention dropout is not supported: compare with ``dropout=0``.
    """

    def __init__(self, conv, turbo):
        super().__init__()
        if conv.dropout or not conv.concat or conv.share_weights or conv.lin_edge is not None or conv.residual:
            raise GraphRMAError(
                "TurboGATv2 needs GATv2Conv(dropout=0, concat=True, share_weights=False), no edge "
                "features and no residual"
            )
        self.conv, self.turbo = conv, turbo

    def graph(self, edge_index: torch.Tensor, num_nodes: int):
        from torch_geometric.utils import add_self_loops, remove_self_loops

        if self.conv.add_self_loops:
            edge_index, _ = add_self_loops(remove_self_loops(edge_index)[0], num_nodes=num_nodes)
        adjacency = self.turbo.AdjacencyForwardBackwardWithNodeBuckets.from_edge_list(edge_index, num_nodes)
        return adjacency.to(edge_index.device)

    def forward(self, x: torch.Tensor, graph) -> torch.Tensor:
        H, C = self.conv.heads, self.conv.out_channels
        source = self.conv.lin_l(x).view(-1, H, C)
        target = self.conv.lin_r(x).view(-1, H, C)
        out = self.turbo.gatv2_aggr(
            graph,
            target,
            x_neighbors=source,
            attention_weights=self.conv.att.view(H, C),
            negative_slope=self.conv.negative_slope,
        )
        out = out.view(-1, H * C)
        return out if self.conv.bias is None else out + self.conv.bias


def main(argv: Optional[list] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["build"])
    p.add_argument("--sdist", type=Path, required=True, help="turbo-gnn's source distribution (.tar.gz)")
    p.add_argument("--dir", type=Path, required=True, help="build folder (reused)")
    a = p.parse_args(argv)
    if not a.sdist.is_file():
        p.error(f"--sdist: no such file: {a.sdist}")
    if not torch.cuda.is_available():
        p.error("building turbo-gnn needs a CUDA device and nvcc")
    start = time.perf_counter()
    build(a.sdist.resolve(), a.dir)
    (a.dir / DONE).write_text(str(a.sdist.resolve()))
    print(f"turbo-gnn built in {time.perf_counter() - start:.0f} s into {a.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
