"""Cut the small test slices under tests/data/ from the developer retrieval sets.

    python tools/make_test_slices.py DATA_DIR

DATA_DIR holds squad_train/ and cmrc_train/ (corpus.jsonl, queries.jsonl, qrels.tsv).
The selection is deterministic (first queries in file order, their paragraphs, then the
first other paragraphs in file order), so re-running gives byte-identical files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SLICES = {
    # name: (source set, queries kept, corpus size)
    "squad_slice": ("squad_train", 120, 400),
    "cmrc_slice": ("cmrc_train", 150, 256),
}


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def make_slice(src: Path, dst: Path, n_queries: int, n_corpus: int) -> None:
    corpus = _read_jsonl(src / "corpus.jsonl")
    queries = _read_jsonl(src / "queries.jsonl")[:n_queries]
    lines = (src / "qrels.tsv").read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], [r.split("\t") for r in lines[1:] if r]
    keep_q = {q["id"] for q in queries}
    qrels = [r for r in rows if r[0] in keep_q]
    relevant = {r[1] for r in qrels}
    chosen = [d for d in corpus if d["id"] in relevant]
    for d in corpus:
        if len(chosen) >= n_corpus:
            break
        if d["id"] not in relevant:
            chosen.append(d)
    chosen_ids = {d["id"] for d in chosen}
    chosen = [d for d in corpus if d["id"] in chosen_ids]  # keep source order
    dst.mkdir(parents=True, exist_ok=True)
    with (dst / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in chosen:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    with (dst / "queries.jsonl").open("w", encoding="utf-8") as f:
        for q in queries:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    (dst / "qrels.tsv").write_text(
        "\n".join([header, *("\t".join(r) for r in qrels)]) + "\n", encoding="utf-8"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    data = Path(argv[0])
    out = Path(__file__).resolve().parent.parent / "tests" / "data"
    for name, (source, nq, nc) in SLICES.items():
        make_slice(data / source, out / name, nq, nc)
        print(f"{name}: from {source}, {nq} queries, {nc} paragraphs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
