"""``python -m ragspine_lite.cli`` runs the ``ragspine-lite`` command line."""

from __future__ import annotations

from ragspine_lite.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
