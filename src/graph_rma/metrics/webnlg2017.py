r"""The WebNLG 2017 challenge's automatic scores (Gardent et al., INLG 2017), recomputed with well-kept libraries.

The organisers scored every submission with the scripts of ``webnlg-automatic-evaluation`` (``evaluation.py``,
``bleu_eval_3ref.sh``, ``meteor_eval.sh``, ``ter_eval.sh``):

* text: lower-cased, transliterated to ASCII with ``unidecode`` and split at every non-word character
  (``' '.join(re.split('(\W)', text))``, runs of spaces collapsed): ``"Alan Bean's (born 1932)"`` becomes
  ``"alan bean ' s ( born 1932 )"``. References are split first and transliterated after, submissions the other way
  round; :func:`tokenize_webnlg2017` does each as they did.
* references: the **first three** of each entry (in the order of the XML's ``<lex>`` elements);
* BLEU: Moses ``multi-bleu.perl -lc`` with three reference files, an entry with fewer references having an empty
  line in the missing files, which ``multi-bleu.perl`` reads as a reference of length 0 (it can only matter for the
  brevity penalty's closest reference length);
* METEOR 1.5: ``-l en -norm -r 3``;
* TER: ``tercom 7.25`` with the (up to three) references of each entry.

:func:`score_webnlg2017` reproduces this on the same tokens: BLEU is ``sacrebleu.metrics.BLEU(tokenize="none",
lowercase=True, smooth_method="none")`` (``multi-bleu.perl``'s definition: corpus n-gram precisions clipped by the
maximum count over the references, brevity penalty against the closest reference length, shorter on a tie, no
smoothing) with the missing references given as ``""`` (sacrebleu keeps an empty reference as a zero-length one,
as ``multi-bleu.perl`` does); TER is ``sacrebleu.metrics.TER()`` (a reimplementation of tercom) with the missing
references given as ``None`` (left out); METEOR is the METEOR 1.5 jar of ``pycocoevalcap`` started with ``-norm``
(:class:`~graph_rma.metrics.generation.Meteor15`), whose corpus score from the per-entry statistics is the jar's
system score. The scores are on a 0-100 scale (the challenge printed METEOR and TER as fractions of 1).

Scored this way, the challenge's submissions get the organisers' own BLEU and METEOR on seen, unseen and all test
entries, and their TER on all entries (docs/webnlg.md says how this was checked). Needs the ``text-metrics`` extra
(sacrebleu, Unidecode, pycocoevalcap).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .._errors import GraphRMAError
from ..engine.optional import require
from .generation import METEOR_CHOICES, Meteor15, _check_inputs, java_available

#: References per entry the challenge scored against (the first ones of the entry).
MAX_REFERENCES = 3
#: Most tokens of a line (hypothesis or reference) TER scores: more than three times WebNLG 2017's longest reference
#: (82 tokens). TER's shift search grows much faster than the length: a 300-token pair of random words took 21 s on
#: a loaded 2-core machine, a 1,000-token one 84 s, and 20,000 tokens ran out of memory.
MAX_TER_TOKENS = 300
_NON_WORD = re.compile(r"(\W)")


def require_webnlg2017() -> None:
    """Raise :class:`~graph_rma.engine.optional.MissingExtraError` (one line naming the extra) unless sacrebleu and
    Unidecode are installed: call it before work whose purpose is this score (decoding a test set)."""
    require("sacrebleu.metrics", "text-metrics", "the webnlg2017 scorer")
    require("unidecode", "text-metrics", "the webnlg2017 scorer")


def _unidecode(text: str) -> str:
    return require("unidecode", "text-metrics", "the webnlg2017 scorer").unidecode(text)


def tokenize_webnlg2017(text: str, reference: bool = False) -> str:
    """``text`` tokenised and lower-cased as the WebNLG 2017 organisers did (see the module docstring): a
    submission is lower-cased and transliterated, then split at non-word characters; a reference (``reference=True``)
    is split first, then lower-cased and transliterated."""
    if not isinstance(text, str):
        raise GraphRMAError(f"text: expected a str, got {type(text).__name__}")
    if reference:
        return _unidecode(" ".join(" ".join(_NON_WORD.split(text)).split()).lower())
    return " ".join(" ".join(_NON_WORD.split(_unidecode(text.lower()))).split())


def _check_ter_lengths(hyp_tok: Sequence[str], ref_tok: Sequence[Sequence[str]]) -> None:
    """Refuse a line TER cannot score in reasonable time and memory (see :data:`MAX_TER_TOKENS`)."""
    for i, (h, rs) in enumerate(zip(hyp_tok, ref_tok)):
        for what, text in [("hypothesis", h)] + [(f"reference {j + 1}", r) for j, r in enumerate(rs)]:
            n = len(text.split())
            if n > MAX_TER_TOKENS:
                raise GraphRMAError(
                    f"entry {i + 1}: its {what} has {n} tokens; TER's shift search grows much faster than the length "
                    f"(minutes and gigabytes on thousands of tokens), so the webnlg2017 scorer takes at most "
                    f"{MAX_TER_TOKENS} per line (WebNLG's longest reference has 82): shorten the line, or leave TER "
                    f"out (ter=False)"
                )


def score_webnlg2017(
    hypotheses: Sequence[str],
    references: Sequence[Union[str, Sequence[str]]],
    meteor: Union[str, Meteor15] = "auto",
    max_references: int = MAX_REFERENCES,
    ter: bool = True,
) -> Dict[str, object]:
    """Corpus BLEU, METEOR 1.5 and TER of ``hypotheses`` as the WebNLG 2017 challenge computed them (0-100).

    Args:
        hypotheses: one generated text per entry (raw or tokenised: it is tokenised again, as a submission was).
        references: per entry one reference or a list of them (raw text, as in the XML); entries may have different
            numbers of references; only the first ``max_references`` are used.
        meteor: ``"auto"`` / ``"meteor-1.5"`` (the jar with ``-norm``; ``"auto"`` skips METEOR when Java is missing,
            with ``METEOR`` ``None``), ``"none"``, or an open :class:`~graph_rma.metrics.generation.Meteor15` started
            with ``norm=True``. ``"nltk"`` is refused: the challenge's METEOR is METEOR 1.5.
        max_references: references per entry (the challenge's three).
        ter: compute TER (``False``: ``TER`` is ``None``; TER's shift search takes far longer than BLEU on a whole
            split, so a caller that reads BLEU alone can skip it). With TER, a hypothesis or reference of more than
            :data:`MAX_TER_TOKENS` tokens is refused (a ``GraphRMAError`` naming the entry).

    Returns:
        A dict with the keys ``scorer`` (``"webnlg2017"``), ``BLEU``, ``BLEU_precisions`` (1- to 4-gram, %),
        ``BLEU_bp``, ``BLEU_ratio``, ``hyp_len``, ``ref_len``, ``METEOR``, ``METEOR_impl``, ``TER``, ``n``,
        ``max_references`` and ``signature`` (sacrebleu's signatures of the BLEU and TER settings; BLEU's alone
        without TER).
    """
    hyps, refs, _ = _check_inputs(hypotheses, references, None)
    _check_settings(meteor, max_references)
    require_webnlg2017()
    metrics = require("sacrebleu.metrics", "text-metrics", "the webnlg2017 scorer")

    hyp_tok = [tokenize_webnlg2017(h) for h in hyps]
    ref_tok = [[tokenize_webnlg2017(r, reference=True) for r in rs[:max_references]] for rs in refs]
    # sacrebleu takes one stream per reference position: a missing reference is "" for BLEU (a zero-length
    # reference, as multi-bleu.perl reads the blank line of a reference file) and None for TER (left out, as tercom)
    bleu_streams: List[List[str]] = [[rs[j] if j < len(rs) else "" for rs in ref_tok] for j in range(max_references)]
    ter_streams: List[List[Optional[str]]] = [
        [rs[j] if j < len(rs) else None for rs in ref_tok] for j in range(max_references)
    ]
    if ter:
        _check_ter_lengths(hyp_tok, ref_tok)
    bleu_metric = metrics.BLEU(tokenize="none", lowercase=True, smooth_method="none", force=True)
    bleu = bleu_metric.corpus_score(hyp_tok, bleu_streams)
    ter_metric = metrics.TER() if ter else None
    ter_score = ter_metric.corpus_score(hyp_tok, ter_streams) if ter_metric else None
    out: Dict[str, object] = {
        "scorer": "webnlg2017",
        "BLEU": float(bleu.score),
        "BLEU_precisions": [float(p) for p in bleu.precisions],
        "BLEU_bp": float(bleu.bp),
        "BLEU_ratio": float(bleu.ratio),
        "hyp_len": int(bleu.sys_len),
        "ref_len": int(bleu.ref_len),
    }

    out["METEOR"], out["METEOR_impl"] = _meteor_norm(meteor, hyp_tok, ref_tok)
    out["TER"] = float(ter_score.score) if ter_score else None
    out["n"] = len(hyps)
    out["max_references"] = max_references
    signature = {"BLEU": str(bleu_metric.get_signature())}
    if ter_metric:
        signature["TER"] = str(ter_metric.get_signature())
    out["signature"] = signature
    return out


def _check_settings(meteor: Union[str, Meteor15], max_references: int) -> None:
    """:func:`score_webnlg2017`'s ``meteor`` (METEOR 1.5 with ``-norm`` only) and ``max_references``, checked."""
    if not isinstance(max_references, int) or isinstance(max_references, bool) or max_references < 1:
        raise GraphRMAError(f"max_references: expected a positive integer, got {max_references!r}")
    if isinstance(meteor, Meteor15):
        if not meteor.norm:
            raise GraphRMAError(
                "meteor: the webnlg2017 scorer needs METEOR 1.5 started with -norm (Meteor15(norm=True))"
            )
    elif meteor not in METEOR_CHOICES or meteor == "nltk":
        raise GraphRMAError(f"meteor: expected 'auto', 'meteor-1.5', 'none' or a Meteor15 instance, got {meteor!r}")


def _meteor_norm(
    meteor: Union[str, Meteor15], hyp_tok: List[str], ref_tok: List[List[str]]
) -> Tuple[Optional[float], Optional[str]]:
    """``(METEOR, METEOR_impl)``: METEOR 1.5 with ``-norm`` (an open scorer or one started here), or ``(None,
    None)`` for ``"none"`` and for ``"auto"`` without Java."""
    impl = meteor.impl if isinstance(meteor, Meteor15) else meteor
    if impl == "auto":
        impl = "meteor-1.5" if java_available() else "none"
    if impl != "meteor-1.5":
        return None, None
    if isinstance(meteor, Meteor15):
        m, _ = meteor.score(hyp_tok, ref_tok)
    else:
        with Meteor15(norm=True) as scorer:
            m, _ = scorer.score(hyp_tok, ref_tok)
    return 100.0 * m, "meteor-1.5 -norm"


__all__ = ["MAX_REFERENCES", "MAX_TER_TOKENS", "require_webnlg2017", "score_webnlg2017", "tokenize_webnlg2017"]
