"""The label canary matrix: every way of writing a sensitivity label × every exit.

Each variant is a document whose only label spells RESTRICTED in a way that once slipped
through (a YAML comment, a zero-width space, a blank line before the block, two ``<meta>``
tags, ``<meta property>`` …) and whose body carries a canary word of its own. Variants that
read as RESTRICTED must never show their canary at any exit: the static bundle (file bytes
and every row), returned snippets (library and browser runtime), the judge's prompt, the
wire to the remote endpoint and CLI output. Variants that are malformed or contradict
themselves must be refused, naming the file and the value, with nothing written.
"""

from __future__ import annotations

import sqlite3
import zipfile
from pathlib import Path

import pytest

from ragspine_lite import cli
from ragspine_lite.bundle.runtime import BundleSearcher
from ragspine_lite.chunking.sources import document_from_text, load_document
from ragspine_lite.common.sensitivity import SensitivityError, describe_value, is_restricted
from ragspine_lite.link.narrative_link import build_narrative_retriever
from ragspine_lite.remote.client import RemoteReranker
from ragspine_lite.rerank.listwise_rerank import listwise_rerank

# name → (file name, text); the canary of each is its name's word, e.g. "zqcanaryyaml".
READ_AS_RESTRICTED = {
    "yaml": ("yaml.md", "---\nsensitivity: RESTRICTED # do not publish\n---\n{body}"),
    "zwsp": ("zwsp.md", "---\nsensitivity: RESTRICTED\u200b\n---\n{body}"),
    "blank": ("blank.md", "\n---\nsensitivity: RESTRICTED\n---\n{body}"),
    "bom": ("bom.md", "\ufeff \n\u200b\n---\nsensitivity: restricted\n---\n{body}"),
    "padded": ("padded.md", "---\nsensitivity: ' \tRestricted '\n---\n{body}"),
    "trailing": ("trailing.txt", "---\nsensitivity: \"RESTRICTED \"\n---\n{body}"),
    "property": (
        "property.html",
        '<head><meta property="sensitivity" content="RESTRICTED"></head><p>{body}</p>',
    ),
    "twoagree": (
        "twoagree.html",
        '<meta name="sensitivity" content="restricted">'
        '<meta property="sensitivity" content=" RESTRICTED\u200b"><p>{body}</p>',
    ),
    "capture": ("capture.html", '<p data-ragspine-meta="sensitivity"> Restricted</p><p>{body}</p>'),
    "voidattr": (
        "voidattr.html",
        '<input data-ragspine-meta="sensitivity[value]" value="RESTRICTED"><p>{body}</p>',
    ),
}
REFUSED = {
    "brackets": (
        "brackets.md", '---\nsensitivity: "[RESTRICTED]"\n---\n{body}',
        "starting '[RE' (12 characters)",
    ),
    "dot": (
        "dot.md", "---\nsensitivity: RESTRICTED.\n---\n{body}", "starting 'RES' (11 characters)"
    ),
    "twometas": (
        "twometas.html",
        '<meta name="sensitivity" content="PUBLIC">'
        '<meta name="sensitivity" content="RESTRICTED"><p>{body}</p>',
        "'PUBLIC', 'RESTRICTED'",
    ),
    "mixed": (
        "mixed.html",
        '---\nsensitivity: PUBLIC\n---\n<meta property="sensitivity" content="RESTRICTED">'
        "<p>{body}</p>",
        "'PUBLIC', 'RESTRICTED'",
    ),
    # A data-ragspine-meta label that does not end at its own end tag cannot be read with
    # certainty (it once fell back to the default, INTERNAL): the file is refused.
    "unclosed": (
        "unclosed.html",
        '<p data-ragspine-meta="sensitivity">RESTRICTED<h2>Plan</h2><p>{body}',
        "the sensitivity label in <p> is never closed",
    ),
    "void": (
        "void.html",
        '<input data-ragspine-meta="sensitivity" value="RESTRICTED"><p>{body}</p>',
        "the sensitivity label in <input> has no text",
    ),
    "deep": (
        "deep.html",
        '<div data-ragspine-meta="sensitivity">RESTRICTED' + "<span>" * 70 + "</div><p>{body}</p>",
        "the sensitivity label in <div> is never closed",
    ),
    "ancestor": (
        "ancestor.html",
        '<body><p data-ragspine-meta="sensitivity">RESTRICTED<h2>{body}</h2></body>',
        "the sensitivity label in <p> ends at </body>",
    ),
}
PUBLIC_WORD = "zqpublicword"


