"""Build a static, offline search site from a folder of documents: :func:`build_site`.

    ragspine-lite build-site DOCS_DIR --out site/      # or, in a checkout: build_wasm.py build
    python -m http.server -d site/  # or ragspine-lite serve-site site/

``build`` ingests ``.md``/``.txt``/``.html`` documents (front matter → metadata, headings →
sections with anchors) into a chunk store through the normal ingest path, and assembles:

    manifest.json           format version, runtime versions, sha256 + size of every file, counts
    data/                   the index, sharded (RESTRICTED documents never enter it): a small
                            header (entry.index), term-range postings shards (data/terms/),
                            text fragments with each document's result URL (--base-url + its
                            path; + #section per hit) and filter metadata (data/text/); every
                            name carries its content's sha256, and a browser fetches only the
                            files a query needs
    wheels/                 micropip 0.11.1 and the ragspine_lite wheel (pure, no samples),
                            packed from the package being run
    pyodide/                the Pyodide core (pinned 314.0.8), from the package data
    ragspine-lite.mjs/.d.ts the JS API; ragspine-worker.mjs the module Web Worker (its requests
                            and opening), which imports the worker modules below:
    ragspine-messages.mjs   the worker's progress, log and error messages
    ragspine-files.mjs      its fetches, sha256 checks, synchronous reads and the Cache API cache
    ragspine-boot.mjs       its Pyodide start (memory snapshot), wheel install and searcher
    ragspine-embed.mjs      its embedding model (onnxruntime-web) and the dense scanner hookup
    ragspine-query.mjs      its searches and prefetch on the full engine
    ragspine-documents.mjs  the visitor's own documents, kept in IndexedDB
    ragspine-search.mjs     the <ragspine-search> element (inline, or a Ctrl/Cmd-K modal): the box,
                            all a page that never searches loads (with ragspine-i18n/-ui.mjs)
    ragspine-panel.mjs      its results panel, loaded on the visitor's first intent
    ragspine-dense.mjs      the worker's exact int8 scan of the chunk vectors
    ragspine-instant.mjs    the worker's instant lane: plain BM25 searches in JavaScript,
                            equal to the Python path's, answered before Pyodide is up
    ragspine-i18n.mjs       the element's words in English, Simplified and Traditional Chinese
    ragspine-ui.mjs         the element's style sheet and DOM helpers
    ragspine-contract.mjs   the search options, their defaults and the format version, generated
                            from ragspine_lite.bundle.options (ragspine_lite.bundle.contract)
    index.html              the site's search page (--title, --examples; none with --no-page),
                            or with --demo the ACME demo page (+ demo.mjs, demo.css)
    pages/                  Markdown/text sources rendered as pages, so their results link too

The output folder may sit inside the documents folder (``build public/ --out public/_search/``):
it is never indexed itself.

The index is exported to a chunk store first (a build intermediate beside ``--out``, deleted
afterwards; ``--keep-store FILE`` keeps a copy for CPython: ``BundleSearcher(FILE)``) and then
written as shards (``ragspine_lite.bundle.shards.write_shards``).

With ``--embeddings minilm`` (needs the ``[embed-onnx]`` extra) also a vector per chunk
(``data/vectors/``, int8), computed at build time with all-MiniLM-L6-v2, plus what the
browser needs to embed queries the same way:

    models/minilm/          model.onnx, vocab.txt, embedding_config.json (+ LICENSE, NOTICE)
    ort/                    onnxruntime-web's WASM build, from the package data

RESTRICTED documents are set aside before anything is written; the finished folder is then
checked (``ragspine_lite.bundle.leaks``: databases row by row, every other byte, zip members
included) for their text, chunk by chunk, titles and ids and for ``--canary`` strings, and
the build fails (leaving the previous site untouched) if any is found, naming where.

A build works in ``.OUT.staging-PID-…`` beside ``--out`` and swaps it in only when finished;
a build killed mid-way leaves such folders, and the next build into the same ``--out`` removes
them. The runtime files come from the installed wheel's package data, or from a checkout
(:mod:`ragspine_lite.bundle.site_files`).
"""

from __future__ import annotations

