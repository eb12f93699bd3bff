#!/bin/sh
# Services the docker, ssh and swarm sandbox tests need, on a Debian machine, as root:
# Debian's docker.io (dockerd started and waited for, made a one-node swarm), openssh-server
# (the tests start their own sshd instances on 127.0.0.1 with generated keys), and
# busybox-static (the root filesystem of the test image, built locally: no registry pulls).
# Idempotent: what is installed or running already is left alone.
#
#   .ci/services.sh            # then: CI=true pytest tests/core/test_sandbox_docker.py ...
#
# Environment: AGENTMETER_PYTHON, an interpreter with agentmeter installed, to build the test
# image now rather than in the first test (default: .venv/bin/python when present).
set -eu

log() { echo "services: $*"; }

if [ "$(id -u)" != 0 ]; then
  echo "services: run as root (installs packages, starts dockerd)" >&2
  exit 1
fi

need=""
command -v dockerd >/dev/null 2>&1 || need="$need docker.io"
[ -x /usr/sbin/sshd ] || need="$need openssh-server"
command -v ssh-keygen >/dev/null 2>&1 || need="$need openssh-client"
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || need="$need busybox-static"
if [ -n "$need" ]; then
  log "installing$need"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

# sshd refuses to start without its privilege separation folder.
mkdir -p /run/sshd
chmod 0755 /run/sshd

if docker info >/dev/null 2>&1; then
  log "dockerd already answering"
else
  log "starting dockerd"
  mkdir -p /var/log
  setsid nohup dockerd >/var/log/agentmeter-dockerd.log 2>&1 </dev/null &
  tries=0
  until docker info >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -gt 120 ]; then
      echo "services: dockerd did not answer within 60 s; its log:" >&2
      tail -n 40 /var/log/agentmeter-dockerd.log >&2 || true
      exit 1
    fi
    sleep 0.5
  done
fi

state=$(docker info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null || echo unknown)
if [ "$state" = active ]; then
  log "already a swarm node"
else
  log "making the engine a one-node swarm"
  docker swarm init --advertise-addr 127.0.0.1 >/dev/null
fi

# The test image: busybox-static and this machine's python3, built FROM scratch (no pull).
python="${AGENTMETER_PYTHON:-}"
if [ -z "$python" ] && [ -x .venv/bin/python ]; then
  python=.venv/bin/python
fi
if [ -n "$python" ]; then
  "$python" -c 'from agentmeter_tui.core.sandboxes.engine import connect
from agentmeter_tui.core.sandboxes.images import ensure_host_image
print("services: test image", ensure_host_image(connect()))'
fi
log "docker $(docker version --format '{{.Server.Version}}'), swarm active, sshd available"
