"""The worker's instant lane (web/ragspine-instant.mjs) against the Python path, bit for bit.

The same bundle bytes are searched by :class:`BundleSearcher` (the reference) and by the
JavaScript lane under Node: thousands of generated queries (English, Chinese, mixed,
punctuation, emoji, astral and case-folding oddities, very long), every id, score, order,
section, URL, excerpt and highlight span compared; the tokenizer is compared on every code
point, and the string helpers (glossary variants, synonyms, highlights, excerpts) on random
texts full of Markdown and Unicode edge cases, and the fail-closed label predicate.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import sqlite3
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from _corpus import load_slice

from ragspine_lite.bundle.export import assign_urls, export_store, load_corpus, write_pages
from ragspine_lite.bundle.manifest import BUNDLE_FORMAT_VERSION
from ragspine_lite.bundle.runtime import BundleSearcher, excerpt, highlight_spans, with_synonyms
from ragspine_lite.bundle.shards import DirectoryFiles, ShardedBundle, glossary_lists, write_shards
from ragspine_lite.common.glossary import DEFAULT_GLOSSARY
from ragspine_lite.common.sensitivity import is_restricted
from ragspine_lite.lexical.retrieval import GlossaryQueryRewriter
from ragspine_lite.lexical.scoring import bm25_idf
from ragspine_lite.lexical.tokenizer import tokenize

pytestmark = pytest.mark.cpython_only

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "tests" / "_instant_node.mjs"
NODE = shutil.which("node")

# Characters that trip ports: case mappings to ASCII (Kelvin, dotted I, long s), final sigma,
# fullwidth forms, Python-only whitespace (\x1c-\x1f, \x85), BOM, joiners, combining marks,
# astral letters and emoji, non-ASCII digits, CJK compatibility ideographs.
ODD = [
    *"KİſΣσςＡａ１\x1c\x1d\x85\xa0\u3000\ufeff\u200b\u200d\u0301ı",
    "\U0001d400", "\U0001f600", "\U0001f469\u200d\U0001f4bb", "\u0661", "\u0966", "\uf900",
    "\u4dbf", "\u3042", "\uac00", "ß", "ﬁ", "\u2028", "\t", "\n",
]
PUNCT = list(".,;:!?'\"()[]{}<>/\\|@#$%^&*-_=+~`，。！？、《》“”")
# Sensitivity labels: the vocabulary in disguise (spaces, case, width, format characters) and
# what is outside it (fails closed).
LABELS = [" public ", "PUBLIC\u200b", "\uff30\uff35\uff22\uff2c\uff29\uff23", "\tinternal\n",
          "Confidential", "RESTRICTED", "restricted", "secret", "", "confidential.", "İnternal",
          "INTERNAL\ufeff", "pub lic"]
GLOSSARY_TERMS = [t for t, _ in (*DEFAULT_GLOSSARY.metric_synonyms.items(),
                                  *DEFAULT_GLOSSARY.entity_synonyms.items())]


def _node() -> str:
    if NODE is None:
        pytest.skip("node is not installed")
    return NODE


def _run_node(*args: str, timeout: int = 900) -> Any:
    run = subprocess.run([_node(), str(DRIVER), *args], capture_output=True, text=True,
                         timeout=timeout, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def _odd_doc(rng: random.Random, i: int) -> str:
    """A Markdown page mixing markup, glossary terms and odd characters."""
    words = [w for row in load_slice("squad_slice").corpus[i : i + 3] for w in row["text"].split()]
    zh = load_slice("cmrc_slice").corpus[i]["text"]

    def line() -> str:
        parts = [*rng.sample(words, 8), rng.choice(GLOSSARY_TERMS), rng.choice(ODD), zh[:12]]
        rng.shuffle(parts)
        sep = rng.choice([" ", "  ", " ", "\u3000", "\xa0", "\x1c"])
        text = sep.join(parts)
        mark = rng.choice(["", "**", "*", "_", "`", "__"])
        return rng.choice([
            text, f"- {text}", f"{rng.randint(1, 12)}. {text}", f"> {text}", f"\u0661. {text}",
            f"{mark}{text}{mark}", f"[{text[:20]}](https://x.test/{i}) {text[20:]}",
            f"![alt {text[:10]}](img.png) {text}", f"<b>{text}</b> <br/>", f"*{text[:9]}* _x_ a*b",
            f"```{rng.choice(['', 'javascript', 'py title=x'])}\n{text}\n```",
            f"  ~~~~\n{text}\n~~~~ info", f"``` a`b\n{text}",
        ])

    out = [f"# Odd page {i} {rng.choice(ODD)}", ""]
    for s in range(rng.randint(2, 4)):
        out += [f"{'#' * rng.randint(2, 3)} Section {s} {rng.choice(GLOSSARY_TERMS)}", ""]
        out += [line() for _ in range(rng.randint(1, 6))] + [""]
    return "\n".join(out)


def _write_docs(folder: Path) -> None:
    rng = random.Random(28)
    folder.mkdir(parents=True)
    rows = load_slice("squad_slice").corpus[:150] + load_slice("cmrc_slice").corpus[:90]
    for i, row in enumerate(rows):
        text = row["text"]
        body = f"# {row.get('title') or row['id']}\n\n{text}\n\n## More {i}\n\n{text[:300]}\n"
        (folder / f"{row['id']}.md").write_text(f"---\ntitle: Page {i}\n---\n{body}", "utf-8")
    for i in range(70):
        (folder / f"odd{i:02d}.md").write_text(_odd_doc(rng, i), "utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A built bundle (URLs, sections, small shards so a query reads several files)."""
    tmp = tmp_path_factory.mktemp("instant")
    _write_docs(tmp / "docs")
    docs = load_corpus([tmp / "docs"])
    assign_urls(docs)
    db = tmp / "chunks.db"
    export_store(docs, db)
    with sqlite3.connect(db) as conn:
        write_pages(conn, docs)
    patch = pytest.MonkeyPatch()
    patch.setattr("ragspine_lite.bundle.shard_writer.TERM_SHARD_BYTES", 6000)
    patch.setattr("ragspine_lite.bundle.shard_writer.FRAGMENT_BYTES", 6000)
    patch.setattr("ragspine_lite.bundle.shard_writer.LENGTHS_FILE_MIN_DF", 16)  # common terms'
    try:
        report = write_shards(db, tmp / "site")
    finally:
        patch.undo()
    (tmp / "site" / "manifest.json").write_text(json.dumps(
        {"format_version": BUNDLE_FORMAT_VERSION, "entry": {"index": report.header}}), "utf-8")
    return tmp / "site"