import gc
import html
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragspine_lite.bundle.site_files import (
    DEMO_FILES,
    MICROPIP_VERSION,
    ORT_FILES,
    ORT_MODULE,
    PAGE_TEMPLATE,
    PRECOMPRESSED,
    PYODIDE_FILES,
    RUNTIME_FILES,
    RUNTIME_PRECOMPRESSED,
    BuildError,
    copy_files,
    find_micropip,
    ort_version,
    pyodide_versions,
    runtime_dir,
    sha256_file,
    write_precompressed,
)
from ragspine_lite.bundle.site_model import (
    EMBED_ONNX_INSTALL,
    EMBED_USE_INSTALL,
    EMBEDDINGS,
    LICENSE_FILES,
    MODEL_DIRS,
    _check_ort,
    _embeddings_name,
    _model_fit,
    copy_model,
    make_embedding_backend,
)

PROG = "ragspine-lite build-site"
PYODIDE_DIR = runtime_dir("pyodide")
WEB_DIR = runtime_dir("web")
ORT_DIR = runtime_dir("ort")


__all__ = [
    "EMBEDDINGS",
    "EMBED_ONNX_INSTALL",
    "EMBED_USE_INSTALL",
    "LICENSE_FILES",
    "MODEL_DIRS",
    "ProgressBar",
    "build_site",
    "copy_model",
    "make_embedding_backend",
]


# ---------------------------------------------------------------- progress


#: How many times a build's phase reports its progress, at most (and at its end).
PROGRESS_STEPS = 200
#: What a progress phase counts (its rate is shown per second).
PROGRESS_UNITS = {"reading": "pages", "indexing": "pages", "embedding": "chunks"}


class ProgressBar:
    """A one-line progress bar on stderr for a tty, else a line every 10 percent.

    Called as ``bar(done, total, item)``; an ``item`` like ``"reading a.md"`` names its phase
    (the first word), and each phase gets its own bar.
    """

    def __init__(self, label: str, *, stream: Any = None, min_total: int = 20) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.min_total = min_total
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._phase = ""
        self._last_decile = -1
        self._started = time.perf_counter()

    def _pace(self, phase: str, done: int, total: int) -> str:
        """``"812 pages/s, ETA 9 s"``: the phase's rate so far and the time it still needs."""
        elapsed = max(time.perf_counter() - self._started, 1e-6)
        rate = done / elapsed
        unit = PROGRESS_UNITS.get(phase, "items")
        return f"{rate:,.0f} {unit}/s, ETA {(total - done) / rate if rate else 0:.0f} s"

    def __call__(self, done: int, total: int, item: str) -> None:
        if total < self.min_total:
            return
        phase, _, name = item.partition(" ") if " " in item else ("", "", item)
        if phase != self._phase:
            self._phase, self._last_decile = phase, -1
            self._started = time.perf_counter()
        title = f"{self.label} {phase}".rstrip()
        pace = self._pace(phase, done, total)
        if self.tty:
            width = 30
            filled = int(width * done / total)
            name = name if len(name) <= 40 else "..." + name[-37:]
            self.stream.write(
                f"\r{title} [{'#' * filled}{'-' * (width - filled)}] {done}/{total} {pace} "
                f"{name:<40}"
            )
            if done == total:
                self.stream.write("\n")
            self.stream.flush()
            return
        decile = done * 10 // total
        if decile != self._last_decile:
            self._last_decile = decile
            print(f"{title}: {done}/{total} ({decile * 10}%), {pace}", file=self.stream,
                  flush=True)


#: What each kind of index file is called in the build summary (one, several).
SHARD_KINDS = {
    "header": ("header", "headers"), "t": ("term shard", "term shards"),
    "f": ("text fragment", "text fragments"), "m": ("filter file", "filter files"),
    "v": ("vector shard", "vector shards"),
    "l": ("length file", "length files"), "n": ("token-count file", "token-count files"),
}


def shard_summary(index: dict[str, Any]) -> str:
    """``write_shards``' report as one phrase: ``"1 header (2 kB), 14 term shards (310 kB), …"``."""
    counts, sizes = index.get("files", {}), index.get("bytes", {})
    parts = []
    for kind in sorted(counts, key=lambda k: (list(SHARD_KINDS).index(k) if k in SHARD_KINDS
                                              else len(SHARD_KINDS), k)):
        one, many = SHARD_KINDS.get(kind, (kind, kind))
        size = sizes.get(kind, 0)
        shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{max(1, round(size / 1e3))} kB"
        parts.append(f"{counts[kind]} {one if counts[kind] == 1 else many} ({shown})")
    return ", ".join(parts)


