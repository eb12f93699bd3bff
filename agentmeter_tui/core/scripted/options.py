"""Command-line options of ``serve``, kept apart from the server so that registering the
``agentmeter mockllm`` command imports nothing but argparse."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", metavar="FILE",
                        help="scenario played for API keys nobody registered (otherwise they get 401)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0 = any free port; default)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--log", metavar="DIR", help="also write every request as JSONL, a file per session")
    parser.add_argument("--parent-pid", type=int, metavar="PID",
                        help="exit when this process (the one that started the server) is gone")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--control-key-file", metavar="FILE",
                      help="the key of the /_scripted/ control endpoints, the first line of FILE "
                           "(without it or --control-key-stdin, they answer nobody)")
    keys.add_argument("--control-key-stdin", action="store_true",
                      help="read that key as the first line of stdin (how the runner gives it)")
