"""Structured facts (one metric value per dimension key) and the SQLite fact store.

Only what the graph's roll-up and peer comparison need: :class:`Fact`, the
:class:`FactStore` Protocol (``upsert_facts`` / ``query``) and :class:`SqliteFactStore`,
behind ``make_fact_store`` (``RAGSPINE_FACT_STORE``, default ``sqlite``).

>>> store = SqliteFactStore(":memory:"); store.init_schema()
>>> store.upsert_facts([Fact("REVENUE", "ACME_HK", "HK", "TOTAL", "FY", "2024", 18.6,
...                          "HKD_B", "hk_review", "hk_review#para1")])
1
>>> [f.value for f in store.query("REVENUE", "ACME_HK", "FY", "2024")]
[18.6]
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.errors import RagspineError
from ragspine_lite.common.registry import Registry
from ragspine_lite.common.sqlite import SqliteFile

__all__ = [
    "DEFAULT_REVIEW_STATUSES",
    "FACT_STORE_ENV",
    "Fact",
    "FactStore",
    "FactStoreError",
    "SqliteFactStore",
    "make_fact_store",
]

FACT_STORE_ENV = "RAGSPINE_FACT_STORE"
DEFAULT_REVIEW_STATUSES: tuple[str, ...] = ("auto_approved", "approved")
_TABLE = "fact_metric"


class FactStoreError(RagspineError):
    """A fact store's SQLite failure (the original exception is chained)."""


@dataclass
class Fact:
    """One metric value with its lineage (``source_doc_id`` + ``source_locator``).

    ``dimensions`` defaults to ``metric``/``entity``/``channel``/``period_type``/``period``;
    given, it may not use the name of a value or bookkeeping field (``value``, ``unit``,
    ``tags``, ``source_doc_id`` …: ``ValueError``).
    """

    metric_code: str
    entity: str
    geography: str
    channel: str
    period_type: str
    period: str
    value: float
    unit: str
    source_doc_id: str
    source_locator: str
    tags: dict[str, str] = field(default_factory=dict)
    source_file_hash: str | None = None
    extractor_version: str | None = None
    mapping_version: str | None = None
    confidence: float | None = None
    review_status: str = "auto_approved"
    valid_as_of: str | None = None
    ingested_at: str | None = None
    corrected_by: str | None = None
    corrected_audit_seq: int | None = None
    dimensions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.dimensions:
            self.dimensions = {
                "metric": self.metric_code, "entity": self.entity, "channel": self.channel,
                "period_type": self.period_type, "period": self.period,
            }
            return
        reserved = sorted(set(self.dimensions) & _RESERVED)
        if reserved:
            raise ValueError(f"fact dimensions may not use the reserved names {reserved}")

    @property
    def dim_key(self) -> str:
        """The natural key: the dimensions as canonical JSON."""
        return json.dumps(self.dimensions, sort_keys=True, ensure_ascii=False)


_FIELDS = tuple(f.name for f in fields(Fact))
# Names a dimension may not take: the value and bookkeeping fields.
_RESERVED = frozenset(_FIELDS) - {
    "metric_code", "entity", "geography", "channel", "period_type", "period", "dimensions"
}
_JSON_FIELDS = ("tags", "dimensions")


@runtime_checkable
class FactStore(Protocol):
    """Exact-match fact reads (the graph's use) and upserts."""

    def upsert_facts(self, facts: Iterable[Fact]) -> int: ...

    def query(self, metric_code: str, entity: str, period_type: str, period: str,
              channel: str = "TOTAL",
              review_statuses: Sequence[str] = DEFAULT_REVIEW_STATUSES) -> list[Fact]: ...


def _check(index: int, fact: object) -> Fact:
    if not isinstance(fact, Fact):
        raise ValueError(f"facts[{index}] is a {type(fact).__name__}, not a Fact")
    value = fact.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"facts[{index}].value must be a finite number")
    for name in ("metric_code", "entity", "period_type", "period", "source_doc_id",
                 "source_locator"):
        if not isinstance(getattr(fact, name), str) or not getattr(fact, name).strip():
            raise ValueError(f"facts[{index}].{name} must be a non-blank string")
    return fact