def _file_table(root: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every file but the manifest, the content-named index files and the
    rendered pages (:data:`~ragspine_lite.bundle.manifest.UNLISTED_DIRS`)."""
    from ragspine_lite.bundle.manifest import UNLISTED_DIRS

    listed = []
    for folder, dirs, files in os.walk(root):  # the unlisted folders are not walked
        prefix = Path(folder).relative_to(root).as_posix() + "/"
        prefix = "" if prefix == "./" else prefix
        dirs[:] = [d for d in dirs if not (prefix + d + "/").startswith(UNLISTED_DIRS)]
        listed += [prefix + name for name in files if not (prefix + name).startswith(UNLISTED_DIRS)]
    table = {}
    for rel in sorted(listed, key=lambda rel: rel.split("/")):  # as Paths sort
        if rel != "manifest.json":
            path = root / rel
            table[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return table


# ---------------------------------------------------------------- build

#: What a build keeps beside ``--out`` while it runs (``.NAME.KIND-PID-…``): the new site
#: (``staging``, wheel scratch inside), an exported model (``model``), the exported chunk store
#: the shards are written from (``store``), the site it replaces (``old``).
SCRATCH_KINDS = ("staging", "model", "store", "old")
#: The exported chunk store's name inside its scratch folder (never part of the site).
STORE_NAME = "chunks.db"


def scratch_dir(target: Path, kind: str) -> Path:
    """A new ``.NAME.KIND-PID-XXXX`` folder beside ``target`` (same file system: renames)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}.{kind}-{os.getpid()}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name != "posix":  # no harmless probe: assume it runs, keep its folders
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def swap_in(staging: Path, target: Path) -> None:
    """Put the built ``staging`` folder at ``target``: the old site moves aside into an
    ``old`` scratch folder, the new one moves in, then the old one is deleted.

    A failure between the two renames moves the old site back. A crash there leaves it in
    the ``old`` folder, and :func:`clean_stale_scratch` puts it back at ``target`` on the next
    run, before anything is deleted: a complete site is at ``target``, or is restored.
    """
    old = None
    if target.exists():
        old = scratch_dir(target, "old")
        target.rename(old / target.name)
    try:
        staging.rename(target)
    except BaseException:
        if old is not None and not target.exists():
            (old / target.name).rename(target)
            old.rmdir()
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _restore_or_drop_old_site(old: Path, target: Path) -> bool:
    """An ``old`` scratch folder of a dead build: put its site back if ``target`` is gone (a
    crash between the swap's renames), delete it once ``target`` is a complete site; else
    keep it. True if it is gone from the scratch folder."""
    from ragspine_lite.bundle.manifest import MANIFEST_NAME

    site = old / target.name
    if not target.exists() and (site / MANIFEST_NAME).is_file():
        site.rename(target)
    elif site.exists() and not (target / MANIFEST_NAME).is_file():
        return False  # no complete site at target to replace it: never delete this copy
    shutil.rmtree(old, ignore_errors=True)
    return True


def clean_stale_scratch(target: Path) -> list[Path]:
    """Tidy the scratch folders of builds into ``target`` whose process is gone (a build
    killed mid-way); returns what was removed. Live builds' folders are left alone. An
    ``old`` folder (the previous site, set aside by :func:`swap_in`) is handled first and
    only deleted once a complete site is at ``target``: it is put back if none is."""
    if not target.parent.is_dir():
        return []
    kinds = "|".join(SCRATCH_KINDS)
    pattern = re.compile(rf"\.{re.escape(target.name)}\.({kinds})-(\d+)(?:-|$)")
    found = [(m.group(1), entry) for entry in sorted(target.parent.iterdir())
             if (m := pattern.match(entry.name)) and entry.is_dir()
             and not _process_alive(int(m.group(2)))]
    removed = []
    for kind, entry in sorted(found, key=lambda item: item[0] != "old"):  # old ones first
        if kind == "old" and not _restore_or_drop_old_site(entry, target):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed



def default_title(docs: Sequence[str | Path], corpus: Sequence[Any]) -> str:
    """The site's own title: its top ``index.html``'s ``<title>``, else the folder's name."""
    for doc in corpus:
        if doc.rel_path.lower() in ("index.html", "index.htm") and not doc.restricted:
            return doc.meta.title
    first = Path(docs[0]).resolve()
    return (first if first.is_dir() else first.parent).name or "Search"


