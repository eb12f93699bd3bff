#!/usr/bin/env bash
# Set up and run the whole test suite: a venv with the package and its test extras, the
# pinned agent CLIs (npm and PyPI, into .clis/), then pytest. Safe to run again.
#
#   bash scripts/test.sh               # everything: a parallel pass, then the serial tests alone
#   bash scripts/test.sh -k kill -x    # with arguments: one plain pytest run with them
#
# The parallel pass spreads tests over AGENTMETER_TEST_WORKERS pytest-xdist workers (default
# 3: most tests wait on subprocesses, the scripted model server or dockerd rather than on a
# core, so a third worker still helps on a 2-core machine; measured figures in
# docs/testing.md). --dist loadgroup keeps tests that share an xdist_group on one worker.
# --max-worker-restart 0: under loadgroup, xdist 3.8 can wait forever after it replaces a
# crashed worker (pytest-xdist issues 1323, 1327, 1378); a crash must fail the run, not hang it.
# Tests marked `serial` act on machine-wide state and run afterwards, one at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
.venv/bin/agentmeter install-clis
bash scripts/harbor_venv.sh  # Harbor itself, for the ATIF and job-folder tests (Python >= 3.12)
if [ "$#" -gt 0 ]; then
  exec .venv/bin/pytest "$@"
fi
workers=${AGENTMETER_TEST_WORKERS:-3}
status=0
if [ "$workers" -gt 1 ]; then
  .venv/bin/pytest -n "$workers" --dist loadgroup --max-worker-restart 0 -m "not serial" || status=$?
else
  .venv/bin/pytest -m "not serial" || status=$?
fi
serial=0
.venv/bin/pytest -m serial || serial=$?
[ "$serial" -eq 5 ] && serial=0  # 5: no test is marked serial
[ "$status" -ne 0 ] && exit "$status"
exit "$serial"
