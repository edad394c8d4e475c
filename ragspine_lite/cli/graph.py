"""``ragspine-lite graph``: the knowledge-graph command (:mod:`ragspine_lite.graph.cli`)."""

from __future__ import annotations

from typing import Any

from ragspine_lite.cli.common import out, out_json


def register(sub: Any) -> None:
    """Add the ``graph`` subcommand."""
    from ragspine_lite.graph.cli import add_graph_command

    add_graph_command(sub, out=out, out_json=out_json)
