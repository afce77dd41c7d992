"""onnxcustom's module name for the penalties (the seed API), now
:mod:`skl_ortgrad.optim.penalties`; pickles of release 0.1.0 name their classes here."""

from skl_ortgrad.optim import BaseLearningPenalty, ElasticLearningPenalty, NoLearningPenalty

__all__ = ["BaseLearningPenalty", "ElasticLearningPenalty", "NoLearningPenalty"]