class SqliteFactStore(SqliteFile):
    """Facts in one SQLite database (a path or ``":memory:"``), table ``fact_metric``.

    One connection, bound to the creating thread. Call :meth:`init_schema` before writing.
    """

    _what = "fact store"
    _error = FactStoreError

    def __init__(self, db_path: str | Path) -> None:
        self._open(db_path).row_factory = sqlite3.Row

    def __repr__(self) -> str:
        return f"SqliteFactStore({self.db_path!r})"

    def init_schema(self) -> None:
        """Create ``fact_metric`` and its unique indexes (idempotent)."""
        columns = ", ".join(
            f"{name} REAL" if name in ("value", "confidence") else
            f"{name} INTEGER" if name == "corrected_audit_seq" else f"{name} TEXT"
            for name in _FIELDS
        )
        with self._transaction("init_schema") as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_TABLE} ({columns}, dim_key TEXT NOT NULL)"
            )
            conn.execute(
                f"CREATE UNIQUE INDEX IF NOT EXISTS ux_{_TABLE}_dims ON {_TABLE} "
                "(metric_code, entity, channel, period_type, period)"
            )
            conn.execute(
                f"CREATE UNIQUE INDEX IF NOT EXISTS ux_{_TABLE}_dim_key ON {_TABLE} (dim_key)"
            )

    def upsert_facts(self, facts: Iterable[Fact]) -> int:
        """Insert or replace (by ``dim_key``) every fact in one transaction; the count."""
        checked = [_check(i, f) for i, f in enumerate(facts)]
        names = (*_FIELDS, "dim_key")
        sql = (
            f"INSERT INTO {_TABLE} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
            f"ON CONFLICT(dim_key) DO UPDATE SET "
            + ", ".join(f"{n} = excluded.{n}" for n in _FIELDS)
        )
        rows = [_row(f) for f in checked]
        with self._transaction("upsert_facts") as conn:
            conn.executemany(sql, rows)
        return len(rows)

    def query(self, metric_code: str, entity: str, period_type: str, period: str,
              channel: str = "TOTAL",
              review_statuses: Sequence[str] = DEFAULT_REVIEW_STATUSES) -> list[Fact]:
        """The facts matching all five dimensions exactly, with an allowed review status."""
        statuses = list(review_statuses)
        if not statuses:
            return []
        sql = (
            f"SELECT {', '.join(_FIELDS)} FROM {_TABLE} WHERE metric_code = ? AND entity = ? "
            "AND period_type = ? AND period = ? AND channel = ? "
            f"AND review_status IN ({', '.join('?' * len(statuses))}) ORDER BY dim_key"
        )
        params = [metric_code, entity, period_type, period, channel, *statuses]
        try:
            rows = self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise FactStoreError(f"query failed on {self.db_path!r}: {exc}") from exc
        return [_fact(row) for row in rows]


def _row(fact: Fact) -> tuple[Any, ...]:
    values = [
        json.dumps(getattr(fact, n), sort_keys=True, ensure_ascii=False) if n in _JSON_FIELDS
        else getattr(fact, n)
        for n in _FIELDS
    ]
    return (*values, fact.dim_key)


def _fact(row: Mapping[str, Any]) -> Fact:
    values = {n: json.loads(row[n]) if n in _JSON_FIELDS else row[n] for n in _FIELDS}
    return Fact(**values)


FACT_STORES = Registry("fact_stores", env=FACT_STORE_ENV, default="sqlite", off=("none",))
FACT_STORES.register("sqlite", SqliteFactStore)


def make_fact_store(spec: str | None = None, **kwargs: Any) -> FactStore | None:
    """A fact store for ``spec`` (env ``RAGSPINE_FACT_STORE`` when ``None``, default
    ``sqlite``, built with ``**kwargs`` such as ``db_path``); ``none`` → ``None``."""
    store: FactStore | None = FACT_STORES.build(spec, **kwargs)
    return store
