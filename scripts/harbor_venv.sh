#!/usr/bin/env bash
# Harbor (PyPI `harbor`, pinned) in its own venv under .clis/harbor: the tests validate our
# ATIF files against Harbor's own trajectory model and scripts/harbor_fixtures.sh drives
# `harbor run`. Harbor needs Python >= 3.12; the project's venv may be older. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${HARBOR_VERSION:-0.26.0}
VENV=.clis/harbor
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import harbor.models.trajectories" 2>/dev/null; then
  exit 0
fi
PY=${HARBOR_PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python3.13 python3.12 "$HOME/.pyenv/versions/3.12.1/bin/python3.12" "$HOME/.pyenv/versions/3.13.0/bin/python3.13"; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      PY=$candidate; break
    fi
  done
fi
if [ -z "$PY" ]; then
  echo "harbor_venv: no Python >= 3.12 found (set HARBOR_PYTHON)" >&2
  exit 1
fi
mkdir -p .clis
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "harbor==$VERSION"
