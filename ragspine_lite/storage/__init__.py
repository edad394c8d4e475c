"""Structured storage beside the chunk store: the fact store (``storage.fact_store``)."""

from ragspine_lite.storage.fact_store import Fact, FactStore, SqliteFactStore, make_fact_store

__all__ = ["Fact", "FactStore", "SqliteFactStore", "make_fact_store"]