def render_search_page(
    template: str, *, title: str, examples: Sequence[str], language: str = "en"
) -> str:
    """The default search page: ``template`` with the site's title, example queries and
    language (``<html lang>`` and the page's words, see ragspine_lite.bundle.language)."""
    from ragspine_lite.bundle.language import page_string

    values = {
        "title": title,
        "lang": language,
        "search": page_string(language, "search"),
        "examples": json.dumps(list(examples), ensure_ascii=False),
    }
    return re.sub(
        r"\{\{(\w+)\}\}", lambda m: html.escape(values[m.group(1)], quote=True), template
    )


def _write_pages(
    staging: Path, to_render: dict[str, Any], *, page: bool, language: str = "en"
) -> None:
    """Render every Markdown/text source into ``staging`` (see ragspine_lite.bundle.pages);
    ``language`` is the site's (a page without its own is in it)."""
    from ragspine_lite.bundle.language import page_string
    from ragspine_lite.bundle.pages import render_page

    for rel, doc in to_render.items():
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        depth = rel.count("/")
        home = "../" * depth + "index.html" if page else ""
        markdown = not doc.rel_path.lower().endswith(".txt")
        target.write_text(
            render_page(
                title=doc.meta.title, body=doc.body, sections=doc.sections, markdown=markdown,
                language=doc.meta.language or language, home=home,
                home_label=page_string(language, "search"),
            ),
            "utf-8",
        )


def build_site(
    docs: Sequence[str | Path],
    out: str | Path,
    *,
    title: str | None = None,
    base_url: str = "/",
    examples: Sequence[str] = (),
    page: bool = True,
    canaries: Sequence[str] = (),
    wheel: Path | None = None,
    micropip: Path | None = None,
    pyodide_dir: Path = PYODIDE_DIR,
    web_dir: Path = WEB_DIR,
    ort_dir: Path = ORT_DIR,
    embeddings: str | None = None,
    demo: bool = False,
    max_chars: int | None = None,
    overlap_chars: int | None = None,
    chunker: str | None = None,
    sensitivity: str = "INTERNAL",
    language: str = "",
    force: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    log: Callable[[str], None] = lambda message: None,
    contextual: bool = False,
    keep_store: str | Path | None = None,
    warn: Callable[[str], None] | None = None,
    jobs: int | None = None,
    clean: bool = False,
) -> dict[str, Any]:
    """Build the site into ``out`` (replaced only when the new build fully succeeded).

    Every result links to its page: ``base_url`` + the HTML source's path relative to its
    documents folder + ``#anchor``; Markdown/text sources are rendered as pages in the site.
    ``out`` may lie inside a documents folder (it is not indexed). ``index.html`` is the
    site's own search page (``title``, default: the documents' ``index.html`` title or the
    folder name; ``examples`` as query chips), or with ``demo`` the ACME demo page, or none
    with ``page=False``.

    ``contextual`` indexes (and embeds) every chunk with its context header
    (:mod:`ragspine_lite.contextual`); the bundle records it and the page searches with it.

    ``embeddings="minilm"`` (English) or ``"use-multilingual"`` (Chinese and English, 79 MB)
    adds a vector per chunk, the model and onnxruntime-web (from ``ort_dir``) and
    ``entry.embeddings`` in the manifest; ``None``/``"none"`` builds the BM25-only site.
    ``keep_store`` also writes the exported chunk store (the shards' source, never part of
    the site) to that file, for CPython's ``BundleSearcher(path)``. Before embedding, a model
    that cannot represent a fair share of the documents (MiniLM on a Chinese site) is reported
    to ``warn`` (default ``log``) with its cost to visitors, and listed in the manifest's
    ``warnings``; search files over the common static-host limit
    (:data:`~ragspine_lite.bundle.shard_format.SITE_FILES`) are reported to ``warn`` too.
    ``jobs``: processes that parse the documents (default
    :func:`~ragspine_lite.bundle.export.default_jobs`; the site is the same for any number).
    The same documents always give the same bytes, and files are named by their content, so
    a rebuild after an edit renames only the files the edit reaches; a rebuild parses only the
    documents that changed (:mod:`ragspine_lite.bundle.build_cache`, beside ``out``; ``clean``
    deletes it first). Returns the manifest.
    Raises :class:`BuildError` (or ``ValueError`` for bad documents, ``RestrictedLeakError``
    when the output scan finds RESTRICTED content).
    """
    from ragspine_lite.bundle.export import default_jobs
    from ragspine_lite.bundle.pages import normalise_base_url
    from ragspine_lite.chunking.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS

    target = Path(out).resolve()
    _check_target(docs, target, force)
    max_chars = DEFAULT_CHUNK_CHARS if max_chars is None else max_chars
    overlap_chars = DEFAULT_OVERLAP_CHARS if overlap_chars is None else overlap_chars
    name = _embeddings_name(embeddings)
    kept = None if keep_store is None else Path(keep_store).resolve()
    _check_inputs(target, max_chars, overlap_chars, pyodide_dir, ort_dir, name, kept)
    jobs = default_jobs() if jobs is None else jobs
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise BuildError(f"--jobs must be a positive integer, got {jobs!r}")
    _clean_before(target, log)
    export_dir = scratch_dir(target, "model") if name != "none" else None
    try:
        backend = make_embedding_backend(name, export_dir)
        return _build(
            docs, target, title=title, canaries=canaries, wheel=wheel, micropip=micropip,
            pyodide_dir=pyodide_dir, web_dir=web_dir, demo=demo, page=page,
            base_url=normalise_base_url(base_url),
            examples=[str(e).strip() for e in examples if str(e).strip()], max_chars=max_chars,
            overlap_chars=overlap_chars, chunker=chunker, sensitivity=sensitivity,
            language=language, backend=backend, embeddings=name, ort_dir=ort_dir,
            progress=progress, log=log, contextual=contextual, keep_store=kept,
            warn=log if warn is None else warn, jobs=jobs, clean=clean,
        )
    finally:
        if export_dir is not None:
            shutil.rmtree(export_dir, ignore_errors=True)


