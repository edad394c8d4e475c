"""What the ragspine_lite wheel weighs, part by part (the site runtime it carries, the code).

    python -m build --wheel -o dist/ .        # after npm ci: the hook copies the site runtime
    python bench/wheel_size.py dist/ragspine_lite-*.whl

Prints one row per part: files, bytes unpacked, bytes in the wheel (compressed).
"""

from __future__ import annotations

import sys
import zipfile
from collections import defaultdict

PARTS = (
    ("Pyodide core", "ragspine_lite/bundle/site_runtime/pyodide/"),
    ("onnxruntime-web (hybrid sites)", "ragspine_lite/bundle/site_runtime/ort/"),
    ("web runtime (.mjs, pages)", "ragspine_lite/bundle/site_runtime/web/"),
    ("micropip wheel", "ragspine_lite/bundle/site_runtime/wheels/"),
    ("MiniLM vocabulary + licence", "ragspine_lite/vector/minilm/"),
    ("sample corpus", "ragspine_lite/samples/"),
)


def main(path: str) -> None:
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            part = next((name for name, prefix in PARTS if info.filename.startswith(prefix)),
                        "code and metadata")
            row = rows[part]
            row[0] += 1
            row[1] += info.file_size
            row[2] += info.compress_size
    print(f"{'part':<32} {'files':>5} {'unpacked MB':>12} {'in wheel MB':>12}")
    order = [name for name, _ in PARTS] + ["code and metadata"]
    for part in [p for p in order if p in rows]:
        files, unpacked, packed = rows[part]
        print(f"{part:<32} {files:>5} {unpacked / 1e6:>12.2f} {packed / 1e6:>12.2f}")
    total = [sum(r[i] for r in rows.values()) for i in range(3)]
    print(f"{'total':<32} {total[0]:>5} {total[1] / 1e6:>12.2f} {total[2] / 1e6:>12.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python bench/wheel_size.py WHEEL")
    main(sys.argv[1])
