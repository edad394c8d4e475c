"""The search pipeline: index text → query variants → channels → fusion → post-retrieval.

:mod:`~ragspine_lite.pipeline.stages` holds one function per stage,
:mod:`~ragspine_lite.pipeline.fusion` the fusion rules.
"""
