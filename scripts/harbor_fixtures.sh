#!/usr/bin/env bash
# Regenerate tests/fixtures/harbor-jobs/jobs/: job folders written by a real `harbor run`
# (PyPI harbor, pinned in scripts/harbor_venv.sh) on the task folders beside them, offline:
# Docker images FROM scratch, docker-compose v1 behind a `docker compose` shim, and Harbor's
# terminus-2 agent talking to our scripted model server on 127.0.0.1. Needs Docker, a Python
# 3.9 (docker-compose 1.29.2 does not build on newer ones; set PY39) and ~10 minutes.
#
#   oracle-mixed    oracle on hello (reward 1), half (reward.json 0.5), slow (AgentTimeoutError)
#   oracle-errored  oracle on a task without solution/solve.sh: the agent raises (FileNotFoundError)
#   oracle-steps    oracle on a multi-step task (steps/write, steps/append), each step verified
#   nop-fail        nop agent on hello: reward 0
#   broken-env      a Dockerfile whose RUN fails: an environment exception, no reward
#   terminus-solve  terminus-2 (model openai/gpt-4o-mini, so litellm prices it) solves hello:
#                   ATIF trajectory with per-step metrics, tokens and cost_usd in result.json
#   terminus-wrong  terminus-2 writes the wrong answer: reward 0, tokens kept
#   in-progress     a copy of a job folder taken while its second trial was still running
#
# Usage: harbor_fixtures.sh [JOB...]  (default: every job; only the named ones are replaced)
#
# Paths of the machine that ran it are replaced (/harbor-fixtures, /venv, /python) so no
# machine path is committed; nothing else is edited.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FIX=$ROOT/tests/fixtures/harbor-jobs
bash scripts/harbor_venv.sh
HARBOR_VENV=$(cd "${AGENTMETER_HARBOR_VENV:-.clis/harbor}" && pwd -P)
COMPOSE_VENV=${COMPOSE_VENV:-$ROOT/.clis/compose1}
if [ ! -x "$COMPOSE_VENV/bin/docker-compose" ]; then
  "${PY39:-python3.9}" -m venv "$COMPOSE_VENV"
  "$COMPOSE_VENV/bin/pip" install --quiet --disable-pip-version-check docker-compose==1.29.2 "docker==6.1.3" "requests<2.32"
fi
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/harbor-fixtures.XXXXXX")
MOCK_PID=""
cleanup() { [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

mkdir -p "$WORK/dockercfg/cli-plugins" "$WORK/img" "$WORK/home"
cp scripts/harbor/compose_v1_shim.sh "$WORK/dockercfg/cli-plugins/docker-compose"
sh scripts/harbor/make_rootfs.sh "$WORK/img"
docker build -q -t agentmeter-fixture/harbor-bashbox:1 "$WORK/img" >/dev/null
cp -r "$FIX/tasks" "$WORK/tasks"
cd "$WORK"
export HOME=$WORK/home DOCKER_CONFIG=$WORK/dockercfg HARBOR_TELEMETRY=0 LITELLM_LOCAL_MODEL_COST_MAP=True
export COMPOSE_V1=$COMPOSE_VENV/bin/docker-compose
harbor() { "$HARBOR_VENV/bin/harbor" run -p tasks -o jobs -y -q "$@" > "$WORK/last-run.txt" 2>&1 || { cat "$WORK/last-run.txt"; exit 1; }; }

start_mock() {  # the scripted model server playing $1 for every key
  PYTHONPATH=$ROOT "$PYTHON" -m agentmeter_tui mockllm serve --scenario "$1" > "$WORK/mock.out" &
  MOCK_PID=$!
  for _ in $(seq 50); do grep -q listening "$WORK/mock.out" && break; sleep 0.2; done
  MOCK_URL=$(sed -n 's/^listening on //p' "$WORK/mock.out")
}
stop_mock() { kill "$MOCK_PID"; wait "$MOCK_PID" 2>/dev/null || true; MOCK_PID=""; }

ALL="oracle-mixed oracle-errored oracle-steps nop-fail broken-env terminus-solve terminus-wrong in-progress"
JOBS=${*:-$ALL}
want() { case " $JOBS " in *" $1 "*) return 0;; *) return 1;; esac; }
want oracle-mixed && harbor -i hello -i half -i slow -a oracle -n 3 --job-name oracle-mixed
want oracle-errored && harbor -i no-solution -a oracle --job-name oracle-errored
want oracle-steps && harbor -i two-steps -a oracle --job-name oracle-steps
want nop-fail && harbor -i hello -a nop --job-name nop-fail
want broken-env && harbor -i broken -a oracle --job-name broken-env
for case in solve wrong; do
  want "terminus-$case" || continue
  start_mock "$FIX/scenarios/$case.toml"
  OPENAI_API_KEY=fixture-key harbor -i hello -a terminus-2 -m openai/gpt-4o-mini --ak "api_base=$MOCK_URL/v1" \
    --job-name "terminus-$case"
  stop_mock
done
# A job still running: copy its folder once the first trial has finished and the second not.
want in-progress && { "$HARBOR_VENV/bin/harbor" run -p tasks -o jobs -y -q -i hello -i slow -a oracle -n 1 --job-name running \
  > "$WORK/running.txt" 2>&1 &
RUN_PID=$!
until "$PYTHON" - <<'PY'
import json, pathlib, sys
trials = [p for p in pathlib.Path("jobs/running").glob("*/") if p.is_dir()]
done = [p for p in trials if (p / "result.json").exists()
        and json.loads((p / "result.json").read_text() or "{}").get("finished_at")]
sys.exit(0 if len(trials) >= 2 and len(done) == 1 else 1)
PY
do sleep 0.3; done
cp -r jobs/running jobs/in-progress
wait "$RUN_PID"
rm -rf jobs/running
}

PYBASE=$("$HARBOR_VENV/bin/python" -c 'import sys; print(sys.base_prefix)')
"$PYTHON" - "$WORK" "$HARBOR_VENV" "$PYBASE" "$ROOT" <<'PY'
import pathlib, re, sys
work, venv, base, root = sys.argv[1:]
swaps = [(work, "/harbor-fixtures"), (venv, "/venv"), (base, "/python"), (root, "/repo")]
for path in pathlib.Path(work, "jobs").rglob("*"):
    if path.is_file():
        data = path.read_bytes()
        for old, new in swaps:
            data = data.replace(old.encode(), new.encode())
        data = re.sub(rb"/tmp/tmp\w+", b"/harbor-tmp", data)  # Harbor's temporary compose files
        path.write_bytes(data)
PY
if grep -rlE '/(work|root|tmp)/' jobs; then
  trap - EXIT; echo "machine paths left in the files above (kept $WORK)" >&2; exit 1
fi
mkdir -p "$FIX/jobs"
for job in jobs/*/; do
  name=$(basename "$job")
  rm -rf "${FIX:?}/jobs/$name"
  cp -r "$job" "$FIX/jobs/$name"
done
echo "wrote $(ls jobs | wc -l) job folder(s) to tests/fixtures/harbor-jobs/jobs"
