r"""HuggingFace ``transformers`` (5.x) models: DropAttention, heads as particles, head diagnostics and pruning.

The one part of the package that imports ``transformers`` (the optional extra ``hf``: ``pip install
'graph-rma[hf]'``). Three one-liners::

    graph_rma.hf.use_drop_attention(model, graph_rma.DropAttention(p=0.1, window=2, mode="column"))
    graph_rma.SVGD(model, alpha=0.1, eps=1).attach(optimizer)       # every attention module's heads, found by itself
    Trainer(model, args, ..., callbacks=[graph_rma.hf.SamplerCallback("svgd:alpha=0.1")])

* :mod:`.attention`: DropAttention as a registered attention function (``attn_implementation =``
  :data:`ATTENTION_NAME`, with its mask function), for every family that computes attention through
  ``transformers``' ``AttentionInterface``; :func:`use_drop_attention` installs it.
* :mod:`.layouts`: which slices of an attention module form head :math:`h` (BERT-like ``self.query`` /
  ``output.dense``, ALBERT, DistilBERT, Llama-like ``q_proj`` / ``o_proj`` with grouped-query attention,
  BART-like ``out_proj``, GPT-2's fused ``c_attn``). The samplers, :func:`graph_rma.find_particle_groups`,
  :func:`graph_rma.apply_variant` and :class:`graph_rma.diagnostics.HeadCapture` find them without an extra argument:
  this subpackage is imported by itself the first time a model holding a ``transformers`` module is searched.
* :mod:`.pruning`: :func:`prune_heads` (``transformers`` 5 removed its own), equal to masking the heads, and
  :func:`from_pretrained` to load a pruned model back.
* :mod:`.trainer`: :class:`SamplerCallback` for ``transformers.Trainer`` (also under ``accelerate`` / DDP).
"""

from __future__ import annotations

from ..engine.optional import MissingExtraError, require

_transformers = require("transformers", "hf", "graph_rma.hf")
if int(_transformers.__version__.split(".")[0]) < 5:
    raise MissingExtraError(
        f"graph_rma.hf needs transformers>=5, found {_transformers.__version__}: pip install 'graph-rma[hf]'",
        "transformers",
        "hf",
    )

from .attention import ATTENTION_NAME, attention_function_modules, drop_attention_forward, use_drop_attention  # noqa: E402
from .layouts import AttentionLayout, attention_layers, find_attention_layout  # noqa: E402
from .pruning import from_pretrained, prune_heads  # noqa: E402
from .trainer import SamplerCallback  # noqa: E402

__all__ = [
    "ATTENTION_NAME",
    "AttentionLayout",
    "SamplerCallback",
    "attention_function_modules",
    "attention_layers",
    "drop_attention_forward",
    "find_attention_layout",
    "from_pretrained",
    "prune_heads",
    "use_drop_attention",
]
