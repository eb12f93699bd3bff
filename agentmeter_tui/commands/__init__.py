"""Subcommands of ``agentmeter``: one module each, with ``register(subparsers)``.

Convention: ``register`` adds a parser and sets ``handler=<function(args) -> int>``; every
command that touches a store takes ``--db PATH`` (see :func:`add_db_argument`).
"""

from __future__ import annotations

import argparse

from ..core.paths import DEFAULT_DB


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=DEFAULT_DB, metavar="PATH",
                        help=f"the SQLite store (default ./{DEFAULT_DB})")