def _vocabulary() -> tuple[list[str], list[str]]:
    en = sorted({w for row in load_slice("squad_slice").corpus for w in row["text"].split()})
    zh_text = "".join(row["text"] for row in load_slice("cmrc_slice").corpus)
    zh = [zh_text[i : i + n] for i in range(0, len(zh_text) - 6, 7) for n in (1, 2, 4)]
    return en, zh


def _queries(n: int, seed: int = 2028) -> list[str]:
    """``n`` generated queries of every kind the lane must answer like Python."""
    rng = random.Random(seed)
    en, zh = _vocabulary()

    def words(k: int) -> list[str]:
        return [rng.choice([rng.choice(en), rng.choice(en).upper(), rng.choice(en).title()])
                for _ in range(k)]

    kinds = [
        lambda: " ".join(words(rng.randint(1, 5))),
        lambda: "".join(rng.choice(zh) for _ in range(rng.randint(1, 4))),
        lambda: " ".join([*words(2), rng.choice(zh), rng.choice(GLOSSARY_TERMS)]),
        lambda: rng.choice(GLOSSARY_TERMS) + rng.choice(["", " ", "s", "_x", "的"])
        + rng.choice(GLOSSARY_TERMS),
        lambda: rng.choice(PUNCT).join(words(rng.randint(1, 4))) + rng.choice(PUNCT),
        lambda: " ".join(words(2)) + rng.choice(ODD) + rng.choice(zh) + rng.choice(ODD),
        lambda: " ".join(words(rng.randint(60, 200))) + "".join(rng.choice(zh) for _ in range(40)),
        lambda: "".join(rng.choice(ODD + PUNCT) for _ in range(rng.randint(1, 6))),
        lambda: "".join(chr(rng.randint(1, 0x10FFFF)) for _ in range(rng.randint(1, 8)))
        + " " + rng.choice(en),
        lambda: rng.choice(["", " ", "\t\n", "\u3000", "\x1c", "\ufeff"]),
    ]
    return [rng.choice(kinds)() for _ in range(n)]


def _cases_file(tmp_path: Path, payload: Any) -> Path:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(payload, ensure_ascii=True), "ascii")
    return path


