"""``agentmeter install-clis [--only PKG@VER] [--dir DIR]``: install every registered adapter's
pinned agent CLI into the project-local folder (npm packages with one ``npm install``, each
PyPI package in its own venv); what is already there at its version is left alone. Then the
runtime bundle that runs them inside any glibc image is assembled (``core/install/clisbundle.py``).
Exit 0 when every CLI asked for is in place, 1 when an install failed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..core.install import clisbundle, installer
from ..core.paths import default_clis_root


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "install-clis", help="install the pinned agent CLIs (into .clis in a checkout, else the user data folder)",
        description="Install every registered adapter's agent CLI at its pinned version: npm packages into "
                    "DIR/node_modules, PyPI packages each into its own venv DIR/<adapter>. Nothing is done for "
                    "a CLI already installed at that version.")
    parser.add_argument("--only", action="append", metavar="PKG[@VER]",
                        help="install just this package (or adapter name), at VER if given (repeatable)")
    parser.add_argument("--dir", metavar="DIR", help="install root (default: $AGENTMETER_CLIS_DIR, else .clis in a checkout, else "
                        "$XDG_DATA_HOME/agentmeter/clis)")
    parser.add_argument("--python", metavar="PATH", help="the Python for PyPI CLIs' venvs (default: found on "
                                                         "PATH or under pyenv)")
    parser.add_argument("--check", action="store_true", help="install nothing; exit 1 if anything is missing")
    parser.set_defaults(handler=install_command)


def install_command(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve() if args.dir else default_clis_root()
    try:
        wanted, skipped = installer.targets(args.only)
    except installer.InstallError as exc:
        print(f"agentmeter install-clis: {exc}", file=sys.stderr)
        return 2
    for name in skipped:
        print(f"skipped adapter {name}", file=sys.stderr)
    missing = []
    for target in wanted:
        have = installer.installed_version(root, target)
        state = "ok" if have == target.spec.version else f"installed {have}" if have else "missing"
        print(f"{target.adapter:<12} {target.spec.package}@{target.spec.version} ({target.spec.registry}): {state}")
        if have != target.spec.version:
            missing.append(target)
    if not missing:
        print(f"all {len(wanted)} CLI(s) in place under {root}")
        return 0 if args.check else _bundle(root)
    if args.check:
        print(f"{len(missing)} CLI(s) to install: agentmeter install-clis", file=sys.stderr)
        return 1
    started = time.monotonic()
    try:
        npm = [t for t in missing if t.spec.registry == "npm"]
        if npm:
            installer.npm_install(root, npm)
        for target in (t for t in missing if t.spec.registry == "pypi"):
            python, version = installer.find_python(target.spec.python or "3", args.python)
            print(f"{target.adapter}: Python {version} at {python}", file=sys.stderr)
            installer.pypi_install(root, target, python)
    except installer.InstallError as exc:
        print(f"agentmeter install-clis: {exc}", file=sys.stderr)
        return 1
    wrong = [(t, installer.installed_version(root, t)) for t in missing]
    wrong = [(t, have) for t, have in wrong if have != t.spec.version]
    for target, have in wrong:
        print(f"agentmeter install-clis: {target.spec.package}: expected {target.spec.version} under {root}, "
              f"found {have or 'nothing'}", file=sys.stderr)
    if wrong:
        return 1
    print(f"installed {len(missing)} CLI(s) under {root} in {time.monotonic() - started:.0f} s")
    return _bundle(root)


def _bundle(root: Path) -> int:
    """The runtime bundle that lets the CLIs run inside images without node or Python. Without
    it the CLIs still run locally and over ssh, so a failure warns instead of failing."""
    try:
        clisbundle.assemble(root, log=lambda text: print(text, file=sys.stderr, flush=True))
    except (clisbundle.BundleError, OSError) as exc:
        print(f"agentmeter install-clis: warning: no runtime bundle for containers ({exc}); the docker "
              f"sandbox can then run only CLIs whose runtime the task's image has", file=sys.stderr)
    return 0
