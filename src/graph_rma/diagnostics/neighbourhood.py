r"""One node's neighbourhood and the attention each head pays to it, as a :mod:`networkx` graph and as a picture.

A GAT layer (PyG's ``GATConv``/``GATv2Conv``, :class:`~graph_rma.nn.RepulsiveGATConv`) called with
``return_attention_weights=True`` returns ``(edge_index, alpha)``: for every edge :math:`j \to i` and head
:math:`h` the weight :math:`\alpha^{(h)}_{ij}`, normalised over the incoming edges of each target,
:math:`\sum_{j \in \mathcal{N}(i)} \alpha^{(h)}_{ij} = 1` (self-loops included). :func:`neighbourhood_attention_graph`
keeps the edges into ``node`` (and, with ``hops=2``, into its in-neighbours) with their per-head weights;
:func:`plot_neighbourhood_attention` draws one panel per head with networkx's layouts, each edge
:math:`j \to i` drawn with line width ``width_scale`` :math:`\cdot\, \alpha^{(h)}_{ij}`. Diverse heads (what the
repulsive samplers aim for) look different from panel to panel; collapsed heads look alike.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Optional, Sequence, Union

from torch import Tensor

from .._errors import GraphRMAError
from ..engine.figures import new_figure, save_png

__all__ = ["neighbourhood_attention_graph", "neighbourhood_attention_figure", "plot_neighbourhood_attention"]

PathLike = Union[str, os.PathLike]
LAYOUTS = ("shell", "spring", "kamada_kawai")


def _check(edge_index: Tensor, attention: Tensor, node: int, hops: int) -> Tensor:
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise GraphRMAError(
            f"edge_index: expected a [2, E] tensor, got {getattr(edge_index, 'shape', type(edge_index))}"
        )
    if not isinstance(attention, Tensor) or attention.dim() not in (1, 2) or attention.size(0) != edge_index.size(1):
        raise GraphRMAError(
            f"attention: expected [E] or [E, heads] with E = {edge_index.size(1)}, "
            f"got {getattr(attention, 'shape', type(attention))}"
        )
    if not isinstance(hops, int) or hops < 1:
        raise GraphRMAError(f"hops: expected a positive integer, got {hops!r}")
    if not bool((edge_index[1] == int(node)).any()):
        raise GraphRMAError(f"node: expected a node with incoming edges in edge_index, got {node!r}")
    return attention.detach().reshape(attention.size(0), -1).double().cpu()


def neighbourhood_attention_graph(edge_index: Tensor, attention: Tensor, node: int, hops: int = 1):
    r"""The edges into ``node`` (and, for ``hops > 1``, into its in-neighbours up to ``hops - 1`` steps away) with
    their per-head attention, as a :class:`networkx.DiGraph`.

    Args:
        edge_index: ``[2, E]`` (source, target), as returned with ``return_attention_weights=True``.
        attention: ``[E, heads]`` (or ``[E]``) attention weights of those edges.
        node: the target node whose neighbourhood is shown.
        hops: how many steps of incoming edges to keep.

    The result is a ``DiGraph`` whose edge :math:`j \to i` has the attribute ``attention`` (a list with
    :math:`\alpha^{(h)}_{ij}` per head, summed over duplicate edges) and whose nodes have the attribute ``hop`` (the
    number of steps to ``node``, 0 for itself).
    """
    import networkx as nx

    att = _check(edge_index, attention, node, hops)
    src, dst = edge_index[0].tolist(), edge_index[1].tolist()
    graph = nx.DiGraph(node=int(node), heads=att.size(1))
    graph.add_node(int(node), hop=0)
    frontier = {int(node)}
    for hop in range(1, hops + 1):
        nxt = set()
        for e, (j, i) in enumerate(zip(src, dst)):
            if i not in frontier:
                continue
            if j not in graph:
                graph.add_node(j, hop=hop)
                nxt.add(j)
            if graph.has_edge(j, i):
                prev = graph.edges[j, i]["attention"]
                graph.edges[j, i]["attention"] = [a + b for a, b in zip(prev, att[e].tolist())]
            else:
                graph.add_edge(j, i, attention=att[e].tolist())
        frontier = nxt
    return graph


def _layout(nx, graph, node: int, layout: str, seed: int):
    if layout == "shell":
        shells = {}
        for n, hop in graph.nodes(data="hop"):
            shells.setdefault(hop, []).append(n)
        return nx.shell_layout(graph, nlist=[sorted(shells[h]) for h in sorted(shells)])
    undirected = graph.to_undirected()
    if layout == "spring":
        return nx.spring_layout(undirected, seed=seed)
    return nx.kamada_kawai_layout(undirected)


def neighbourhood_attention_figure(
    edge_index: Tensor,
    attention: Tensor,
    node: int,
    hops: int = 1,
    heads: Optional[Sequence[int]] = None,
    layout: str = "shell",
    seed: int = 0,
    width_scale: float = 5.0,
    title: Optional[str] = None,
):
    r"""The picture of :func:`plot_neighbourhood_attention` as a matplotlib ``Figure`` (one axes per head, in
    ``heads`` order); each edge :math:`j \to i` of head :math:`h` is an arrow of line width
    ``width_scale * attention[e, h]`` (self-loops drawn as loops)."""
    if layout not in LAYOUTS:
        raise GraphRMAError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
    if not width_scale > 0:
        raise GraphRMAError(f"width_scale: expected > 0, got {width_scale!r}")
    import networkx as nx

    graph = neighbourhood_attention_graph(edge_index, attention, node, hops)
    num_heads = graph.graph["heads"]
    heads = list(range(num_heads)) if heads is None else [int(h) for h in heads]
    if not heads or any(not 0 <= h < num_heads for h in heads):
        raise GraphRMAError(f"heads: expected indices in [0, {num_heads}), got {heads}")
    pos = _layout(nx, graph, int(node), layout, seed)

    cols = min(len(heads), 4)
    rows = math.ceil(len(heads) / cols)
    fig = new_figure(3.2 * cols, 3.2 * rows + (0.4 if title else 0.0), "plot_neighbourhood_attention")
    edges = list(graph.edges(data="attention"))
    colors = [
        "tab:red" if n == int(node) else ("tab:orange" if hop == 1 else "tab:gray")
        for n, hop in graph.nodes(data="hop")
    ]
    for k, h in enumerate(heads):
        ax = fig.add_subplot(rows, cols, k + 1)
        nx.draw_networkx_nodes(graph, pos, ax=ax, node_size=220, node_color=colors)
        nx.draw_networkx_labels(graph, pos, ax=ax, font_size=7)
        nx.draw_networkx_edges(
            graph,
            pos,
            ax=ax,
            edgelist=[(j, i) for j, i, _ in edges],
            width=[width_scale * a[h] for _, _, a in edges],
            arrows=True,
            arrowsize=8,
            edge_color="tab:blue",
            node_size=220,
        )
        for n, a in ((j, a) for j, i, a in edges if j == i):  # self-loops are small: also print their weight
            x, y = pos[n]
            ax.annotate(
                f"self {a[h]:.2f}",
                (x, y),
                xytext=(0, -13),
                textcoords="offset points",
                ha="center",
                va="top",
                fontsize=6,
                color="tab:blue",
            )
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_aspect("equal", adjustable="datalim")
        ax.margins(0.2)
        ax.set_axis_off()
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_neighbourhood_attention(
    edge_index: Tensor,
    attention: Tensor,
    node: int,
    path: PathLike = "neighbourhood_attention.png",
    hops: int = 1,
    heads: Optional[Sequence[int]] = None,
    layout: str = "shell",
    seed: int = 0,
    width_scale: float = 5.0,
    title: Optional[str] = None,
) -> Path:
    r"""Draw, per head, the attention that ``node`` pays to its neighbourhood, and write it as a PNG to ``path``.

    Each edge :math:`j \to i` is an arrow of width ``width_scale`` :math:`\cdot\, \alpha^{(h)}_{ij}`; the centre
    node is red, its in-neighbours orange, farther nodes grey. ``layout``: ``"shell"`` (``node`` in the middle,
    one ring per hop), ``"spring"`` (seeded with ``seed``) or ``"kamada_kawai"`` (networkx layouts; the same
    positions in every panel). Needs matplotlib (the ``plots`` extra).

    Example::

        out, (ei, alpha) = model.conv1(x, edge_index, return_attention_weights=True)
        plot_neighbourhood_attention(ei, alpha, node=0, path="node0.png")
    """
    fig = neighbourhood_attention_figure(edge_index, attention, node, hops, heads, layout, seed, width_scale, title)
    return save_png(fig, path)