def _score_bits(result: dict[str, Any]) -> list[str]:
    scores = [h["snippet"]["scores"] for h in result["hits"]]
    return [float(s[k]).hex() for s in scores for k in ("bm25", "fused")]


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_generated_queries_match_python_bit_for_bit(site: Path, tmp_path: Path) -> None:
    rng = random.Random(7)
    cases = [{"query": q, "topK": rng.choice([1, 3, 5, 10, 10, 40, 200]),
              "highlight": rng.random() < 0.85} for q in _queries(3000)]
    searcher = BundleSearcher.from_files(DirectoryFiles(site))
    expected = []
    for c in cases:
        out = searcher.search(c["query"], top_k=c["topK"], highlight=c["highlight"]).as_dict()
        del out["took_ms"]
        expected.append(json.loads(json.dumps(out)))
    found = _run_node("search", str(site), str(_cases_file(tmp_path, cases)))
    assert len(found) == len(expected)
    with_hits = 0
    for c, want, got in zip(cases, expected, found, strict=True):
        assert got == want, f"query {c['query']!r} (topK {c['topK']}): JS {got} != Python {want}"
        assert _score_bits(got) == _score_bits(want), c["query"]
        with_hits += bool(want["hits"])
    assert with_hits > 2000  # the queries do reach the corpus


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_string_helpers_match_python_on_random_texts(site: Path, tmp_path: Path) -> None:
    rng = random.Random(11)
    docs = sorted((site.parent / "docs").glob("*.md"))
    queries = _queries(1500, seed=99)
    cases = []
    for i, query in enumerate(queries):
        text = docs[i % len(docs)].read_text("utf-8").split("---\n")[-1]
        lines = text.split("\n")
        start = rng.randrange(len(lines))
        text = "\n".join(lines[start : start + rng.randint(1, 12)])
        label = rng.choice([*LABELS, query, text[:12]])
        cases.append(
            {"query": query, "text": text, "startLine": rng.randint(-1, 5), "label": label}
        )
    payload = {"glossary": glossary_lists(), "cases": cases}
    found = _run_node("functions", str(_cases_file(tmp_path, payload)))
    rewriter = GlossaryQueryRewriter()
    for c, got in zip(cases, found, strict=True):
        q, text = c["query"], c["text"]
        want = {
            "restricted": is_restricted(c["label"]),
            "variants": list(dict.fromkeys(rewriter.rewrite(q))),
            "synonyms": with_synonyms(q),
            "spans": highlight_spans(q, text),
            "excerpt": excerpt(q, text, start_line=c["startLine"]),
            "tokens": tokenize(text),
        }
        assert got == json.loads(json.dumps(want)), (q, text)


def _ranges(predicate: Any) -> list[list[int]]:
    out: list[list[int]] = []
    for cp in range(0x110000):
        if predicate(chr(cp)):
            if out and out[-1][1] == cp:
                out[-1][1] = cp + 1
            else:
                out.append([cp, cp + 1])
    return out


def _members(ranges: list[list[int]]) -> set[int]:
    return {cp for a, b in ranges for cp in range(a, b)}


@pytest.mark.slow  # the slow lane: scripts/test.sh --quick skips it
def test_tokenizer_and_character_classes_on_every_code_point() -> None:
    block = 4096
    found = _run_node("codepoints", "0", str(0x110000), str(block))
    for start, digest in found["hashes"]:
        h = hashlib.sha256()
        for cp in range(start, min(start + block, 0x110000)):
            c = chr(cp)
            tokens = json.dumps(tokenize(f"A{c}b{c}{c}中{c}Z9"), ensure_ascii=False,
                                separators=(",", ":"))
            h.update(f"{cp}:{tokens}\n".encode())
        assert h.hexdigest() == digest, f"tokenize differs in code points {start:#x}+{block}"
    word = re.compile(r"\w")
    space = re.compile(r"\s")
    assert _members(found["space"]) == _members(_ranges(space.match))
    # \w: equal on every code point this Python's Unicode database assigns; the rest (assigned
    # by a newer Unicode, e.g. Pyodide's Python 3.14) follow the browser's newer tables.
    js_word, py_word = _members(found["word"]), _members(_ranges(word.match))
    differ = {cp for cp in js_word ^ py_word if unicodedata.category(chr(cp)) != "Cn"}
    assert not differ, sorted(differ)[:20]


def test_python_scores_with_the_idf_stored_at_build_time(site: Path) -> None:
    searcher = BundleSearcher.from_files(DirectoryFiles(site))
    bundle = searcher.sharded
    assert bundle is not None
    postings = bundle.postings("school")
    assert postings is not None and postings.df > 0
    assert postings.idf == bm25_idf(bundle.n_docs, postings.df)  # the very expression, stored
    before = searcher.search("school", top_k=3, highlight=False).hits
    postings.idf = postings.idf * 2  # the reader scores with what the shard holds
    after = searcher.search("school", top_k=3, highlight=False).hits
    bm25 = [h["snippet"]["scores"]["bm25"] for h in before]
    assert bm25 and [h["snippet"]["scores"]["bm25"] for h in after] == [2 * s for s in bm25]


def test_header_carries_the_rewriter_glossary(site: Path) -> None:
    bundle = ShardedBundle(DirectoryFiles(site))
    from ragspine_lite.bundle.shards import unpack

    meta, _ = unpack((site / bundle.header_path).read_bytes())
    assert meta["glossary"] == {
        "metric": [list(kv) for kv in DEFAULT_GLOSSARY.metric_synonyms.items()],
        "entity": [list(kv) for kv in DEFAULT_GLOSSARY.entity_synonyms.items()],
    }
