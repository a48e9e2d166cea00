r"""DropAttention (Zehui et al., 2019): drop attention weights, not hidden units, then renormalise.

For an attention row :math:`a_{i,\cdot}` (the weights one query / destination node :math:`i` puts on its keys /
source nodes), DropAttention draws a binary mask :math:`m` and returns

.. math::
    \hat a_{ij} = \frac{m_{ij}\, a_{ij}}{\sum_k m_{ik}\, a_{ik}} \quad (\texttt{rescale="normalized"}), \qquad
    \hat a_{ij} = \frac{m_{ij}\, a_{ij}}{1 - p} \quad (\texttt{rescale="inverse"}).

The mask follows the paper's Algorithm 1: *window starts* are drawn i.i.d. with probability
:math:`\gamma = p / w`, and each start drops :math:`w` consecutive positions (fewer at the end of a row), so an
interior position is dropped with probability :math:`1 - (1 - p/w)^w` (:math:`= p` for :math:`w = 1`).

* ``mode="element"`` (DropAttention(e)) drops single weights :math:`a_{ij}`. Dense ``[..., L, S]`` matrices:
  consecutive positions along the key axis of each row. Sparse graphs: the incoming edges of each destination,
  ordered by source node id, so that on a complete graph the sparse and dense versions coincide.
* ``mode="column"`` (DropAttention(c)) drops a key / value unit :math:`v_j` for every query: a whole column
  :math:`j` of the attention matrix; on a graph, every edge leaving source node :math:`j`. Windows run over
  consecutive column indices / source node ids.

Masks are drawn independently for every head (every leading index of a dense input).

Defined cases:

* A row left with no surviving weight (all its weights dropped; for ``"normalized"`` also a row whose
  surviving weights sum to zero) is returned **unchanged** rather than as zeros or NaN: that query keeps its full
  attention for this step.
* ``training=False`` or ``p = 0``: the input is returned as is (identity at inference).
* float16 / bfloat16 inputs are rescaled in float32 and returned in their own dtype.
* Randomness comes from ``torch.rand`` with the given ``generator`` (drawn on the generator's device), so a fixed
  seed reproduces the mask. The uniforms are drawn in the order ``[H, P]`` (sparse: head-major, edges sorted by
  destination then source; dense: the input's own layout), hence a complete graph with ``H`` heads and a dense
  ``[H, N, N]`` matrix get the very same mask from the same seed. For ``window=1`` in element mode every edge is
  independent and the sparse draw follows the given edge order (no sort is needed).

The package: :mod:`~graph_rma.dropattention.functional` holds the two functions (sparse :func:`drop_attention`,
dense :func:`drop_attention_dense`) and the rescaling, :mod:`~graph_rma.dropattention.masks` the one mask-drawing
routine (:func:`draw_window_mask`) and the edge order windows run along, :mod:`~graph_rma.dropattention.module` the
:class:`DropAttention` module layers take; the four public names are importable from ``graph_rma.dropattention``.
"""

from .functional import drop_attention, drop_attention_dense
from .masks import draw_window_mask
from .module import DropAttention

__all__ = ["DropAttention", "drop_attention", "drop_attention_dense", "draw_window_mask"]