def canary(name: str) -> str:
    return f"zqcanary{name}"


def body(name: str) -> str:
    return f"Board minutes {canary(name)} merger plan for the harbour site."


def text_of(name: str, table: dict) -> tuple[str, str]:
    file_name, template = table[name][:2]
    return file_name, template.format(body=body(name))


def write_docs(folder: Path, names: list[str], table: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        file_name, text = text_of(name, table)
        (folder / file_name).write_text(text, encoding="utf-8")
    for label in ("PUBLIC", "internal"):
        (folder / f"open-{label}.md").write_text(
            f"---\nsensitivity: {label}\n---\nHarbour site {PUBLIC_WORD} merger plan.\n",
            encoding="utf-8",
        )
    return folder


ALL = list(READ_AS_RESTRICTED)
CANARIES = [canary(n) for n in ALL]


def test_every_accepted_variant_reads_as_restricted():
    for name in ALL:
        file_name, text = text_of(name, READ_AS_RESTRICTED)
        _, meta = document_from_text(text, name=file_name)
        assert meta.sensitivity == "RESTRICTED", name


@pytest.mark.parametrize("name", list(REFUSED))
def test_every_malformed_or_conflicting_variant_is_refused_naming_file_and_value(name, tmp_path):
    file_name, text, shown = REFUSED[name]
    path = tmp_path / file_name
    path.write_text(text.format(body=body(name)), encoding="utf-8")
    with pytest.raises(SensitivityError) as info:
        load_document(path)
    assert str(path) in str(info.value) and shown in str(info.value)
    assert canary(name) not in str(info.value)  # the error never echoes document text


# ---------------------------------------------------------------- snippets and the judge


class RecordingJudge:
    """A ListwiseJudge that keeps every prompt item it is shown and reverses the order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.seen.extend(candidates)
        return list(reversed(range(len(candidates))))


@pytest.fixture
def library(tmp_path):
    judge = RecordingJudge()
    retriever, store = build_narrative_retriever(tmp_path / "lib.db", reranker=judge)
    folder = write_docs(tmp_path / "docs", ALL, READ_AS_RESTRICTED)
    for path in sorted(folder.iterdir()):
        retriever.index.ingest(*load_document(path, root=folder))
    yield retriever, judge
    store.close()


@pytest.mark.parametrize("name", ALL)
def test_library_snippets_and_judge_prompts_never_carry_the_canary(library, name):
    retriever, judge = library
    query = f"{canary(name)} {PUBLIC_WORD} merger plan"
    below = retriever.index.retrieve(query)  # reverse proof: it matches below the exit
    assert any(canary(name) in r.chunk.text and is_restricted(r.chunk.sensitivity) for r in below)
    snippets = retriever.retrieve(query, top_k=20)
    assert any(PUBLIC_WORD in s["text"] for s in snippets)
    assert all(canary(name) not in repr(s) for s in snippets)
    assert judge.seen and all(canary(name) not in item for item in judge.seen)


@pytest.mark.parametrize("name", ALL)
def test_the_browser_runtime_page_ingest_labels_and_hides_every_variant(name):
    searcher = BundleSearcher()
    try:
        file_name, text = text_of(name, READ_AS_RESTRICTED)
        assert searcher.ingest(file_name, text)["restricted"] is True
        searcher.ingest("open.md", f"Harbour site {PUBLIC_WORD} merger plan overview.")
        outcome = searcher.search(f"{canary(name)} {PUBLIC_WORD}")
        assert [h["snippet"]["doc_id"] for h in outcome.hits] == ["open.md"]
        assert canary(name) not in repr(outcome.as_dict())
    finally:
        searcher.close()


@pytest.mark.parametrize("name", list(REFUSED))
def test_the_browser_runtime_refuses_malformed_labels_and_indexes_nothing(name):
    searcher = BundleSearcher()
    try:
        file_name, text, shown = REFUSED[name]
        with pytest.raises(SensitivityError, match=file_name) as info:
            searcher.ingest(file_name, text.format(body=body(name)))
        assert shown in str(info.value) and canary(name) not in str(info.value)
        assert searcher.page_documents() == []
        assert searcher.search(canary(name)).hits == []
    finally:
        searcher.close()


# ---------------------------------------------------------------- the wire (client side)


@pytest.mark.parametrize("name", ALL)
def test_the_remote_client_never_serialises_a_variant(library, name):
    from _remote_fakes import FakeTransport, reverse_ranker

    retriever, _judge = library
    transport = FakeTransport(reverse_ranker)
    reranker = RemoteReranker("http://127.0.0.1:9", "colbert", transport=transport)
    results = retriever.index.retrieve(f"{canary(name)} {PUBLIC_WORD} merger plan")
    assert any(canary(name) in r.chunk.text for r in results)
    reranker.rerank("merger plan", results)  # chunks as candidates: labels travel
    listwise_rerank("merger plan", results, reranker, top_n=len(results))
    assert transport.calls
    assert canary(name).encode() not in transport.sent
    for payload in transport.payloads():
        assert {c["sensitivity"] for c in payload["candidates"]} <= {"PUBLIC", "INTERNAL"}


# ---------------------------------------------------------------- CLI output


@pytest.fixture
def cli_db(tmp_path, capsys):
    folder = write_docs(tmp_path / "docs", ALL, READ_AS_RESTRICTED)
    db = str(tmp_path / "cli.db")
    assert cli.main(["ingest", str(folder), "--db", db]) == 0
    capsys.readouterr()
    return db


@pytest.fixture(autouse=True)
def _bm25_unless_told(monkeypatch):
    for name in ("RAGSPINE_EMBEDDING", "RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_CONTEXTUAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "none")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize(
    "extra",
    [[], ["--json"], ["--filter", "sensitivity=RESTRICTED"],
     ["--mode", "hybrid", "--embedding", "deterministic"]],
)
def test_cli_search_for_a_canary_prints_what_a_query_matching_nothing_prints(
    cli_db, capsys, name, extra
):
    nothing = "zqnothingmatches"
    found = run(capsys, "search", canary(name), "--db", cli_db, *extra)
    empty = run(capsys, "search", nothing, "--db", cli_db, *extra)
    assert found == (empty[0], empty[1].replace(nothing, canary(name)), empty[2])
    assert found[1].count(canary(name)) == (0 if "--json" in extra else 1)  # the echoed query


def test_cli_stats_and_public_search_never_print_a_canary(cli_db, capsys):
    outputs = [run(capsys, "stats", "--db", cli_db), run(capsys, "stats", "--db", cli_db, "--json")]
    outputs.append(hit := run(capsys, "search", f"{PUBLIC_WORD} merger plan board minutes",
                              "--db", cli_db, "--top-k", "50"))
    assert PUBLIC_WORD in hit[1]
    for code, out, err in outputs:
        assert code == 0
        assert not any(c in out + err for c in CANARIES)


@pytest.mark.parametrize("name", list(REFUSED))
def test_cli_ingest_refuses_a_malformed_label_and_writes_nothing(tmp_path, capsys, name):
    folder = write_docs(tmp_path / "docs", [], READ_AS_RESTRICTED)
    file_name, text, shown = REFUSED[name]
    (folder / file_name).write_text(text.format(body=body(name)), encoding="utf-8")
    db = tmp_path / "cli.db"
    code, out, err = run(capsys, "ingest", str(folder), "--db", str(db))
    assert code == 1 and out == ""
    assert file_name in err and shown in err
    assert canary(name) not in err and "harbour" not in err  # no document text on stderr
    assert not db.exists()  # the open documents, which are fine, were not written either


# ---------------------------------------------------------------- the static bundle


def _every_text_in_the_bundle(site: Path) -> list[bytes]:
    """Raw bytes of every file and zip member, plus every column of every row of every
    SQLite file read through SQLite (text that spans pages is whole here)."""
    blobs: list[bytes] = []
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        data = path.read_bytes()
        blobs.append(data)
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                blobs.extend(zf.read(member) for member in zf.namelist())
        if data.startswith(b"SQLite format 3\x00"):
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                tables = [r[0] for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")]
                for table in tables:
                    for row in conn.execute(f'SELECT * FROM "{table}"'):
                        blobs.extend(str(v).encode() for v in row)
            finally:
                conn.close()
    return blobs


@pytest.mark.cpython_only
def test_a_built_site_carries_no_canary_of_any_variant(tmp_path, tmp_path_factory):
    from _site import load_build_wasm, shared_wheels

    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    folder = write_docs(tmp_path / "docs", ALL, READ_AS_RESTRICTED)
    out = tmp_path / "site"
    bw.build_site([folder], out, wheel=wheel, micropip=micropip)
    blobs = _every_text_in_the_bundle(out)
    assert any(PUBLIC_WORD.encode() in b for b in blobs)  # reverse proof: text is searchable
    for word in CANARIES:
        assert not any(word.encode() in b for b in blobs), word


@pytest.mark.cpython_only
@pytest.mark.parametrize("name", list(REFUSED))
def test_a_build_with_a_malformed_label_is_refused_and_writes_nothing(
    tmp_path, tmp_path_factory, name
):
    from _site import load_build_wasm, shared_wheels

    bw = load_build_wasm()
    wheel, micropip = shared_wheels(tmp_path_factory)
    folder = write_docs(tmp_path / "docs", [], READ_AS_RESTRICTED)
    file_name, text, shown = REFUSED[name]
    (folder / file_name).write_text(text.format(body=body(name)), encoding="utf-8")
    out = tmp_path / "site"
    with pytest.raises(SensitivityError) as info:
        bw.build_site([folder], out, wheel=wheel, micropip=micropip)
    assert file_name in str(info.value) and shown in str(info.value)
    assert canary(name) not in str(info.value)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]  # no scratch left beside


# ---------------------------------------------------------------- the wire (endpoint side)

PADDED_RESTRICTED = [" RESTRICTED ", "RESTRICTED\n", "\tRestricted", "RESTRICTED\u200b",
                     "ＲＥＳＴＲＩＣＴＥＤ"]


@pytest.fixture(scope="module")
def endpoint():
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from _remote_server import EndpointServer

    from ragspine_lite.remote.server import ServerConfig, create_app

    with EndpointServer(create_app(ServerConfig())) as server:
        yield server


def post(endpoint, path: str, payload: dict) -> tuple[int, str]:
    from ragspine_lite.remote.errors import RemoteError
    from ragspine_lite.remote.transport import UrllibTransport, request_json

    try:
        request_json(UrllibTransport(), "POST", endpoint.url + path, payload, headers={},
                     timeout=10)
    except RemoteError as exc:
        return exc.status, str(exc)
    return 200, ""


@pytest.mark.cpython_only
@pytest.mark.parametrize("label", PADDED_RESTRICTED)
@pytest.mark.parametrize(
    ("path", "key", "extra"),
    [("/v1/rerank", "candidates", {"method": "colbert", "query": "q"}),
     ("/v1/embed", "inputs", {}),
     ("/v1/chat", "messages", {})],
)
def test_the_endpoint_refuses_every_spelling_of_restricted_with_422(
    endpoint, label, path, key, extra
):
    item = {"text": "x", "role": "user", "content": "x", "sensitivity": label}
    if key != "messages":
        item = {"text": "x", "sensitivity": label}
    status, message = post(endpoint, path, {**extra, key: [item]})
    assert status == 422 and "RESTRICTED" in message


@pytest.mark.cpython_only
@pytest.mark.parametrize("label", ["[RESTRICTED]", "RESTRICTED.", "SECRET", ""])
def test_the_endpoint_refuses_labels_outside_the_vocabulary_with_422(endpoint, label):
    status, message = post(endpoint, "/v1/embed", {"inputs": [{"text": "x", "sensitivity": label}]})
    assert status == 422 and "not a known label" in message and describe_value(label) in message
