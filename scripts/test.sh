#!/usr/bin/env bash
# Set up and run the whole test suite: a venv with the package and its test extras, the
# pinned agent CLIs (npm and PyPI, into .clis/), then pytest. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
.venv/bin/agentmeter install-clis
bash scripts/harbor_venv.sh  # Harbor itself, for the ATIF and job-folder tests (Python >= 3.12)
exec .venv/bin/pytest "$@"
