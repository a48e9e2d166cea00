"""Evaluation metrics. :func:`evaluate_generation` scores generated text (BLEU, METEOR, ROUGE, coverage, repetition)
the way coco-caption did; :func:`score_webnlg2017` scores it the way the WebNLG 2017 challenge did (BLEU, METEOR, TER);
:data:`SCORERS` names the two."""

from .generation import (
    SCORERS,
    Meteor15,
    clauses,
    entity_coverage,
    evaluate_generation,
    java_available,
    meteor_nltk,
    repetition,
    tokenize,
)
from .webnlg2017 import score_webnlg2017, tokenize_webnlg2017

__all__ = [
    "SCORERS",
    "Meteor15",
    "clauses",
    "entity_coverage",
    "evaluate_generation",
    "java_available",
    "meteor_nltk",
    "repetition",
    "score_webnlg2017",
    "tokenize",
    "tokenize_webnlg2017",
]
