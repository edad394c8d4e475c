"""``ragspine-lite serve-remote``: the remote endpoint (rerank, embed, visual; ``[server]``)."""

from __future__ import annotations

import argparse
from typing import Any

from ragspine_lite.cli.common import EXIT_OK, UsageError


def register(sub: Any) -> None:
    """Add the ``serve-remote`` subcommand."""
    from ragspine_lite.remote.server.launch import SERVE_REMOTE_EPILOG, add_serve_remote_arguments

    p = sub.add_parser(
        "serve-remote", help="serve the remote endpoint (rerank, embed, visual; [server] extra)",
        epilog=SERVE_REMOTE_EPILOG,
    )
    add_serve_remote_arguments(p)
    p.set_defaults(handler=_cmd_serve_remote)


def _cmd_serve_remote(args: argparse.Namespace) -> int:
    from ragspine_lite.remote.server.launch import config_from_args, serve

    try:
        config = config_from_args(args, args.settings)
    except ValueError as exc:  # bad settings or a non-loopback host without a token
        raise UsageError(str(exc)) from None
    serve(config, workers=args.workers, preload=not args.no_preload, log_level=args.log_level)
    return EXIT_OK
