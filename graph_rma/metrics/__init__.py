"""Evaluation metrics. :func:`evaluate_generation` scores generated text (BLEU, METEOR, ROUGE, coverage, repetition)."""
from .generation import (
    Meteor15,
    clauses,
    entity_coverage,
    evaluate_generation,
    java_available,
    meteor_nltk,
    repetition,
    tokenize,
)

__all__ = [
    "Meteor15",
    "clauses",
    "entity_coverage",
    "evaluate_generation",
    "java_available",
    "meteor_nltk",
    "repetition",
    "tokenize",
]
