r"""A GraphWriter-style graph-to-text generator (Koncel-Kedziorski et al., NAACL 2019) on PyG batches.

Encoder: entity strings and the title are each read by a BiLSTM over word embeddings (an entity's vector is the
concatenation of the final forward and backward states); relation, inverse-relation and global nodes start from a
learned embedding (plus, when the batched graph carries ``node_tokens [N, L]`` as WebNLG's open-vocabulary relations
do, the entity BiLSTM's reading of the node's text); a :class:`~graph_rma.nn.GraphTransformerEncoder` runs over the
batched graph (one sparse call for all graphs, no per-example loop).

Decoder: an LSTM cell with input feeding. At step :math:`t`, with :math:`y_{t-1}` embedded (a copied entity is
fed back as its type tag, as in GraphWriter),

.. math::
    h_t = \mathrm{LSTM}([e(y_{t-1}); c_{t-1}], h_{t-1}),\quad
    c_t = [\mathrm{Attn}(h_t, \text{graph nodes}); \mathrm{Attn}(h_t, \text{title})],\quad o_t = [h_t; c_t]

and the output distribution mixes generation and copying with a switch :math:`s_t = \sigma(w^\top o_t)`:

.. math::
    p(y_t = w) = s_t\,\mathrm{softmax}(W o_t)_w,\qquad
    p(y_t = \text{entity } i) = (1 - s_t)\,\mathrm{softmax}_i(g_i^\top U o_t)

over the vocabulary and the record's entities :math:`g_i` (graph-encoded entity nodes). Output id
``len(vocab) + i`` means "copy entity i"; relexicalisation replaces it by the entity's text.

The decoder's attention (:class:`DecoderAttention`) registers no head layout, so the particle samplers act on
the graph encoder's heads only, as in the repulsive-attention paper's GraphWriter experiment.

The hidden state starts from the global node's final state (as in GraphWriter); the cell state starts at zero.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch_geometric.utils import to_dense_batch

from .._errors import GraphRMAError
from ..data.graph_text import ENTITY, GLOBAL
from ..nn.graph_transformer import GraphTransformerEncoder

__all__ = ["DecoderAttention", "GraphWriter"]

Memory = Dict[str, Tensor]


class DecoderAttention(nn.Module):
    r"""Multi-head scaled dot-product attention of one query vector per example over a padded memory.

    ``forward(query [B, C], memory [B, S, C], mask [B, S] (True = real)) -> [B, C]``.
    """

    def __init__(self, channels: int, heads: int = 4) -> None:
        super().__init__()
        if channels % heads != 0:
            raise GraphRMAError(f"heads: {heads} does not divide channels={channels}")
        self.heads, self.head_dim = heads, channels // heads
        self.q = nn.Linear(channels, channels)
        self.k = nn.Linear(channels, channels)
        self.v = nn.Linear(channels, channels)
        self.o = nn.Linear(channels, channels)

    def project(self, memory: Tensor) -> Tuple[Tensor, Tensor]:
        """Keys and values ``[B, H, S, d]`` (computed once per sequence and reused at every step)."""
        B, S, _ = memory.shape
        k = self.k(memory).view(B, S, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(memory).view(B, S, self.heads, self.head_dim).transpose(1, 2)
        return k, v

    def forward(self, query: Tensor, kv: Tuple[Tensor, Tensor], mask: Tensor) -> Tensor:
        k, v = kv
        B = query.size(0)
        q = self.q(query).view(B, self.heads, 1, self.head_dim)
        score = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)  # [B, H, 1, S]
        score = score.masked_fill(~mask[:, None, None, :], float("-inf"))
        out = torch.softmax(score, dim=-1) @ v  # [B, H, 1, d]
        return self.o(out.reshape(B, -1))


class GraphWriter(nn.Module):
    r"""GraphWriter: graph-transformer encoder + LSTM decoder with attention over nodes and title, and copying.

    Arguments pad_id, bos_id, eos_id, unk_id: special ids of the vocabulary.

    Args:
        vocab_size: size of the shared word vocabulary (titles, entity words, abstract words, type tags).
        num_relations: number of relation types ``R`` (``2R + 1`` start embeddings: relations, inverses, global).
        hidden: hidden size (GraphWriter: 500).
        num_layers: graph-transformer blocks (GraphWriter: 6).
        heads: encoder heads (GraphWriter: 4).
        dropout: dropout in the encoder blocks and on the decoder output.
        attention_dropout: dropout on encoder edge weights (training only).
        decoder_heads: heads of the decoder's attention over nodes and title (GraphWriter: 4).
        use_title: attend over the title (GraphWriter's ``-title``).
        drop_attention: optional DropAttention module for the encoder's edge weights.
    """

    def __init__(
        self,
        vocab_size: int,
        num_relations: int,
        hidden: int = 500,
        num_layers: int = 6,
        heads: int = 4,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        decoder_heads: int = 4,
        use_title: bool = True,
        drop_attention: Optional[nn.Module] = None,
        pad_id: int = 0,
        unk_id: int = 1,
        bos_id: int = 2,
        eos_id: int = 3,
    ) -> None:
        super().__init__()
        if vocab_size <= 4:
            raise GraphRMAError(f"vocab_size: expected more than the 4 special tokens, got {vocab_size}")
        if hidden % 2 != 0:
            raise GraphRMAError(f"hidden: expected an even size (two LSTM directions), got {hidden}")
        self.vocab_size, self.num_relations, self.hidden = vocab_size, num_relations, hidden
        self.use_title = use_title
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = pad_id, unk_id, bos_id, eos_id
        self.embed = nn.Embedding(vocab_size, hidden, padding_idx=pad_id)
        self.entity_lstm = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.relation_embed = nn.Embedding(2 * num_relations + 1, hidden)
        self.encoder = GraphTransformerEncoder(
            hidden, num_layers, heads, dropout, attention_dropout, drop_attention=drop_attention
        )
        ctx = 2 * hidden if use_title else hidden
        if use_title:
            self.title_lstm = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)
            self.title_attn = DecoderAttention(hidden, decoder_heads)
        self.graph_attn = DecoderAttention(hidden, decoder_heads)
        self.cell = nn.LSTMCell(hidden + ctx, hidden)
        self.drop = nn.Dropout(dropout)
        self.switch = nn.Linear(hidden + ctx, 1)
        self.generate = nn.Linear(hidden + ctx, vocab_size)
        self.copy = nn.Linear(hidden + ctx, hidden)
        nn.init.xavier_normal_(self.relation_embed.weight)

    # --------------------------------------------------------------------------------------------------------------
    def _bilstm(self, lstm: nn.LSTM, tokens: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
        packed = pack_padded_sequence(
            self.embed(tokens), lengths.cpu().clamp(min=1), batch_first=True, enforce_sorted=False
        )
        out, (h, _) = lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=tokens.size(1))
        return out, torch.cat([h[0], h[1]], dim=-1)

    def _node_text(self, node_tokens: Tensor, like: Tensor) -> Tensor:
        """``[N, C]``: the entity BiLSTM's reading of each node's token ids ``node_tokens [N, L]`` (0 = padding);
        zero for nodes without text."""
        lengths = (node_tokens != self.pad_id).sum(-1)
        has = lengths > 0
        out = torch.zeros_like(like)
        if bool(has.any()):
            out[has] = self._bilstm(self.entity_lstm, node_tokens[has], lengths[has])[1]
        return out

    def encode(self, batch: Dict[str, Tensor], return_attention: bool = False) -> Memory:
        """Encode a :func:`graph_rma.data.graph_text.collate` batch into the decoder's memory."""
        graph = batch["graph"]
        kind = graph.node_kind
        is_ent = kind == ENTITY
        _, ent_vec = self._bilstm(self.entity_lstm, batch["entity_tokens"], batch["entity_lengths"])
        if ent_vec.size(0) != int(is_ent.sum()):
            raise GraphRMAError("batch: entity_tokens rows do not match the graph's entity nodes")
        ent_row = (is_ent.long().cumsum(0) - 1).clamp(min=0)
        rel_vec = self.relation_embed(torch.where(is_ent, torch.zeros_like(graph.node_label), graph.node_label))
        node_tokens = getattr(graph, "node_tokens", None)
        if node_tokens is not None:  # open-vocabulary relations (WebNLG): add the BiLSTM reading of the node's text
            rel_vec = rel_vec + self._node_text(node_tokens, rel_vec)
        x = torch.where(is_ent.unsqueeze(-1), ent_vec[ent_row], rel_vec)
        if return_attention:
            nodes, attention = self.encoder(x, graph.edge_index, return_attention=True)
        else:
            nodes, attention = self.encoder(x, graph.edge_index), []
        node_batch = graph.batch
        mem_nodes, node_mask = to_dense_batch(nodes, node_batch)
        ents, ent_mask = to_dense_batch(nodes[is_ent], node_batch[is_ent])
        memory: Memory = {
            "nodes": mem_nodes,
            "node_mask": node_mask,
            "node_kv": self.graph_attn.project(mem_nodes),
            "entities": ents,
            "entity_mask": ent_mask,
            "entity_types": batch["entity_types"][:, : ents.size(1)],
            "global": nodes[kind == GLOBAL],
        }
        if self.use_title:
            title, _ = self._bilstm(self.title_lstm, batch["title"], batch["title_lengths"])
            tmask = torch.arange(title.size(1), device=title.device)[None, :] < batch["title_lengths"][:, None]
            memory.update(title=title, title_mask=tmask, title_kv=self.title_attn.project(title))
        memory["attention"] = attention  # type: ignore[assignment]
        return memory

    def _context(self, h: Tensor, memory: Memory) -> Tensor:
        ctx = self.graph_attn(h, memory["node_kv"], memory["node_mask"])
        if self.use_title:
            ctx = torch.cat([ctx, self.title_attn(h, memory["title_kv"], memory["title_mask"])], dim=-1)
        return ctx

    def init_state(self, memory: Memory) -> Tuple[Tensor, Tensor, Tensor]:
        h = memory["global"]
        return h, torch.zeros_like(h), self._context(h, memory)

    def step(self, state: Tuple[Tensor, Tensor, Tensor], token: Tensor, memory: Memory):
        """One decoder step: ``token [B]`` (input ids) -> new state and the output features ``o_t``."""
        h, c, ctx = state
        h, c = self.cell(torch.cat([self.embed(token), ctx], dim=-1), (h, c))
        ctx = self._context(h, memory)
        return (h, c, ctx), torch.cat([h, ctx], dim=-1)

    def log_probs(self, out: Tensor, memory: Memory) -> Tensor:
        """``[..., V + Emax]`` log-probabilities: vocabulary words, then "copy entity i" for each entity slot."""
        out = self.drop(out)
        s = self.switch(out)
        gen = F.log_softmax(self.generate(out), dim=-1) + F.logsigmoid(s)
        ents, mask = memory["entities"], memory["entity_mask"]
        q = self.copy(out)
        if q.dim() == 3:  # [B, T, C] x [B, E, C] -> [B, T, E]
            score = q @ ents.transpose(1, 2)
            score = score.masked_fill(~mask[:, None, :], float("-inf"))
        else:
            score = (ents @ q.unsqueeze(-1)).squeeze(-1).masked_fill(~mask, float("-inf"))
        cp = F.log_softmax(score, dim=-1) + F.logsigmoid(-s)
        return torch.cat([gen, cp], dim=-1)

    def input_ids(self, token: Tensor, memory: Memory) -> Tensor:
        """Output ids -> next input ids: a copy id ``V + i`` becomes entity ``i``'s type tag."""
        V = self.vocab_size
        is_copy = token >= V
        ent = (token - V).clamp(min=0, max=memory["entity_types"].size(1) - 1)
        tag = memory["entity_types"].gather(1, ent.unsqueeze(1)).squeeze(1)
        return torch.where(is_copy, tag, token)

    # --------------------------------------------------------------------------------------------------------------
    def forward(self, batch: Dict[str, Tensor], return_attention: bool = False):
        """Teacher-forced log-probabilities ``[B, T, V + Emax]`` for ``batch['target_in']``
        (and the encoder's per-layer ``(alpha, index)`` pairs with ``return_attention=True``)."""
        memory = self.encode(batch, return_attention=return_attention)
        state = self.init_state(memory)
        outs = []
        for tok in batch["target_in"].t():
            state, o = self.step(state, tok, memory)
            outs.append(o)
        logp = self.log_probs(torch.stack(outs, dim=1), memory)
        return (logp, memory["attention"]) if return_attention else logp

    def loss(
        self,
        batch: Dict[str, Tensor],
        return_attention: bool = False,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ):
        r"""Token negative log-likelihood of ``batch['target_out']`` (padding ignored): the mean over tokens, or
        with ``reduction="sum"`` their sum (multi-process training divides by the global batch's token count).

        With ``label_smoothing`` :math:`\varepsilon > 0` each token's loss is
        :math:`(1 - \varepsilon)\,(-\log p(y_t)) + \varepsilon\,\frac{1}{K}\sum_k (-\log p(k))` over the
        :math:`K` outputs the record can produce (the vocabulary and its own entities; a padded entity slot is not
        one): ``torch.nn.functional.cross_entropy``'s smoothing, over the mixed generate-or-copy distribution."""
        if reduction not in ("mean", "sum"):
            raise GraphRMAError(f"reduction: expected 'mean' or 'sum', got {reduction!r}")
        if not 0.0 <= label_smoothing < 1.0:
            raise GraphRMAError(f"label_smoothing: expected a probability in [0, 1), got {label_smoothing!r}")
        out = self.forward(batch, return_attention=return_attention)
        logp, attention = out if return_attention else (out, None)
        logp, tgt = logp.reshape(-1, logp.size(-1)), batch["target_out"].reshape(-1)
        nll = F.nll_loss(logp, tgt, ignore_index=self.pad_id, reduction=reduction)
        if label_smoothing:
            nll = (1.0 - label_smoothing) * nll + label_smoothing * _uniform_nll(logp, tgt != self.pad_id, reduction)
        return (nll, attention) if return_attention else nll

    # --------------------------------------------------------------------------------------------------------------
    def _banned(self, logp: Tensor, ban_unk: bool) -> Tensor:
        logp[:, self.pad_id] = float("-inf")
        logp[:, self.bos_id] = float("-inf")
        if ban_unk:
            logp[:, self.unk_id] = float("-inf")
        return logp

    @torch.no_grad()
    def greedy(
        self,
        batch: Dict[str, Tensor],
        *,
        max_len: int,
        no_repeat_ngram: int,
        coverage_reward: float,
        ban_unk: bool = True,
    ) -> List[List[int]]:
        """Greedy decoding; returns output ids per example (ending with ``</s>`` unless ``max_len`` was hit).
        ``no_repeat_ngram``, ``coverage_reward``: as in :meth:`beam_search` (each step takes the highest
        log-probability plus the reward). The decoding settings have no defaults here: theirs live in
        :class:`~graph_rma.tasks.generator_config.GeneratorConfig` (its ``DECODING_FIELDS``)."""
        _check_no_repeat(no_repeat_ngram)
        _check_reward(coverage_reward)
        memory = self.encode(batch)
        state = self.init_state(memory)
        B = state[0].size(0)
        token = torch.full((B,), self.bos_id, dtype=torch.long, device=state[0].device)
        done = torch.zeros(B, dtype=torch.bool, device=token.device)
        copied = torch.zeros(B, memory["entity_mask"].size(1), dtype=torch.bool, device=token.device)
        seqs: List[Tensor] = []
        for _ in range(max_len):
            state, o = self.step(state, self.input_ids(token, memory), memory)
            logp = self._banned(self.log_probs(o, memory), ban_unk)
            if no_repeat_ngram and seqs:
                _ban(logp, torch.stack(seqs, 1).tolist(), no_repeat_ngram)
            if coverage_reward:
                _reward_uncopied(logp, copied, coverage_reward)
            token = logp.argmax(-1).masked_fill(done, self.pad_id)
            _mark_copied(copied, token, self.vocab_size)
            seqs.append(token)
            done = done | (token == self.eos_id)
            if bool(done.all()):
                break
        out = torch.stack(seqs, 1).tolist()
        return [_strip(s, self.eos_id, self.pad_id) for s in out]

    @torch.no_grad()
    def beam_search(
        self,
        batch: Dict[str, Tensor],
        *,
        beam: int,
        max_len: int,
        length_penalty: float,
        no_repeat_ngram: int,
        coverage_reward: float,
        ban_unk: bool = True,
    ) -> List[List[int]]:
        r"""Batched beam search. Hypotheses are ranked during search by total log-probability plus the coverage
        reward, :math:`\log p(y) + \beta\, c(y)`, where :math:`c(y)` is the number of distinct input entities
        :math:`y` copies and :math:`\beta` is ``coverage_reward`` (``0``: log-probability alone); finished
        ones stay in the beam (extended by padding at no cost). The best of the final beam is chosen by
        :math:`\log p(y) / \mathrm{lp}(|y|) + \beta\, c(y)` with GNMT's
        :math:`\mathrm{lp}(n) = ((5 + n) / 6)^{\texttt{length\_penalty}}` (``0`` = raw log-probability), the
        reward standing where GNMT's coverage penalty stands: it favours outputs that name more of their input, which
        the log-probability alone does not. ``beam=1`` is greedy decoding. ``no_repeat_ngram`` ``n > 0``: no
        hypothesis contains the same ``n`` output ids twice (a copied entity is one id; transformers'
        ``no_repeat_ngram_size``, OpenNMT's ``block_ngram_repeat``); ``0`` blocks nothing. The decoding settings
        (the names of :class:`~graph_rma.tasks.generator_config.GeneratorConfig`'s ``DECODING_FIELDS``) have no
        defaults here: theirs live in the configuration."""
        _check_no_repeat(no_repeat_ngram)
        _check_reward(coverage_reward)
        if beam < 1:
            raise GraphRMAError(f"beam: expected >= 1, got {beam}")
        if max_len < 1:
            raise GraphRMAError(f"max_len: expected >= 1, got {max_len}")
        K = beam
        memory = self.encode(batch)
        B = memory["global"].size(0)
        rep = torch.arange(B, device=memory["global"].device).repeat_interleave(K)
        memory = {
            k: (tuple(t[rep] for t in v) if isinstance(v, tuple) else v[rep])
            for k, v in memory.items()
            if k != "attention"
        }
        state = self.init_state(memory)
        dev = state[0].device
        scores = torch.zeros(B, K, device=dev)
        scores[:, 1:] = float("-inf")
        token = torch.full((B * K,), self.bos_id, dtype=torch.long, device=dev)
        done = torch.zeros(B * K, dtype=torch.bool, device=dev)
        lengths = torch.zeros(B * K, dtype=torch.long, device=dev)
        seqs = torch.zeros(B * K, 0, dtype=torch.long, device=dev)
        copied = torch.zeros(B * K, memory["entity_mask"].size(1), dtype=torch.bool, device=dev)
        base = (torch.arange(B, device=dev) * K).unsqueeze(1)
        for _ in range(max_len):
            state, o = self.step(state, self.input_ids(token, memory), memory)
            logp = self._banned(self.log_probs(o, memory), ban_unk)
            if no_repeat_ngram and seqs.size(1):
                _ban(logp, seqs.tolist(), no_repeat_ngram)
            if coverage_reward:
                _reward_uncopied(logp, copied, coverage_reward)
            W = logp.size(-1)
            logp[done] = float("-inf")
            logp[done, self.pad_id] = 0.0
            total = (scores.view(-1, 1) + logp).view(B, K * W)
            scores, idx = total.topk(K, dim=1)
            src = (base + idx // W).view(-1)
            token = (idx % W).view(-1)
            state = tuple(s[src] for s in state)
            copied = copied[src]
            _mark_copied(copied, token, self.vocab_size)
            prev_done = done[src]
            lengths = lengths[src] + (~prev_done).long()
            done = prev_done | (token == self.eos_id)
            seqs = torch.cat([seqs[src], token.unsqueeze(1)], dim=1)
            if bool(done.all()):
                break
        lp = ((5.0 + lengths.float()) / 6.0).pow(length_penalty).view(B, K)
        reward = coverage_reward * copied.sum(1).view(B, K).to(scores.dtype)
        best = ((scores - reward) / lp + reward).argmax(dim=1)
        chosen = seqs.view(B, K, -1)[torch.arange(B, device=dev), best].tolist()
        return [_strip(s, self.eos_id, self.pad_id) for s in chosen]


def _uniform_nll(logp: Tensor, keep: Tensor, reduction: str) -> Tensor:
    """Each kept row's mean of ``-logp`` over its finite entries (the outputs it can produce), then their mean or
    sum."""
    real = torch.isfinite(logp)
    per_token = -logp.masked_fill(~real, 0.0).sum(-1) / real.sum(-1)
    kept = per_token[keep]
    return kept.mean() if reduction == "mean" else kept.sum()


def repeated_ngram_bans(seq: Sequence[int], n: int) -> List[int]:
    """The ids that would complete an ``n``-gram already in ``seq`` (after its last ``n - 1`` ids); with ``n = 1``,
    every id in ``seq``. Sorted, without duplicates."""
    if len(seq) < n - 1:
        return []
    prefix = tuple(seq[len(seq) - n + 1 :]) if n > 1 else ()
    return sorted({seq[i + n - 1] for i in range(len(seq) - n + 1) if tuple(seq[i : i + n - 1]) == prefix})


def _ban(logp: Tensor, seqs: List[List[int]], n: int) -> None:
    """In place: ``-inf`` for each row's :func:`repeated_ngram_bans` (rows of ``logp`` are the sequences)."""
    for row, seq in enumerate(seqs):
        banned = repeated_ngram_bans(seq, n)
        if banned:
            logp[row, banned] = float("-inf")


def _reward_uncopied(logp: Tensor, copied: Tensor, reward: float) -> None:
    """In place: ``reward`` added to each row's copy ids (the last ``copied.size(1)`` columns of ``logp``) of the
    entities the row has not copied yet (``copied``: ``[rows, Emax]``, bool); padded slots stay ``-inf``."""
    logp[:, logp.size(1) - copied.size(1) :] += reward * (~copied).to(logp.dtype)


def _mark_copied(copied: Tensor, token: Tensor, vocab_size: int) -> None:
    """In place: each row's entity copied by ``token`` (a copy id ``vocab_size + i``: entity ``i``) marked."""
    rows = (token >= vocab_size).nonzero().squeeze(1)
    copied[rows, token[rows] - vocab_size] = True


def _check_reward(reward: float) -> None:
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not (0 <= reward < float("inf")):
        raise GraphRMAError(f"coverage_reward: expected a finite number >= 0 (0: off), got {reward!r}")


def _check_no_repeat(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise GraphRMAError(f"no_repeat_ngram: expected an integer >= 0 (0: off), got {n!r}")


def _strip(seq: List[int], eos: int, pad: int) -> List[int]:
    out = []
    for t in seq:
        if t == pad:
            break
        out.append(t)
        if t == eos:
            break
    return out
