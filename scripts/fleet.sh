#!/bin/sh
# A Docker Swarm fleet on one machine, for the fleet tests, the benchmark and demos (docs/fleet.md):
# N Docker engines, each in its own network namespace, UTS namespace (its own host name, so Swarm
# tells the nodes apart) and data/exec root, on a private veth bridge; node 1 is the manager, the
# others join as workers; a local image registry (Debian's docker-registry) listens on the bridge
# so task images built once reach every node the way they would on a real fleet.
#
#   scripts/fleet.sh up 3      # prints DOCKER_HOST=unix://... (the manager) and REGISTRY=host:port
#   scripts/fleet.sh down      # removes every trace: engines, registry, namespaces, links, bridge, files
#   scripts/fleet.sh status
#   scripts/fleet.sh kill I    # node I dies: its engine, containerd, shims and containers get SIGKILL
#   scripts/fleet.sh cut I     # node I's link goes down (mend I brings it back); `up N` restarts dead nodes
#
# The machine's own dockerd is never touched: every engine here has its own socket, pidfile,
# data root, exec root and cgroup parent. Addresses live only on the bridge and in the namespaces
# (no route leaves them). Run as root. Both commands are idempotent.
#
# Environment: FLEET_DIR (state, default /tmp/agentmeter-fleet), FLEET_NAME (prefix of the links
# and namespaces, default amf), FLEET_NET (the first three octets of the private /24, default
# 10.213.77), FLEET_HEARTBEAT (Swarm's dispatcher heartbeat, default 2s: a lost node is marked
# down after a few missed heartbeats).
set -eu

DIR=${FLEET_DIR:-/tmp/agentmeter-fleet}
NAME=${FLEET_NAME:-amf}
NET=${FLEET_NET:-10.213.77}
HEARTBEAT=${FLEET_HEARTBEAT:-2s}
BRIDGE="$NAME-br"
REGISTRY="$NET.1:5000"

log() { echo "fleet: $*" >&2; }
die() { echo "fleet: $*" >&2; exit 1; }
sock() { echo "$DIR/n$1/docker.sock"; }
dk() { node=$1; shift; docker -H "unix://$(sock "$node")" "$@"; }
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_until() {  # wait_until SECONDS WHAT COMMAND...: poll until the command succeeds
  limit=$1 what=$2; shift 2
  tries=0
  until "$@" >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -le $((limit * 5)) ] || return 1
    sleep 0.2
  done
  log "$what"
}

ensure_packages() {
  need=""
  command -v dockerd >/dev/null 2>&1 || need="$need docker.io"
  command -v docker-registry >/dev/null 2>&1 || need="$need docker-registry"
  command -v nsenter >/dev/null 2>&1 || need="$need util-linux"
  [ -z "$need" ] && return 0
  log "installing$need"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $need >/dev/null
}

start_registry() {
  mkdir -p "$DIR/registry/data"
  pid_alive "$DIR/registry/pid" && return 0
  cat >"$DIR/registry/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $DIR/registry/data
  delete:
    enabled: true
http:
  addr: $REGISTRY
EOF
  setsid docker-registry serve "$DIR/registry/config.yml" >"$DIR/registry/log" 2>&1 </dev/null &
  echo $! >"$DIR/registry/pid"
  wait_until 30 "registry on $REGISTRY" python3 -c "import socket; socket.create_connection(('$NET.1', 5000), 1)" ||
    { tail -n 20 "$DIR/registry/log" >&2; die "the registry did not listen on $REGISTRY"; }
}

start_node() {  # start_node I: namespace, link, engine
  k=$1 ns="$NAME-n$1" root="$DIR/n$1"
  [ -e "/run/netns/$ns" ] || ip netns add "$ns"
  if ! ip link show "$NAME-v$k" >/dev/null 2>&1; then
    ip link add "$NAME-v$k" type veth peer name eth0 netns "$ns"
    ip link set "$NAME-v$k" master "$BRIDGE" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip addr add "$NET.$((10 + k))/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
  fi
  mkdir -p "$root/data" "$root/exec"
  pid_alive "$root/docker.pid" && return 0
  # nsenter, not `ip netns exec`: the latter remounts /sys in a new mount namespace, which hides
  # the cgroup mounts dockerd needs. unshare --uts gives the node its own host name.
  setsid unshare --uts sh -c "hostname $ns && exec nsenter --net=/run/netns/$ns dockerd \
      --data-root '$root/data' --exec-root '$root/exec' --pidfile '$root/docker.pid' \
      -H 'unix://$root/docker.sock' --bridge=none --iptables=false --ip6tables=false \
      --cgroup-parent '/$ns' --insecure-registry '$REGISTRY'" >"$root/log" 2>&1 </dev/null &
  wait_until 60 "engine $ns answers" dk "$k" info ||
    { tail -n 20 "$root/log" >&2; die "the engine of $ns did not answer; its log is above"; }
}

swarm_state() { dk "$1" info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null || echo down; }

