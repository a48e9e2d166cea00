r"""Text-generation metrics, computed the way the graph-to-text anchors computed them.

:func:`evaluate_generation` scores hypotheses against one or several references each and returns, on a 0-100
scale:

* ``BLEU-1`` .. ``BLEU-4``: corpus BLEU of coco-caption (``pycocoevalcap.bleu``; clipped n-gram precisions summed
  over the corpus, brevity penalty against the *closest* reference length, coco's tiny smoothing constants). This is
  the scorer GraphWriter (Koncel-Kedziorski et al., 2019) used.
* ``METEOR``: METEOR 1.5 through the jar shipped in ``pycocoevalcap.meteor`` (``-l en -norm``, the corpus score of
  the jar's ``EVAL`` command, i.e. coco-caption's number), or, as a fallback when Java is missing, the mean over
  hypotheses of ``nltk.translate.meteor_score.meteor_score`` (max over references; WordNet synonyms from
  ``$GRAPH_RMA_DATA/nltk_data``). The two are **not comparable** (nltk gives much higher numbers: the table of
  docs/metrics.md scores the same texts with both), so the result always carries ``METEOR_impl`` =
  ``"meteor-1.5"`` or ``"nltk"``. Published comparisons use METEOR 1.5 only.
* ``ROUGE-1``, ``ROUGE-2``, ``ROUGE-L``: ``rouge-score`` F-measures (``RougeScorer(use_stemmer=False)``, **no
  stemming**), averaged over hypotheses. With several references a hypothesis gets, per ROUGE type, the best
  F-measure over its references (``RougeScorer.score_multi``). rouge-score's own tokenizer keeps only runs of
  ``[a-z0-9]``, so punctuation tokens do not count in ROUGE.
* ``ROUGE-L_coco``: coco-caption's ROUGE-L (``pycocoevalcap.rouge``: LCS F-measure with beta = 1.2, max over
  references, mean over hypotheses), given for comparison with papers that used coco-caption's scorer.
* ``entity_coverage`` and ``repetition``: see :func:`entity_coverage` and :func:`repetition`.

Text is scored as GraphWriter scored it: **lower-cased and tokenised**. ``tokenize="nltk"`` (default, for raw text
such as WebNLG references) splits with ``nltk.word_tokenize`` (Punkt sentence splitting, then NLTK's Treebank-style
word tokenizer; quotes become ``\`\``/``''``) on the original-case text and then lower-cases each token.
``tokenize="split"`` only lower-cases and splits on whitespace: use it for text that is already tokenised, such as
AGENDA's abstracts, to score exactly GraphWriter's tokens. pycocoevalcap's ``PTBTokenizer`` is *not* used: it spawns
a Java process per call, writes a temporary file into the installed package folder and deletes punctuation tokens,
which GraphWriter's evaluation kept. The same tokens feed every metric.

BLEU, METEOR 1.5 and ROUGE need the ``text-metrics`` extra (``pip install 'graph-rma[text-metrics]'``); without it
:func:`evaluate_generation` raises :class:`~graph_rma.engine.optional.MissingExtraError` saying so, before any work.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import warnings
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .._errors import GraphRMAError
from ..engine.optional import MissingToolError, require

Reference = Union[str, Sequence[str]]

METRIC_KEYS = (
    "BLEU-1",
    "BLEU-2",
    "BLEU-3",
    "BLEU-4",
    "METEOR",
    "ROUGE-1",
    "ROUGE-2",
    "ROUGE-L",
    "ROUGE-L_coco",
    "entity_coverage",
    "repetition",
)
#: Tokens that end a clause for :func:`repetition`.
CLAUSE_DELIMITERS = frozenset({".", "!", "?", ";", ":", ","})
METEOR_CHOICES = ("auto", "meteor-1.5", "nltk", "none")
#: The named scorers: ``coco`` is :func:`evaluate_generation` (coco-caption, GraphWriter's; AGENDA's published
#: numbers use it), ``webnlg2017`` is :func:`graph_rma.metrics.webnlg2017.score_webnlg2017` (the WebNLG 2017
#: challenge's BLEU, METEOR and TER).
SCORERS = ("coco", "webnlg2017")


# --------------------------------------------------------------------------------------------------- NLTK data
def nltk_data_dirs() -> List[str]:
    """Candidate NLTK data folders of this project: ``$GRAPH_RMA_DATA/nltk_data`` (if set and present)."""
    dirs = []
    env = os.environ.get("GRAPH_RMA_DATA")
    if env:
        d = os.path.join(os.path.expanduser(env), "nltk_data")
        if os.path.isdir(d):
            dirs.append(d)
    return dirs


def _setup_nltk_path() -> None:
    import nltk

    for d in reversed(nltk_data_dirs()):
        if d not in nltk.data.path:
            nltk.data.path.insert(0, d)


_FOUND_RESOURCES: set = set()


def _require_nltk_resource(names: Sequence[str], what: str) -> None:
    import nltk

    key = (tuple(names), tuple(nltk.data.path), os.environ.get("GRAPH_RMA_DATA"))
    if key in _FOUND_RESOURCES:
        return
    _setup_nltk_path()
    for name in names:
        try:
            nltk.data.find(name)
            _FOUND_RESOURCES.add(key)
            return
        except LookupError:
            continue
    raise LookupError(
        f"{what} needs the NLTK resource {names[0]!r}, which was not found in {list(nltk.data.path)}. "
        f"Set GRAPH_RMA_DATA to a folder containing nltk_data/ (e.g. /work/shared/data) or NLTK_DATA to an "
        f"nltk_data folder that holds it."
    )


# --------------------------------------------------------------------------------------------------- tokenising
def tokenize(text: str, mode: str = "nltk") -> List[str]:
    """Lower-cased tokens of ``text``: ``mode="nltk"`` (``nltk.word_tokenize``) or ``"split"`` (whitespace)."""
    if not isinstance(text, str):
        raise GraphRMAError(f"text: expected a str, got {type(text).__name__}")
    if mode == "split":
        return text.lower().split()
    if mode == "nltk":
        from nltk.tokenize import word_tokenize

        _require_nltk_resource(["tokenizers/punkt_tab/english/", "tokenizers/punkt_tab.zip"], "tokenize='nltk'")
        return [t.lower() for t in word_tokenize(" ".join(text.split()))]
    raise GraphRMAError(f"tokenize: expected 'nltk' or 'split', got {mode!r}")


_tokenize_text = tokenize  # evaluate_generation's argument of the same name shadows it


# --------------------------------------------------------------------------------------------------- METEOR 1.5
def java_available() -> bool:
    """Whether a ``java`` executable is on ``PATH`` (needed by METEOR 1.5)."""
    return shutil.which("java") is not None


class Meteor15:
    r"""METEOR 1.5 through pycocoevalcap's wrapper and jar, with a clean shutdown.

    ``pycocoevalcap.meteor.Meteor`` starts ``java -jar -Xmx2G meteor-1.5.jar - - -stdio -l en -norm`` and talks to
    it over pipes. Its own clean-up only happens in ``__del__``, and if a call fails half-way (the JVM died, say) its
    lock stays held, so that ``__del__`` blocks forever. This class owns the process: use it as a context manager
    (or call :meth:`close`); closing sends EOF on stdin, which makes the jar exit (status 0), waits for it (kills it
    after ``timeout`` seconds), and releases the lock so that the library's ``__del__`` cannot hang. Starting the
    JVM loads METEOR's paraphrase table, which takes seconds, so reuse one instance for several calls (pass
    it as ``meteor=`` to :func:`evaluate_generation`).

    ``norm=True`` (default) is coco-caption's and the WebNLG 2017 challenge's ``-norm``: the jar tokenises and
    lower-cases both sides and normalises punctuation before matching. ``norm=False`` starts the same jar without
    it (the command is :attr:`command`).
    """

    impl = "meteor-1.5"

    def __init__(self, timeout: float = 60.0, norm: bool = True):
        if not isinstance(norm, bool):
            raise GraphRMAError(f"norm: expected True or False, got {norm!r}")
        if not java_available():
            raise MissingToolError(
                "METEOR 1.5 needs Java ('java' is not on PATH). Install a JRE (e.g. apt-get install "
                "default-jre-headless; `make env` tries this) or use meteor='nltk' (numbers not comparable)."
            )
        module = require("pycocoevalcap.meteor.meteor", "text-metrics", "METEOR 1.5")

        self.timeout = float(timeout)
        self.norm = norm
        if norm:
            self._scorer = module.Meteor()  # pycocoevalcap's own command: ... -stdio -l en -norm
        else:  # the same jar, wrapper and protocol, started without -norm
            import threading

            scorer = module.Meteor.__new__(module.Meteor)
            scorer.meteor_cmd = ["java", "-jar", "-Xmx2G", module.METEOR_JAR, "-", "-", "-stdio", "-l", "en"]
            scorer.meteor_p = subprocess.Popen(
                scorer.meteor_cmd,
                cwd=os.path.dirname(os.path.abspath(module.__file__)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            scorer.lock = threading.Lock()
            self._scorer = scorer
        self._closed = False
        if ("-norm" in self.command) != norm:  # a pycocoevalcap whose command differs from the one assumed here
            self.close()
            raise RuntimeError(
                f"Meteor15: expected the METEOR command {'with' if norm else 'without'} -norm, got "
                f"{' '.join(self.command)}"
            )

    @property
    def command(self) -> List[str]:
        """The command line of the METEOR 1.5 process."""
        return list(self._scorer.meteor_cmd)

    @property
    def process(self) -> subprocess.Popen:
        return self._scorer.meteor_p

    def score(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> Tuple[float, List[float]]:
        """Corpus METEOR (0-1) and per-hypothesis scores for whitespace-tokenised strings (coco-caption's result)."""
        if self._closed:
            raise RuntimeError("Meteor15: the scorer is closed")
        if len(hypotheses) == 0:
            raise GraphRMAError("hypotheses: expected at least one")
        # One line per request: no newlines, and '|||' is the jar's field separator.
        clean = lambda s: " ".join(s.replace("|||", " ").split())  # noqa: E731
        res = {i: [clean(h)] for i, h in enumerate(hypotheses)}
        gts = {i: [clean(r) for r in refs] for i, refs in enumerate(references)}
        try:
            return self._scorer.compute_score(gts, res)
        except Exception as exc:
            self._release_lock()
            err = self._stderr_tail()
            self.close()
            raise RuntimeError(f"METEOR 1.5 (java) failed: {exc!r}; java stderr: {err or '(empty)'}") from exc

    def _release_lock(self) -> None:
        lock = self._scorer.lock
        if lock.locked():
            lock.release()

    def _stderr_tail(self) -> str:
        p = self.process
        if p.poll() is None:
            return ""
        try:
            return p.stderr.read().decode(errors="replace")[-2000:].strip()
        except Exception:  # pragma: no cover - best effort
            return ""

    def close(self) -> None:
        """Send EOF to the jar, wait for it to exit (kill after ``timeout`` s) and close the pipes."""
        if self._closed:
            return
        self._closed = True
        p = self.process
        self._release_lock()
        try:
            if p.stdin and not p.stdin.closed:
                p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        for f in (p.stdout, p.stderr):
            if f is not None and not f.closed:
                f.close()

    def __enter__(self) -> "Meteor15":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - garbage collection
        try:
            self.close()
        except Exception:
            pass


def meteor_nltk(hypotheses: Sequence[List[str]], references: Sequence[Sequence[List[str]]]) -> float:
    """Mean over hypotheses of ``nltk.translate.meteor_score.meteor_score`` (max over references), 0-1.

    Needs WordNet: ``$GRAPH_RMA_DATA/nltk_data/corpora/wordnet.zip`` (or any folder in ``nltk.data.path``).
    """
    _require_nltk_resource(["corpora/wordnet.zip", "corpora/wordnet"], "METEOR (nltk)")
    from nltk.translate.meteor_score import meteor_score

    scores = [meteor_score(list(refs), list(hyp)) for hyp, refs in zip(hypotheses, references)]
    return sum(scores) / len(scores)


# --------------------------------------------------------------------------------------------------- own metrics
def _contains(tokens: Sequence[str], sub: Sequence[str]) -> bool:
    n = len(sub)
    return n > 0 and any(tuple(tokens[i : i + n]) == tuple(sub) for i in range(len(tokens) - n + 1))


def entity_coverage(hypotheses: Sequence[List[str]], entities: Sequence[Sequence[List[str]]]) -> float:
    r"""Share (0-100) of the input graphs' entities whose text appears in the output.

    ``hypotheses[i]`` is the token list of output i and ``entities[i]`` the token lists of its input entities
    (tokenised like the output). An entity is *covered* when its token sequence occurs contiguously in the output
    tokens (exact match after lower-casing and tokenising: a paraphrased or reformatted mention, e.g. a date written
    differently, does not count). Duplicate entities of one input count once; empty ones are ignored. The result
    is micro-averaged over the corpus:

    .. math:: \mathrm{coverage} = 100 \cdot \frac{\sum_i |\{e \in E_i : e \sqsubseteq y_i\}|}{\sum_i |E_i|}

    Inputs without entities contribute nothing; if no input has any entity the result is ``nan``.
    """
    covered = total = 0
    for hyp, ents in zip(hypotheses, entities):
        uniq = {tuple(e) for e in ents if len(e) > 0}
        total += len(uniq)
        covered += sum(_contains(hyp, e) for e in uniq)
    return 100.0 * covered / total if total else float("nan")


def clauses(tokens: Sequence[str]) -> List[Tuple[str, ...]]:
    """Split a token list into clauses at the tokens in :data:`CLAUSE_DELIMITERS`; empty clauses are dropped."""
    out: List[Tuple[str, ...]] = []
    cur: List[str] = []
    for t in tokens:
        if t in CLAUSE_DELIMITERS:
            if cur:
                out.append(tuple(cur))
            cur = []
        else:
            cur.append(t)
    if cur:
        out.append(tuple(cur))
    return out


def repetition(hypotheses: Sequence[List[str]]) -> float:
    r"""Share (0-100) of clauses that repeat an earlier clause of the same output.

    Each output's tokens (lower-cased, tokenised) are cut into *clauses* at the punctuation tokens
    ``. ! ? ; : ,`` (:func:`clauses`; a whole sentence without commas is one clause). A clause is *repeated* when
    an identical token sequence occurred earlier in the same output. Over the corpus,

    .. math:: \mathrm{repetition} = 100 \cdot \frac{\sum_i \#\{\text{repeated clauses of } y_i\}}
              {\sum_i \#\{\text{clauses of } y_i\}}

    e.g. ``"a b . c , a b ."`` has clauses ``(a b), (c), (a b)``: one repeated out of three, 33.3. Outputs without
    clauses contribute nothing; if there are no clauses at all the result is 0.
    """
    repeated = total = 0
    for hyp in hypotheses:
        seen = set()
        for c in clauses(hyp):
            total += 1
            if c in seen:
                repeated += 1
            seen.add(c)
    return 100.0 * repeated / total if total else 0.0


# --------------------------------------------------------------------------------------------------- main entry
def _check_inputs(hypotheses, references, entities) -> Tuple[List[str], List[List[str]], Optional[List[List[str]]]]:
    if isinstance(hypotheses, str) or not isinstance(hypotheses, Iterable):
        raise GraphRMAError(
            f"hypotheses: expected a sequence of strings (one per example), got {type(hypotheses).__name__}"
        )
    hyps = list(hypotheses)
    if not hyps:
        raise GraphRMAError("hypotheses: expected at least one hypothesis")
    for i, h in enumerate(hyps):
        if not isinstance(h, str):
            raise GraphRMAError(f"hypotheses[{i}]: expected a str, got {type(h).__name__}")
    if isinstance(references, str) or not isinstance(references, Iterable):
        raise GraphRMAError(
            "references: expected a sequence with one reference string or list of strings per "
            f"hypothesis, got {type(references).__name__}"
        )
    refs_in = list(references)
    if len(refs_in) != len(hyps):
        raise GraphRMAError(f"references: expected {len(hyps)} entries (one per hypothesis), got {len(refs_in)}")
    refs: List[List[str]] = []
    for i, r in enumerate(refs_in):
        rs = [r] if isinstance(r, str) else list(r)
        if not rs or not all(isinstance(x, str) for x in rs):
            raise GraphRMAError(f"references[{i}]: expected a str or a non-empty list of str")
        if any(not x.strip() for x in rs):
            raise GraphRMAError(f"references[{i}]: expected non-empty reference texts, got an empty one")
        refs.append(rs)
    ents = None
    if entities is not None:
        ents_in = list(entities)
        if len(ents_in) != len(hyps):
            raise GraphRMAError(f"entities: expected {len(hyps)} entries (one list per hypothesis), got {len(ents_in)}")
        ents = []
        for i, e in enumerate(ents_in):
            if isinstance(e, str) or not all(isinstance(x, str) for x in e):
                raise GraphRMAError(f"entities[{i}]: expected a list of entity strings")
            ents.append(list(e))
    return hyps, refs, ents


def require_text_metrics() -> None:
    """Raise :class:`~graph_rma.engine.optional.MissingExtraError` (one line naming the extra) unless the
    ``text-metrics`` extra is installed: call it before work whose only purpose is a score (decoding a test set)."""
    require("pycocoevalcap.bleu.bleu", "text-metrics", "BLEU")
    require("rouge_score.rouge_scorer", "text-metrics", "ROUGE")


def evaluate_generation(
    hypotheses: Sequence[str],
    references: Sequence[Reference],
    entities: Optional[Sequence[Sequence[str]]] = None,
    meteor: Union[str, Meteor15] = "auto",
    tokenize: Union[str, Callable[[str], List[str]]] = "nltk",
) -> Dict[str, object]:
    """Score generated texts; every metric on a 0-100 scale (see the module docstring for the exact definitions).

    Args:
        hypotheses: one generated text per example.
        references: per example one reference text or a list of them (multi-reference, e.g. WebNLG).
        entities: per example the input graph's entity strings (for ``entity_coverage``), or ``None``.
        meteor: ``"auto"`` (METEOR 1.5 if ``java`` is found, else nltk with a warning), ``"meteor-1.5"``,
            ``"nltk"``, ``"none"`` (skip), or an open :class:`Meteor15` to reuse its JVM.
        tokenize: ``"nltk"`` (raw text), ``"split"`` (already tokenised text) or a callable ``str -> tokens``;
            the result is lower-cased either way.

    Returns:
        A dict with ``BLEU-1`` ... ``BLEU-4``, ``METEOR``, ``METEOR_impl`` (``"meteor-1.5"``, ``"nltk"`` or
        ``None``), ``ROUGE-1``, ``ROUGE-2``, ``ROUGE-L``, ``ROUGE-L_coco``, ``entity_coverage`` (``None`` without
        entities), ``repetition`` and ``n`` (the number of hypotheses).
    """
    hyps, refs, ents = _check_inputs(hypotheses, references, entities)
    require_text_metrics()
    Bleu = require("pycocoevalcap.bleu.bleu", "text-metrics", "BLEU").Bleu
    tok = _tokenizer(tokenize)
    if not (isinstance(meteor, Meteor15) or meteor in METEOR_CHOICES):
        raise GraphRMAError(f"meteor: expected one of {METEOR_CHOICES} or a Meteor15 instance, got {meteor!r}")

    hyp_tok = [tok(h) for h in hyps]
    ref_tok = [[tok(r) for r in rs] for rs in refs]
    hyp_str = [" ".join(t) for t in hyp_tok]
    ref_str = [[" ".join(t) for t in rs] for rs in ref_tok]

    res = {i: [h] for i, h in enumerate(hyp_str)}
    gts = {i: rs for i, rs in enumerate(ref_str)}
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    out: Dict[str, object] = {f"BLEU-{n + 1}": 100.0 * b for n, b in enumerate(bleu)}
    out["METEOR"], out["METEOR_impl"] = _meteor(meteor, hyp_tok, ref_tok, hyp_str, ref_str)
    out.update(_rouge(hyp_str, ref_str, gts, res))
    if ents is not None:
        cov = entity_coverage(hyp_tok, [[tok(e) for e in es] for es in ents])
        out["entity_coverage"] = None if math.isnan(cov) else cov
    else:
        out["entity_coverage"] = None
    out["repetition"] = repetition(hyp_tok)
    out["n"] = len(hyps)
    return out


def _tokenizer(tokenize: Union[str, Callable[[str], List[str]]]) -> Callable[[str], List[str]]:
    """``tokenize`` (``"nltk"``, ``"split"`` or a callable) as a function ``str -> lower-cased tokens``."""
    if callable(tokenize):
        return lambda s: [t.lower() for t in tokenize(s)]
    if tokenize in ("nltk", "split"):
        mode = tokenize
        return lambda s: _tokenize_text(s, mode)
    raise GraphRMAError(f"tokenize: expected 'nltk', 'split' or a callable, got {tokenize!r}")


def _meteor(
    meteor: Union[str, Meteor15],
    hyp_tok: List[List[str]],
    ref_tok: List[List[List[str]]],
    hyp_str: List[str],
    ref_str: List[List[str]],
) -> Tuple[Optional[float], Optional[str]]:
    """``(METEOR, METEOR_impl)``: METEOR 1.5 (an open :class:`Meteor15`, or one started here), nltk's, or none;
    ``"auto"`` is METEOR 1.5 when Java is found, else nltk with a warning."""
    impl = meteor.impl if isinstance(meteor, Meteor15) else meteor
    if impl == "auto":
        impl = "meteor-1.5" if java_available() else "nltk"
        if impl == "nltk":
            warnings.warn(
                "java not found: METEOR falls back to nltk's meteor_score, whose numbers are NOT "
                "comparable with METEOR 1.5 (METEOR_impl='nltk')",
                RuntimeWarning,
                stacklevel=3,
            )
    if impl == "meteor-1.5":
        if isinstance(meteor, Meteor15):
            m, _ = meteor.score(hyp_str, ref_str)
        else:
            with Meteor15() as scorer:
                m, _ = scorer.score(hyp_str, ref_str)
        return 100.0 * m, "meteor-1.5"
    if impl == "nltk":
        return 100.0 * meteor_nltk(hyp_tok, ref_tok), "nltk"
    return None, None


def _rouge(hyp_str: List[str], ref_str: List[List[str]], gts: Dict, res: Dict) -> Dict[str, float]:
    """ROUGE-1/2/L (rouge-score, no stemming, the best F over the references, the mean over hypotheses) and
    coco-caption's ROUGE-L."""
    Rouge = require("pycocoevalcap.rouge.rouge", "text-metrics", "ROUGE-L_coco").Rouge
    RougeScorer = require("rouge_score.rouge_scorer", "text-metrics", "ROUGE").RougeScorer
    scorer = RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    sums = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    for h, rs in zip(hyp_str, ref_str):
        s = scorer.score_multi(rs, h)
        for k in sums:
            sums[k] += s[k].fmeasure
    n = len(hyp_str)
    rl_coco, _ = Rouge().compute_score(gts, res)
    return {
        "ROUGE-1": 100.0 * sums["rouge1"] / n,
        "ROUGE-2": 100.0 * sums["rouge2"] / n,
        "ROUGE-L": 100.0 * sums["rougeL"] / n,
        "ROUGE-L_coco": 100.0 * float(rl_coco),
    }
