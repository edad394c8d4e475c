"""ragspine_lite: citation-honest hybrid retrieval in pure Python (CPython and Pyodide).

The handful of entry points a newcomer needs; everything else lives in the pipeline
subpackages (``chunking`` → ``lexical`` / ``vector`` → ``rerank`` → ``link``).

>>> from ragspine_lite import tokenize
>>> tokenize("ACME香港")
['acme', '香', '港', '香港']
"""

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.chunking.chunking import Chunk, DocumentMeta, chunk_document
from ragspine_lite.common.sensitivity import RESTRICTED
from ragspine_lite.filtering.metadata_filter import make_filter
from ragspine_lite.link.narrative_link import NarrativeIndexRetriever, build_narrative_retriever
from ragspine_lite.pipeline.retrievers import HybridRetriever, NarrativeIndex, RetrievalResult
from ragspine_lite.text.words import tokenize
from ragspine_lite.vector.embedding_backends import make_embedding_backend

__version__ = "0.1.0"

__all__ = [
    "RESTRICTED",
    "Chunk",
    "ChunkStore",
    "DocumentMeta",
    "HybridRetriever",
    "NarrativeIndex",
    "NarrativeIndexRetriever",
    "RetrievalResult",
    "__version__",
    "build_narrative_retriever",
    "chunk_document",
    "make_embedding_backend",
    "make_filter",
    "tokenize",
]
