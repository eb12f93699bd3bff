#!/usr/bin/env bash
# Harbor (PyPI `harbor`, pinned) in its own venv under .clis/harbor: the tests validate our
# ATIF files against Harbor's own trajectory model and scripts/harbor_fixtures.sh drives
# `harbor run`. Harbor needs Python >= 3.12; the project's venv may be older. Safe to rerun.
# AGENTMETER_HARBOR_VENV=DIR puts it elsewhere (the tests and the fixture script read it too).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${HARBOR_VERSION:-0.26.0}
VENV=${AGENTMETER_HARBOR_VENV:-.clis/harbor}
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
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"  # two runs at once would install over each other
flock 9
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import harbor.models.trajectories" 2>/dev/null; then
  exit 0
fi
"$PY" -m venv --clear "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "harbor==$VERSION"
