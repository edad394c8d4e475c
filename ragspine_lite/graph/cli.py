"""``ragspine-lite graph``: cited roll-up, peer comparison and lineage trace from the shell.

The relation graph is built from an ingested chunk database (``--db``), a domain profile
(``--profile``, JSON or TOML; default ``$RAGSPINE_COMPANY_CONFIG``, else the built-in ACME
profile) and facts (``--facts``, a JSON list of fact objects), then asked one question::

    ragspine-lite graph rollup ACME_GROUP REVENUE FY 2024 --db chunks.db --facts facts.json
    ragspine-lite graph compare REVENUE FY 2024 ACME_HK ACME_CN --db chunks.db --facts facts.json
    ragspine-lite graph trace ACME_GROUP --edge-type parent_of --edge-type derives --db chunks.db

``--relation-extractor`` (``$RAGSPINE_RELATION_EXTRACTOR``: none, deterministic, llm with
``--llm-url``/``$RAGSPINE_LLM_URL``) and ``--graph-store`` (``$RAGSPINE_GRAPH_STORE``,
default in_process) are the graph's settings. RESTRICTED documents never show: their nodes
are invisible to every read, and a fact citing one is left out of every answer.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ragspine_lite.chunking.chunk_store import ChunkStore
from ragspine_lite.common.company_profile import load_company_profile
from ragspine_lite.common.registry import normalize_spec
from ragspine_lite.common.settings import Settings
from ragspine_lite.common.validators import arg_type
from ragspine_lite.graph.extractor import RELATION_EXTRACTOR_ENV, make_relation_extractor
from ragspine_lite.graph.query import ComparisonResult, DerivationTrace, GraphQuery, RollupResult
from ragspine_lite.graph.relation import build_relation_graph
from ragspine_lite.graph.store import GRAPH_STORE_ENV, make_graph_store
from ragspine_lite.storage.fact_store import Fact, SqliteFactStore

__all__ = ["add_graph_command", "load_facts", "run_graph"]

Printer = Callable[..., None]


_depth = arg_type("non-negative integer")


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", required=True, metavar="FILE", help="an ingested chunk database")
    common.add_argument("--profile", metavar="FILE",
                        help="domain profile, JSON or TOML (default $RAGSPINE_COMPANY_CONFIG, "
                        "else the built-in ACME profile)")
    common.add_argument("--facts", metavar="FILE", help="facts: a JSON list of fact objects")
    common.add_argument("--relation-extractor", metavar="SPEC",
                        help=f"none, deterministic or llm (default ${RELATION_EXTRACTOR_ENV}, "
                        "else none)")
    common.add_argument("--graph-store", metavar="SPEC",
                        help=f"in_process or networkx (default ${GRAPH_STORE_ENV}, else "
                        "in_process)")
    common.add_argument("--llm-url", metavar="URL", help="chat server for --relation-extractor "
                        "llm (default $RAGSPINE_LLM_URL)")
    common.add_argument("--llm-model", metavar="NAME", help="its model (default "
                        "$RAGSPINE_LLM_MODEL)")
    common.add_argument("--json", action="store_true", help="print the result as JSON")
    return common


def add_graph_command(sub: Any, *, out: Printer, out_json: Printer) -> None:
    """Register ``graph`` on the CLI's subparsers; ``out``/``out_json`` print safely."""
    common = _common_options()
    p = sub.add_parser("graph", help="cited roll-up / compare / trace over the relation graph",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    actions = p.add_subparsers(dest="graph_action", metavar="ACTION", required=True)
    r = actions.add_parser("rollup", parents=[common], help="sum a metric over subsidiaries")
    for name in ("entity", "metric", "period_type", "period"):
        r.add_argument(name, metavar=name.upper())
    r.add_argument("--channel", default="TOTAL", help="channel (default TOTAL)")
    c = actions.add_parser("compare", parents=[common], help="one metric across entities")
    for name in ("metric", "period_type", "period"):
        c.add_argument(name, metavar=name.upper())
    c.add_argument("entities", nargs="+", metavar="ENTITY")
    c.add_argument("--channel", default="TOTAL", help="channel (default TOTAL)")
    t = actions.add_parser("trace", parents=[common], help="what a value derives / reaches")
    t.add_argument("start", metavar="START")
    t.add_argument("--edge-type", action="append", dest="edge_types", metavar="TYPE",
                   help="edge type to follow (repeatable; default derives)")
    t.add_argument("--depth", type=_depth, default=3, metavar="N", help="hops (default 3)")
    p.set_defaults(handler=partial(run_graph, out=out, out_json=out_json))


def load_facts(path: str) -> list[Fact]:
    """Facts from a JSON file holding a list of objects with :class:`Fact`'s fields."""
    where = f"facts file {path!r}"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{where} does not exist") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"cannot read {where}: {exc}") from None
    if not isinstance(data, list):
        raise ValueError(f"{where} must hold a JSON list of fact objects")
    facts = []
    for i, item in enumerate(data):
        try:
            facts.append(Fact(**item))
        except TypeError as exc:
            raise ValueError(f"{where}: item {i} is not a fact ({exc})") from None
    return facts


def _chunks(db: str) -> list[Any]:
    if not Path(db).is_file():
        raise FileNotFoundError(f"chunk database {db!r} does not exist; create it with "
                                f"'ragspine-lite ingest PATH --db {db}'")
    with ChunkStore(db, read_only=True) as store:
        return store.iter_chunks()


def _extractor(args: argparse.Namespace, profile: Any) -> Any:
    spec = args.relation_extractor
    provider = None
    settings: Settings = args.settings
    spec = spec if spec is not None else (settings.relation_extractor or "none")
    wanted = spec
    if normalize_spec(wanted) in ("llm", "on"):
        from ragspine_lite.remote.openai_chat import provider_from_env

        provider = provider_from_env(settings.as_env(), url=args.llm_url, model=args.llm_model)
        if provider is None:
            print("ragspine-lite: graph: the llm relation extractor needs --llm-url or "
                  "$RAGSPINE_LLM_URL; extracting no relations", file=sys.stderr)
    return make_relation_extractor(spec, provider=provider, profile=profile)


def _answer(args: argparse.Namespace, query: GraphQuery) -> Any:
    if args.graph_action == "rollup":
        return query.subsidiary_rollup(args.entity, args.metric, args.period_type,
                                       args.period, channel=args.channel)
    if args.graph_action == "compare":
        return query.peer_comparison(args.entities, args.metric, args.period_type,
                                     args.period, channel=args.channel)
    return query.derivation_trace(args.start, edge_types=tuple(args.edge_types or ("derives",)),
                                  max_depth=args.depth)


def run_graph(args: argparse.Namespace, *, out: Printer, out_json: Printer) -> int:
    """Build the relation graph and print the answer to one question; the exit code."""
    profile = load_company_profile(args.profile or args.settings.company_config)
    facts = load_facts(args.facts) if args.facts else []
    chunks = _chunks(args.db)
    store = make_graph_store(args.graph_store or args.settings.graph_store or "in_process")
    graph = build_relation_graph(profile, facts=facts, chunks=chunks, store=store,
                                 relation_extractor=_extractor(args, profile))
    # A fact citing a RESTRICTED document (its doc node is invisible) is never answered with.
    shown = [f for f in facts if graph.get_node(str(f.source_doc_id)) is not None]
    with SqliteFactStore(":memory:") as fact_store:
        fact_store.init_schema()
        fact_store.upsert_facts(shown)
        result = _answer(args, GraphQuery(graph, fact_store, profile=profile))
    if args.json:
        out_json(dataclasses.asdict(result))
    else:
        for line in _lines(result):
            out(line)
    return 0


def _cite(doc: str, locator: str) -> str:
    """``[locator]``, or ``[doc locator]`` when the locator does not name its document."""
    return f"[{locator}]" if locator.startswith(f"{doc}#") else f"[{doc} {locator}]"


def _meta_cite(meta: Any) -> str:
    return _cite(str(meta.get("source_doc_id", "")), str(meta.get("source_locator", "")))


def _fact_line(entity: str, fact: Fact | None) -> str:
    if fact is None:
        return f"  {entity}: not found"
    return (f"  {entity}: {fact.value:g} {fact.unit}  "
            f"{_cite(str(fact.source_doc_id), str(fact.source_locator))}")


def _lines(result: Any) -> list[str]:
    if isinstance(result, RollupResult | ComparisonResult) and result.refused:
        return [f"refused: {result.refusal_message}"]
    if isinstance(result, RollupResult):
        head = f"{result.parent} {result.metric} {result.period}: "
        if result.total is None:
            return [head + "no facts found for its subsidiaries"]
        return [head + f"total {result.total:g} from {len(result.facts)} fact(s)",
                *(_fact_line(f.entity, f) for f in result.facts)]
    if isinstance(result, ComparisonResult):
        return [f"{result.metric} {result.period}:",
                *(_fact_line(row.entity, row.fact) for row in result.rows)]
    trace: DerivationTrace = result
    return [f"{trace.start}: {len(trace.nodes)} node(s), {len(trace.edges)} edge(s)",
            *(f"  node {n.id} ({n.type})  {_meta_cite(n.metadata)}" for n in trace.nodes),
            *(f"  edge {e.src} -{e.type}-> {e.dst}  {_meta_cite(e.metadata)}" for e in trace.edges)]