up() {
  n=${1:-3}
  case $n in '' | *[!0-9]*) die "usage: fleet.sh up N (N >= 1)" ;; esac
  [ "$n" -ge 1 ] || die "usage: fleet.sh up N (N >= 1)"
  [ "$(id -u)" = 0 ] || die "run as root (namespaces, links, engines)"
  if [ -f "$DIR/size" ] && [ "$(cat "$DIR/size")" != "$n" ]; then
    log "a fleet of $(cat "$DIR/size") is up: taking it down first"
    down
  fi
  ensure_packages
  mkdir -p "$DIR"
  echo "$n" >"$DIR/size"
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip addr add "$NET.1/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
  fi
  # With br_netfilter on (the machine's dockerd turns it on and sets FORWARD to DROP), frames
  # between two ports of our bridge pass iptables' FORWARD chain: let through those, and only those.
  if command -v iptables >/dev/null 2>&1 && ! iptables -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; then
    iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null || true
  fi
  start_registry
  i=1
  while [ "$i" -le "$n" ]; do start_node "$i"; i=$((i + 1)); done
  if [ "$(swarm_state 1)" != active ]; then
    dk 1 swarm init --advertise-addr "$NET.11" --listen-addr "$NET.11:2377" \
      --dispatcher-heartbeat "$HEARTBEAT" >/dev/null
  fi
  token=$(dk 1 swarm join-token -q worker)
  i=2
  while [ "$i" -le "$n" ]; do
    state=$(swarm_state "$i")
    # A join cut short (pending, error) is started again.
    [ "$state" = active ] || [ "$state" = inactive ] || dk "$i" swarm leave --force >/dev/null 2>&1 || true
    [ "$state" = active ] || dk "$i" swarm join --token "$token" --advertise-addr "$NET.$((10 + i))" \
      --listen-addr "$NET.$((10 + i)):2377" "$NET.11:2377" >/dev/null
    i=$((i + 1))
  done
  ready() { [ "$(dk 1 node ls --format '{{.Status}}' | grep -c Ready)" -ge "$n" ]; }
  wait_until 60 "$n nodes ready" ready || die "not every node became ready: $(dk 1 node ls 2>&1)"
  echo "DOCKER_HOST=unix://$(sock 1)"
  echo "REGISTRY=$REGISTRY"
}

stop_pid() {  # stop_pid PIDFILE: TERM, then KILL after 20 s
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    tries=0
    while kill -0 "$pid" 2>/dev/null && [ "$tries" -lt 100 ]; do sleep 0.2; tries=$((tries + 1)); done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

kill_node() {  # kill_node I: SIGKILL to the node's engine and to all it started, as a crash would
  root="$DIR/n$1"
  [ -f "$root/docker.pid" ] && kill -9 "$(cat "$root/docker.pid")" 2>/dev/null || true
  # Its containerd and shims, found by this node's own exec root in their command lines, and
  # its containers' processes, found by the node's own cgroup parent.
  for proc in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$proc/cmdline" | grep -q "$root/exec/" && kill -9 "${proc#/proc/}" 2>/dev/null || true
  done
  cat /sys/fs/cgroup/pids/"$NAME-n$1"/*/cgroup.procs 2>/dev/null | while read -r pid; do
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -f "$root/docker.pid"
}

down() {
  [ "$(id -u)" = 0 ] || die "run as root"
  for root in "$DIR"/n*; do
    [ -d "$root" ] || continue
    stop_pid "$root/docker.pid"
    kill_node "${root##*/n}"  # what a killed engine left
  done
  stop_pid "$DIR/registry/pid"
  # Overlay and netns mounts under the data and exec roots, deepest first.
  if [ -d "$DIR" ]; then
    awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
  fi
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NAME-n[0-9]*$" || true); do
    ip netns del "$ns"
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^$NAME-" || true); do
    ip link del "$link" 2>/dev/null || true
  done
  while iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; do :; done
  for cg in /sys/fs/cgroup/*/"$NAME"-n*; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  rm -rf "$DIR"
  log "down"
}

status() {
  [ -f "$DIR/size" ] || { echo "no fleet"; return 0; }
  echo "DOCKER_HOST=unix://$(sock 1)"
  echo "REGISTRY=$REGISTRY"
  dk 1 node ls
}

# One up or down at a time per FLEET_DIR: two at once each started engines the other's state
# file did not name, and left them behind. The lock is beside the folder (which down removes),
# and flock itself holds it (-o): an engine started here must not inherit it, or the lock would
# live as long as the fleet.
case ${1:-} in
  up | down)
    if [ -z "${FLEET_LOCKED:-}" ]; then
      mkdir -p "$(dirname "$DIR")"
      FLEET_LOCKED=1 exec flock -o "$DIR.lock" sh "$0" "$@"
    fi ;;
esac

case ${1:-} in
  up) up "${2:-3}" ;;
  down) down ;;
  status) status ;;
  kill) kill_node "${2:?usage: fleet.sh kill I}"; log "node $2 killed" ;;
  cut) ip link set "$NAME-v${2:?usage: fleet.sh cut I}" down; log "node $2 cut off" ;;
  mend) ip link set "$NAME-v${2:?usage: fleet.sh mend I}" up; log "node $2 linked again" ;;
  *) die "usage: fleet.sh up N | down | status | kill I | cut I | mend I" ;;
esac
