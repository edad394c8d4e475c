"""The opt-in layers at the command line: options, environment variables, wiring.

``ingest --contextual`` (``RAGSPINE_CONTEXTUAL``) records the index-text setting in the chunk
database; ``search`` follows what the database recorded and refuses a conflicting
``RAGSPINE_CONTEXTUAL``. ``search --postprocess`` (``RAGSPINE_POSTPROCESSOR``),
``--corrective`` (``RAGSPINE_CORRECTIVE``) and ``--raptor`` (``RAGSPINE_RAPTOR``, with
``RAGSPINE_RAPTOR_SUMMARIZER``) wrap the link exit, so none of them ever sees RESTRICTED.
The variables come from the command's :class:`~ragspine_lite.common.settings.Settings`.
"""

from __future__ import annotations

import argparse
from typing import Any

from ragspine_lite.cli.common import pick
from ragspine_lite.common.settings import Settings
from ragspine_lite.contextual import (
    CONTEXTUAL_ENV,
    INDEX_TEXT_META_KEY,
    IndexTextMismatch,
    check_index_text,
    index_text_setting,
    make_index_text_fn,
)
from ragspine_lite.corrective import CORRECTIVE_ENV, make_corrective_retriever
from ragspine_lite.link.droppable_filter import DefaultFilters, DroppableFilter
from ragspine_lite.postprocess import POSTPROCESSOR_ENV, make_postprocessor
from ragspine_lite.raptor import (
    RAPTOR_ENV,
    RaptorTree,
    build_raptor_tree,
    make_raptor_retriever,
    make_raptor_summarizer,
)

__all__ = [
    "LayerOptions",
    "add_ingest_options",
    "add_search_options",
    "ingest_index_text",
    "record_index_text",
    "recorded_index_text",
]


def add_ingest_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--contextual", action="store_true", default=None,
        help="index and embed each chunk with a context header (title · entity · period · "
        f"heading; cited text unchanged); default ${CONTEXTUAL_ENV} or off",
    )


def add_search_options(p: argparse.ArgumentParser) -> None:
    for flag, env, names in (
        ("--postprocess", POSTPROCESSOR_ENV, "mmr, lost_in_middle, compress or a comma chain"),
        ("--corrective", CORRECTIVE_ENV, "none or crag (grade, drop filters, else refuse)"),
        ("--raptor", RAPTOR_ENV, "none or raptor (add cluster summaries, never citable)"),
    ):
        p.add_argument(flag, metavar="SPEC", help=f"{names}; default ${env} or none")


def ingest_index_text(flag: bool | None, settings: Settings) -> Any:
    """The index-text function ``ingest`` uses: ``--contextual`` or ``$RAGSPINE_CONTEXTUAL``."""
    return make_index_text_fn("contextual" if flag else (settings.contextual or "none"))


def recorded_index_text(store: Any, where: str, settings: Settings) -> Any:
    """The index-text function a database was built with; ``$RAGSPINE_CONTEXTUAL``, when set,
    must agree (:class:`IndexTextMismatch` otherwise)."""
    recorded = store.read_meta(INDEX_TEXT_META_KEY) or "none"
    if recorded not in ("none", "contextual"):
        raise IndexTextMismatch(
            f"{where} was indexed with index text {recorded!r}, which the command line cannot "
            "reproduce; search it from Python with the same index_text_fn"
        )
    fn = make_index_text_fn(recorded)
    if settings.contextual:
        check_index_text(recorded, make_index_text_fn(settings.contextual), where=where)
    return fn


def record_index_text(store: Any, fn: Any) -> str | None:
    """Record ``fn``'s setting; returns the previous one when this changes it."""
    before = store.read_meta(INDEX_TEXT_META_KEY) or "none"
    setting = index_text_setting(fn)
    store.write_meta(INDEX_TEXT_META_KEY, setting)
    return before if before != setting else None


class LayerOptions:
    """The search's opt-in layers, validated once (bad specs raise ``ValueError``).

    Wiring, outermost first: corrective → raptor → the link (with the postprocessor), so a
    refusal shows nothing at all, summaries included.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        settings: Settings = args.settings
        postprocess = pick(args.postprocess, settings.postprocessor, "none")
        self.postprocessor = make_postprocessor(postprocess)
        probe: Any = object()  # a factory that hands it back unchanged: that layer is off
        corrective = pick(args.corrective, settings.corrective, "none")
        crag = make_corrective_retriever(probe, corrective, emit=True)
        self.corrective_spec = corrective if crag is not probe else "none"
        raptor_spec = pick(args.raptor, settings.raptor, "none")
        raptor = make_raptor_retriever(probe, raptor_spec, tree=RaptorTree(), embedder=probe)
        self.raptor_spec = raptor_spec if raptor is not probe else "none"
        self.summarizer = None
        if self.raptor_spec != "none":
            from ragspine_lite.remote.openai_chat import provider_from_env

            provider = provider_from_env(settings.as_env(), url=args.llm_url,
                                         model=args.llm_model)
            self.summarizer = make_raptor_summarizer(
                settings.raptor_summarizer or "none", provider=provider
            )
        self.last: Any = None

    def wrap(self, link: Any, cli_index: Any, store: Any, backend: Any) -> Any:
        """The layers over the link exit (the link itself when none is on)."""
        if self.raptor_spec == "none" and self.corrective_spec == "none":
            return link
        switch = DroppableFilter(link, cli_index)
        top: Any = switch
        if self.raptor_spec != "none":
            from ragspine_lite.vector.embedding_backends import DeterministicEmbeddingBackend

            embedder = backend if backend is not None else DeterministicEmbeddingBackend()
            tree = build_raptor_tree(store.iter_chunks(), embedder=embedder,
                                     summarizer=self.summarizer)
            top = make_raptor_retriever(top, self.raptor_spec, tree=tree, embedder=embedder)
        self.last = top = make_corrective_retriever(top, self.corrective_spec, emit=True)
        cli_filters = None if switch.metadata_filter is None else {"filter": "on"}
        return DefaultFilters(top, cli_filters)

    def label(self) -> str:
        """``" + raptor"`` / ``" + crag"`` for the layers the search runs."""
        return ("" if self.raptor_spec == "none" else " + raptor") + (
            "" if self.corrective_spec == "none" else " + crag")

    def notes(self) -> list[str]:
        """What the last search decided that the user must see (a refusal)."""
        crag = self.last
        if not getattr(crag, "refused", False):
            return []
        steps = ", ".join(a.action for a in crag.last_actions[:-1])
        best = crag.last_actions[-1].grade
        return [
            f"corrective retrieval refused the context: best grade {best:.2f} < "
            f"{crag.min_grade:.2f} after {steps}; nothing is shown"
        ]
