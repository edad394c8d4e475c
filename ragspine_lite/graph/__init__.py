"""The graph domain: a deterministic, cited relation graph beside retrieval.

``store`` (values, the ``GraphStore`` seam, ``make_graph_store``), ``relation``
(``build_relation_graph``), ``query`` (``GraphQuery``: roll-up, peer comparison, trace),
``extractor`` (the relation-extractor slot) and ``narrative`` (the opt-in GraphRAG skeleton).
"""

from ragspine_lite.graph.extractor import (
    DeterministicRelationExtractor,
    LLMRelationExtractor,
    RelationExtractor,
    make_relation_extractor,
)
from ragspine_lite.graph.narrative import NarrativeGraphPipeline, make_narrative_graph
from ragspine_lite.graph.query import GraphQuery
from ragspine_lite.graph.relation import build_relation_graph
from ragspine_lite.graph.store import (
    GraphEdge,
    GraphNode,
    GraphStore,
    InProcessGraphStore,
    Subgraph,
    make_graph_store,
)

__all__ = [
    "DeterministicRelationExtractor",
    "GraphEdge",
    "GraphNode",
    "GraphQuery",
    "GraphStore",
    "InProcessGraphStore",
    "LLMRelationExtractor",
    "NarrativeGraphPipeline",
    "RelationExtractor",
    "Subgraph",
    "build_relation_graph",
    "make_graph_store",
    "make_narrative_graph",
    "make_relation_extractor",
]
