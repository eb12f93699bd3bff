#!/bin/bash
# A `docker compose` (v2 CLI plugin) front for docker-compose 1.29.2 (PyPI), used only to run
# Harbor offline for scripts/harbor_fixtures.sh: no compose v2 binary is obtainable here.
# v1 has no `up --wait` (dropped), allocates a TTY on `exec` unless -T (added), and has no
# `compose cp` (mapped onto `docker cp` of the service's container).
if [ "$1" = "docker-cli-plugin-metadata" ]; then
  echo '{"SchemaVersion":"0.1.0","Vendor":"agentmeter","Version":"v2.99.0-shim","ShortDescription":"compose v1 shim"}'
  exit 0
fi
[ "$1" = "compose" ] && shift
V1="${COMPOSE_V1:?set COMPOSE_V1 to the docker-compose v1 binary}"
global=(); project=""
while [ $# -gt 0 ]; do
  case "$1" in
    --project-name|-p) project="$2"; global+=("-p" "$2"); shift 2;;
    --project-directory|-f|--file|--env-file) global+=("$1" "$2"); shift 2;;
    --ansi|--progress) shift 2;;
    -*) global+=("$1"); shift;;
    *) break;;
  esac
done
sub="$1"; shift
args=()
case "$sub" in
  exec)
    for a in "$@"; do if [ "$a" = "-T" ] || [ "$a" = "--no-TTY" ]; then exec "$V1" "${global[@]}" exec "$@"; fi; done
    exec "$V1" "${global[@]}" exec -T "$@";;
  up)
    for a in "$@"; do [ "$a" = "--wait" ] || args+=("$a"); done
    exec "$V1" "${global[@]}" up "${args[@]}";;
  cp)
    cid=$(docker ps -aq --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=main" | head -1)
    for a in "$@"; do case "$a" in main:*) args+=("$cid:${a#main:}");; *) args+=("$a");; esac; done
    exec docker cp "${args[@]}";;
  *) exec "$V1" "${global[@]}" "$sub" "$@";;
esac
