"""Which chunks may have their vectors persisted (RESTRICTED ones not, by default)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.registry import Registry
from ragspine_lite.common.sensitivity import is_restricted, sends_text_off_host

__all__ = [
    "PERSISTENCE_POLICY_ENV",
    "IsolationFirstPolicy",
    "PersistEverythingPolicy",
    "PersistencePolicy",
    "make_persistence_policy",
    "withheld_from_vectors",
]

PERSISTENCE_POLICY_ENV = "RAGSPINE_PERSISTENCE_POLICY"


@runtime_checkable
class PersistencePolicy(Protocol):
    """Decides per chunk (anything with ``.sensitivity``) whether it may be persisted."""

    def persistable(self, chunk: Any) -> bool: ...


@dataclass(frozen=True)
class IsolationFirstPolicy:
    """The default: a chunk is not persistable iff :func:`is_restricted` (the exits' predicate,
    so ``"  restricted "`` and ``"RESTRICTED\\u200b"`` are held back too)."""

    def persistable(self, chunk: Any) -> bool:
        return not is_restricted(chunk.sensitivity)


@dataclass(frozen=True)
class PersistEverythingPolicy:
    """Every chunk is persistable (opt-in; RESTRICTED vectors then reach the store)."""

    def persistable(self, chunk: Any) -> bool:
        return True


def withheld_from_vectors(chunk: Any, backend: Any = None, store: Any = None) -> bool:
    """True when ``chunk`` gets no vector whatever the policy: it is RESTRICTED (or has no
    readable label: fails closed) and ``backend`` sends text off host (the network exit) or
    ``store`` is an external one (``store.external_store``: sqlite-vec, pgvector, Qdrant)."""
    if not (sends_text_off_host(backend) or getattr(store, "external_store", False)):
        return False
    try:
        return is_restricted(chunk.sensitivity)
    except Exception:
        return True


POLICIES = Registry(
    "persistence_policies", env=PERSISTENCE_POLICY_ENV, default="default", off=(),
    label="persistence policy", spaces=False,
)
POLICIES.register("default", IsolationFirstPolicy, "isolation_first")
POLICIES.register("persist_everything", PersistEverythingPolicy, "all")


def make_persistence_policy(spec: str | None = None) -> PersistencePolicy:
    """Policy for ``spec`` (env ``RAGSPINE_PERSISTENCE_POLICY`` if ``None``; default ``default``).

    ``default``/``isolation_first``/``isolation-first`` → :class:`IsolationFirstPolicy`;
    ``persist_everything``/``persist-everything``/``all`` → :class:`PersistEverythingPolicy`.
    """
    policy: PersistencePolicy = POLICIES.build(spec)
    return policy
