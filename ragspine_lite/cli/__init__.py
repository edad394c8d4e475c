"""The ``ragspine-lite`` command: ingest documents, search them, show store stats, run a demo.

    ragspine-lite ingest docs/ --db chunks.db
    ragspine-lite search "Hong Kong revenue 2024" --db chunks.db --filter period=between:2023,2024
    ragspine-lite stats --db chunks.db
    ragspine-lite demo

Environment variables are read once, by :func:`main`, into the frozen
:class:`~ragspine_lite.common.settings.Settings` every command receives (``args.settings``):
``RAGSPINE_RETRIEVAL_MODE`` (``--mode``), ``RAGSPINE_EMBEDDING_BACKEND`` then
``RAGSPINE_EMBEDDING`` (``--embedding``; default ``auto``: the ONNX model when the
``[embed-onnx]`` extra is installed, else pure BM25), ``RAGSPINE_CHUNKER`` (``--chunker``);
for ``search``'s LLM query layers ``RAGSPINE_QUERY_TRANSFORM`` (``--query-transform``),
``RAGSPINE_QUERY_DECOMPOSE`` (``--decompose``), ``RAGSPINE_ADAPTIVE`` (``--adaptive``),
``RAGSPINE_LLM_URL`` / ``RAGSPINE_LLM_MODEL`` (``--llm-url`` / ``--llm-model``),
``RAGSPINE_LLM_API_KEY``, ``RAGSPINE_LLM_TIMEOUT``; ``RAGSPINE_RERANKER`` (``--reranker``),
``RAGSPINE_PERSISTENCE_POLICY``, ``RAGSPINE_COMPANY_CONFIG`` (glossary of the rewriter, the
filter extractor and the query layers), ``RAGSPINE_FILTER_EXTRACTOR``,
``RAGSPINE_VECTOR_STORE`` (with ``RAGSPINE_PG_URL``) and ``RAGSPINE_LIBRARY_ROUTER`` (several
``--db``): docs/environment.md.

Hybrid mode keeps chunk vectors in the chunk database itself (table ``ragspine_vector``, one
set per embedding model; RESTRICTED chunks are never persisted): ``ingest`` embeds the new
chunks, and ``search`` embeds only the query (plus any chunk whose vector is missing or out
of date).

``search`` and ``stats`` only read: they open the chunk store read-only (a read-only file or
directory is fine) and never write to it. Hybrid ``search`` stores missing chunk vectors only
when the file can be written.

Exit codes: 0 success, 1 runtime error (missing or unreadable files, bad front matter or
sensitivity labels, database errors), 2 usage error (bad options, filters, specs). Errors are
one line on stderr prefixed ``ragspine-lite: error:``. RESTRICTED chunks are never printed:
search goes through the agent link exit (``build_narrative_retriever``), and its output says
nothing about what was held back, so a query matching only RESTRICTED text prints exactly
what a query matching nothing prints. Control characters from documents (terminal escape
sequences, bidi overrides) are printed escaped, never raw.

One module per command (``ingest``, ``search``, ``stats``, ``demo``, ``site`` for
``build-site``, ``remote`` for ``serve-remote``, ``graph``), each registering its own
subparser; :mod:`~ragspine_lite.cli.common` holds the shared options and output helpers and
:mod:`~ragspine_lite.cli.stores` how the commands open chunk databases. The commands are a
thin layer over the library.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Sequence

from ragspine_lite.cli import demo, graph, ingest, remote, search, site, stats
from ragspine_lite.cli.common import (
    DEFAULT_CLI_TOP_K,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_USAGE,
    PROG,
    Parser,
    UsageError,
    err,
    one_line,
    read_settings,
    samples_dir,
    silence_stdout,
)
from ragspine_lite.common.errors import RagspineError

__all__ = ["DEFAULT_CLI_TOP_K", "PROG", "build_parser", "main", "samples_dir"]

#: The subcommands in the order ``--help`` lists them; each module registers its own.
COMMANDS = (ingest, search, stats, demo, site, remote, graph)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for all subcommands (errors raise instead of exiting)."""
    parser = Parser(
        prog=PROG,
        description="Citation-honest hybrid retrieval over a versioned SQLite chunk store.",
        epilog="Exit codes: 0 ok, 1 runtime error, 2 usage error.",
    )
    from ragspine_lite import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (never raises for user errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
        args.settings = read_settings()  # the environment, read once for the command
        return int(args.handler(args))
    except UsageError as exc:
        err(f"error: {exc}")
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly
        silence_stdout()
        return EXIT_RUNTIME
    except SystemExit as exc:  # --help / --version
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_RUNTIME)
    except (ValueError, OSError, sqlite3.Error, RagspineError, ImportError) as exc:
        err(f"error: {one_line(exc)}")
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 130
