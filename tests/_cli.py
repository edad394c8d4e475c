"""Shared helpers of the CLI tests: a clean edge environment and one-call runs."""

from __future__ import annotations

import os

from ragspine_lite import cli


def clean_edge_env(monkeypatch) -> None:
    """No RAGSPINE_* variables, and no embedding backend unless a test asks for one."""
    for name in list(os.environ):
        if name.startswith("RAGSPINE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "none")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``ragspine-lite ARGV`` in process → (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