def _check_target(docs: Sequence[str | Path], target: Path, force: bool) -> None:
    """Refuse an ``--out`` that is a file, holds the documents, or is someone else's folder."""
    from ragspine_lite.bundle.manifest import MANIFEST_NAME

    if target.exists() and not target.is_dir():
        raise BuildError(f"--out {str(target)!r} exists and is not a directory")
    for source in docs:
        folder = Path(source).resolve()
        if folder == target or target in folder.parents:
            raise BuildError(
                f"--out {str(target)!r} would replace the documents in {str(folder)!r}; "
                "build into a folder of its own (inside the documents folder is fine, "
                "e.g. DOCS/_search/)"
            )
    if target.is_dir() and any(target.iterdir()) and not (target / MANIFEST_NAME).is_file():
        if not force:
            raise BuildError(
                f"--out {str(target)!r} is not empty and holds no bundle manifest; "
                "refusing to replace it (pass --force)"
            )


def _check_inputs(
    target: Path, max_chars: int, overlap_chars: int, pyodide_dir: Path, ort_dir: Path,
    embeddings: str, kept: Path | None,
) -> None:
    """Refuse bad chunk budgets, a missing runtime and a ``--keep-store`` inside the site."""
    if not 0 <= overlap_chars < max_chars:
        raise BuildError(
            f"--overlap-chars must be >= 0 and smaller than --max-chars "
            f"({overlap_chars!r} vs {max_chars!r})"
        )
    if not (pyodide_dir / "pyodide.mjs").is_file():
        raise BuildError(
            f"Pyodide runtime not found in {str(pyodide_dir)!r}: this ragspine_lite install "
            "lacks the site runtime; in a checkout run 'npm ci' (or pass --pyodide DIR)"
        )
    if embeddings != "none":
        _check_ort(ort_dir)
    if kept is not None and (kept == target or target in kept.parents):
        raise BuildError(
            f"--keep-store {str(kept)!r} lies inside --out: the chunk store is not part of the "
            "site; keep it elsewhere"
        )


def _clean_before(target: Path, log: Callable[[str], None]) -> None:
    """Remove what interrupted builds left beside ``target`` (restoring a set-aside site)."""
    missing = not target.exists()
    for stale in clean_stale_scratch(target):
        log(f"removed {stale.name!r}, left by an interrupted build")
    if missing and target.exists():
        log(f"restored the previous site at {str(target)!r}, set aside by an interrupted build")


def _phases(
    progress: Callable[[int, int, str], None] | None,
) -> Callable[[str], Callable[[int, int, str], None] | None]:
    """``phase(name)``: ``progress`` with ``name`` put before every item (``None``: none),
    told of about every :data:`PROGRESS_STEPS`-th of a phase (a build counts many items)."""
    def phase(name: str) -> Callable[[int, int, str], None] | None:
        if progress is None:
            return None
        report = progress

        def step(done: int, total: int, item: str) -> None:
            if done == total or done % (total // PROGRESS_STEPS or 1) == 0:
                report(done, total, f"{name} {item}")

        return step

    return phase


def _build(
    docs: Sequence[str | Path],
    target: Path,
    *,
    progress: Callable[[int, int, str], None] | None,
    log: Callable[[str], None],
    warn: Callable[[str], None] = lambda message: None,
    jobs: int = 1,
    clean: bool = False,
    **settings: Any,
) -> dict[str, Any]:
    """:func:`build_site` once its arguments are checked and the model is ready
    (``settings``: the rest of its arguments, checked). The build cache is committed only
    when the new site is in place (a failed or refused build leaves it as it was)."""
    started = time.perf_counter()
    collecting = gc.isenabled()
    gc.disable()  # millions of objects and no cycles: collections would cost a quarter
    try:
        corpus, cache = _load(docs, target, _phases(progress), settings, jobs, clean)
        try:
            manifest = _build_loaded(docs, target, corpus, cache, progress, log, warn, settings)
        except BaseException:
            cache.abort()
            raise
        cache.close()
    finally:
        if collecting:
            gc.enable()
    log(f"built {str(target)!r} in {time.perf_counter() - started:.1f} s")
    return manifest


def _build_loaded(
    docs: Sequence[str | Path], target: Path, corpus: list[Any], cache: Any, progress: Any,
    log: Callable[[str], None], warn: Callable[[str], None], settings: dict[str, Any],
) -> dict[str, Any]:
    """The site of the loaded ``corpus``, swapped in at ``target``; its manifest."""
    from ragspine_lite.bundle.export import assign_urls
    from ragspine_lite.bundle.language import site_language
    from ragspine_lite.bundle.site_index import prepare_docs, write_site_index
    from ragspine_lite.chunking.chunker import make_chunker

    phase = _phases(progress)
    excluded = sum(1 for d in corpus if d.restricted)
    log(f"loaded {len(corpus)} document(s) ({cache.hits} unchanged since the last build), "
        f"{excluded} RESTRICTED (excluded from the bundle)")
    to_render = assign_urls(corpus, settings["base_url"])
    warnings = _model_fit(settings["embeddings"], settings["backend"], corpus,
                          settings["ort_dir"], log)
    for message in warnings:
        warn(message)
    if settings["title"] is None:
        settings["title"] = default_title(docs, corpus)
    settings["the_chunker"] = make_chunker(settings["chunker"]) if settings["chunker"] else None
    prepared = prepare_docs(corpus, cache, settings, phase("indexing"))
    settings["site_lang"] = site_language(corpus, settings["language"], prepared.weights)
    staging = scratch_dir(target, "staging")
    staging.chmod(0o755)
    store_dir = scratch_dir(target, "store")
    try:
        report, shards = write_site_index(
            corpus, prepared, cache, target=target, staging=staging, scratch=store_dir,
            progress=progress, phase=phase, log=log, settings=settings)
        log(f"index shards: {shard_summary(shards.as_dict())}")
        entry, ort_runtime = _write_model(report, staging, settings, log)
        wheels = _write_runtime(staging, settings, cache)
        _write_site_pages(staging, to_render, settings, log)
        over = _over_budget(staging)
        if over:
            warn(over)
        manifest = _manifest(report, shards, wheels, entry, ort_runtime, warnings, settings,
                             rendered=len(to_render), staging=staging)
        _write_checked(staging, manifest, corpus, excluded, settings, log)
        keep_store = settings["keep_store"]
        if keep_store is not None:
            keep_store.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(store_dir / STORE_NAME, keep_store)
        swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    return manifest


def _over_budget(staging: Path) -> str | None:
    """A warning when the site's own files (all but the rendered ``pages/``) are more than
    :data:`~ragspine_lite.bundle.shard_format.SITE_FILES`, the common static-host limit."""
    from ragspine_lite.bundle.shard_format import SITE_FILES

    count = 0
    for folder, dirs, files in os.walk(staging):
        if Path(folder) == staging:
            dirs[:] = [d for d in dirs if d != "pages"]
        count += len(files)
    if count <= SITE_FILES:
        return None
    return (f"the site's search files are {count:,} files, over the {SITE_FILES:,} many static "
            "hosts allow (e.g. Cloudflare Pages' free plan): check your host's limit")


def _load(
    docs: Sequence[str | Path], target: Path, phase: Any, settings: dict[str, Any], jobs: int,
    clean: bool,
) -> tuple[list[Any], Any]:
    """The corpus, through the build cache beside ``target``; the cache, still open (its
    ``hits``: the parses it gave)."""
    from ragspine_lite.bundle.build_cache import BuildCache, cache_dir
    from ragspine_lite.bundle.export import load_corpus

    folder = cache_dir(target)
    if clean:
        BuildCache.clear(folder)
    defaults = {"sensitivity": settings["sensitivity"], "language": settings["language"]}
    cache = BuildCache(folder, defaults)
    try:
        corpus = load_corpus([Path(d) for d in docs], progress=phase("reading"),
                             exclude=[target, folder], jobs=jobs, cache=cache, **defaults)
    except BaseException:
        cache.abort()
        raise
    return corpus, cache


def _write_model(
    report: Any, staging: Path, settings: dict[str, Any], log: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Copy a hybrid site's model and onnxruntime-web; its ``entry.embeddings`` and runtime
    versions (both empty for BM25)."""
    backend, name, ort_dir = settings["backend"], settings["embeddings"], settings["ort_dir"]
    if backend is None:
        return {}, {}
    log(f"vectors: {report.vectors} ({report.embedding_dim}-d)")
    model_dir = MODEL_DIRS[name]
    written = copy_model(backend, staging / model_dir)
    tokenizer_file = "sp.model" if "sp.model" in written else "vocab.txt"
    copy_files(ORT_FILES, ort_dir, staging / "ort", "onnxruntime-web")
    for rel in PRECOMPRESSED:
        if (staging / rel).is_file():
            write_precompressed(staging / rel)
    ort_runtime = {"onnxruntime_web": ort_version(ort_dir)} if ort_version(ort_dir) else {}
    config = getattr(backend, "config", None)
    entry = {
        "name": name,
        "model_id": report.embedding_model_id,
        "dim": report.embedding_dim,
        "max_length": config.max_length if config is not None else None,
        "model": f"{model_dir}/model.onnx",
        "vocab": f"{model_dir}/{tokenizer_file}",
        "config": f"{model_dir}/embedding_config.json",
        "ort": {"dir": "ort/", "module": f"ort/{ORT_MODULE}"},
        "vectors": report.vectors,
    }
    return entry, ort_runtime


def _write_runtime(
    staging: Path, settings: dict[str, Any], cache: Any = None
) -> dict[str, str]:
    """The wheels, Pyodide and the web runtime into ``staging``; the wheels' site paths
    (the packed wheel and the trimmed standard library from the build ``cache``, if any)."""
    from ragspine_lite.bundle.build_cache import (
        cached_precompressed,
        cached_stdlib,
        cached_wheel,
    )
    from ragspine_lite.bundle.stdlib import write_site_lock

    wheels_dir = staging / "wheels"
    wheels_dir.mkdir()
    wheel = settings["wheel"]
    if wheel is not None:
        if not wheel.is_file() or not wheel.name.endswith("-py3-none-any.whl"):
            raise BuildError(f"--wheel {str(wheel)!r} is not a pure (py3-none-any) wheel file")
        our_wheel = wheels_dir / wheel.name
        shutil.copy2(wheel, our_wheel)
    else:
        our_wheel = cached_wheel(cache, wheels_dir)
    found = find_micropip(settings["micropip"])
    shutil.copy2(found, wheels_dir / found.name)
    copy_files(PYODIDE_FILES, settings["pyodide_dir"], staging / "pyodide", "the Pyodide runtime")
    for rel in RUNTIME_PRECOMPRESSED:
        cached_precompressed(cache, staging / rel)
    our_wheels = [our_wheel, wheels_dir / found.name]
    cached_stdlib(cache, settings["pyodide_dir"], staging / "pyodide", our_wheels)
    write_site_lock(settings["pyodide_dir"], staging / "pyodide")
    copy_files(RUNTIME_FILES, settings["web_dir"], staging, "the web runtime")
    return {"micropip": f"wheels/{found.name}", "ragspine_lite": f"wheels/{our_wheel.name}"}


def _write_site_pages(
    staging: Path, to_render: dict[str, Any], settings: dict[str, Any],
    log: Callable[[str], None],
) -> None:
    """The rendered Markdown/text pages and the search page (or the demo) into ``staging``."""
    demo, page, web_dir = settings["demo"], settings["page"], settings["web_dir"]
    _write_pages(staging, to_render, page=page or demo, language=settings["site_lang"])
    if to_render:
        log(f"rendered {len(to_render)} Markdown/text page(s) into pages/")
    if demo:
        copy_files(DEMO_FILES, web_dir, staging, "the demo page")
    elif page:
        copy_files((PAGE_TEMPLATE,), web_dir, staging, "the search page")
        template = staging / PAGE_TEMPLATE
        (staging / "index.html").write_text(
            render_search_page(
                template.read_text("utf-8"), title=settings["title"],
                examples=settings["examples"], language=settings["site_lang"],
            ),
            "utf-8",
        )
        template.unlink()


def _manifest(
    report: Any, shards: Any, wheels: dict[str, str], embeddings: dict[str, Any],
    ort_runtime: dict[str, str], warnings: list[str], settings: dict[str, Any], *,
    rendered: int, staging: Path,
) -> dict[str, Any]:
    """The site's manifest (``restricted_check`` not passed yet)."""
    from ragspine_lite import __version__
    from ragspine_lite.bundle.manifest import BUNDLE_FORMAT_VERSION
    from ragspine_lite.chunking.chunk_store import SCHEMA_VERSION

    demo, page, contextual = settings["demo"], settings["page"], settings["contextual"]
    return {
        "format_version": BUNDLE_FORMAT_VERSION,
        "title": settings["title"],
        "generator": f"ragspine_lite {__version__} build-site",
        "runtimes": {
            **pyodide_versions(settings["pyodide_dir"]),
            "micropip": MICROPIP_VERSION,
            "ragspine_lite": __version__,
            "chunk_store_schema": str(SCHEMA_VERSION),
            **ort_runtime,
        },
        "entry": {
            "index": shards.header,
            "pyodide": "pyodide/",
            "wheels": wheels,
            "api": "ragspine-lite.mjs",
            "worker": "ragspine-worker.mjs",
            "element": "ragspine-search.mjs",
            **({"demo": "index.html"} if demo else {}),
            **({"page": "index.html"} if page and not demo else {}),
            **({"embeddings": embeddings} if embeddings else {}),
        },
        "chunking": {
            "max_chars": settings["max_chars"],
            "overlap_chars": settings["overlap_chars"],
            "chunker": settings["chunker"] or "default",
            **({"index_text": "contextual"} if contextual else {}),
        },
        "site": {
            "base_url": settings["base_url"], "rendered_pages": rendered,
            "language": settings["site_lang"],
        },
        "counts": report.as_dict(),
        "index": shards.as_dict(),
        "restricted_check": {"passed": False},
        **({"warnings": warnings} if warnings else {}),
        "files": _file_table(staging),
    }


def _write_checked(
    staging: Path, manifest: dict[str, Any], corpus: Sequence[Any], excluded: int,
    settings: dict[str, Any], log: Callable[[str], None],
) -> None:
    """Write the manifest once every file of ``staging`` is checked for RESTRICTED text."""
    from ragspine_lite.bundle.export import restricted_needles, verify_no_leaks
    from ragspine_lite.bundle.manifest import MANIFEST_NAME

    needles = restricted_needles(
        corpus, canaries=settings["canaries"], max_chars=settings["max_chars"],
        overlap_chars=settings["overlap_chars"], chunker=settings["the_chunker"],
    )
    manifest_path = staging / MANIFEST_NAME
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")
    # The self-check reads every file written (databases row by row), the manifest too.
    verify_no_leaks(staging, needles)
    manifest["restricted_check"]["passed"] = True
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")
    verify_no_leaks(manifest_path, needles)
    # Local output only: the public files say nothing about what was withheld.
    log(f"RESTRICTED self-check passed: {len(needles)} needle(s) from {excluded} RESTRICTED "
        "document(s) found in no file of the site")
