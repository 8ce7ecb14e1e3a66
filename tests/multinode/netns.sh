#!/usr/bin/env bash
# "Nodes" on one machine: Linux network namespaces joined by veth pairs to a
# bridge that lives in a namespace of its own, so the root namespace's network
# is never touched. Used to test deputy's multi-node paths (one agent per node
# under mpirun, clients on every node). See tests/multinode/README.md.
#
#   netns.sh check                     can namespaces be made here? 0, or 77 + reason
#   netns.sh up K                      make K nodes; prints "export DPN_TAG=<tag>"
#   netns.sh down [TAG]                remove every namespace, link and process of TAG
#   netns.sh gc                        remove the leftovers of runs whose owner died
#   netns.sh with K -- CMD ARGS...     up K, run CMD with DPN_TAG set, down on any exit
#   netns.sh run-mpi [K] [--timeout S] [MPIRUN-OPTS...] -- CMD ARGS...
#                                      an Open MPI job, rank i on node i+1
#   netns.sh exec NODE -- CMD ARGS...  run CMD inside NODE's namespace
#   netns.sh link-down NODE | link-up NODE
#                                      pull / plug NODE's cable (its bridge port)
#   netns.sh nodes | addr NODE         list "INDEX NAMESPACE ADDRESS" / one address
#   netns.sh add-hosts                 give every node a "host" behind it: namespace
#                                      <tag>-h<i>, joined to node i alone by a veth pair,
#                                      as a host to its DPU (node i plays the DPU)
#   netns.sh host-exec NODE -- CMD ARGS...
#                                      run CMD inside NODE's host namespace
#   netns.sh host-link NODE            "DPU_ADDRESS HOST_ADDRESS" of NODE's host link
#
# The commands after `up` find the nodes by DPN_TAG (or --tag TAG before the
# command). NODE is an index 1..K, a node's address or its namespace name.
# Environment: DPN_SUBNET (default 10.213.57, a /24: node i is .i), DPN_HOST_SUBNET
# (default 10.213.58: node i's host link is the /30 at .4(i-1), the node .4i-3, its
# host .4i-2; so at most 63 nodes get hosts), DPN_TAG,
# DPN_STATE_DIR (default /run/deputy-netns: <tag>/node<i> holds each node's TMPDIR
# and XDG_RUNTIME_DIR), DPN_TIMEOUT (run-mpi, default 120 s).
# Exit codes: 77 when namespaces cannot be made here (not root, no `ip`, no veth
# or bridge support), 2 for usage errors, else the command's own.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
readonly SELF
readonly SKIP=77
STATE_DIR=${DPN_STATE_DIR:-/run/deputy-netns}
IFACE=dpn0        # each node's end of its veth pair
BRIDGE=dpnbr0     # in the bridge namespace; its ports are named dpn1..dpnK
HOST_IFACE=dph0   # a host's end of its link to its node (add-hosts)
DPU_IFACE=dpnh0   # the node's end of that link

say() { printf 'netns: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$SELF" >&2; exit 2; }

subnet_prefix() {  # DPN_SUBNET (or $1) as "a.b.c" (accepts "a.b.c", "a.b.c.0" or "a.b.c.0/24")
  local s=${1:-${DPN_SUBNET:-10.213.57}}
  s=${s%/24}
  [[ $s =~ ^([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3})(\.0)?$ ]] ||
    { say "DPN_SUBNET=$s: want a /24 such as 10.213.57 or 10.213.57.0/24"; exit 2; }
  printf '%s\n' "${BASH_REMATCH[1]}"
}

# Runs a command; on failure prints it with its error and returns non-zero.
try() {
  local err rc=0
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  if ((rc)); then
    TRY_ERR="'$*' failed: ${err:-exit status $rc}"
    [[ -n ${TRY_QUIET:-} ]] || say "$TRY_ERR"
    return 1
  fi
}

# --- may namespaces be made here? ---------------------------------------------------------

check() {
  local why=
  if ((EUID != 0)); then
    why="not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
  elif ! command -v ip >/dev/null; then
    why="'ip' not found (Debian: iproute2)"
  fi
  if [[ -n $why ]]; then say "cannot make network namespaces here: $why"; return $SKIP; fi
  # The real thing, in miniature: a namespace holding a bridge and a veth pair.
  local ns="dpn-check-$$" ok=1 TRY_QUIET=1 TRY_ERR=
  try ip netns add "$ns" || ok=0
  if ((ok)); then
    try ip -n "$ns" link add dpnchkbr type bridge &&
      try ip -n "$ns" link add dpnchk0 type veth peer name dpnchk1 &&
      try ip -n "$ns" link set dpnchk0 master dpnchkbr || ok=0
    ip netns del "$ns" 2>/dev/null || true
  fi
  if ((!ok)); then say "cannot make network namespaces here: $TRY_ERR"; return $SKIP; fi
}

# --- the nodes of a tag ----------------------------------------------------------------------

tag_or_die() {
  [[ -n ${DPN_TAG:-} ]] || { say "no DPN_TAG: run 'eval \"\$($SELF up K)\"' first, or pass --tag"; exit 2; }
  [[ $DPN_TAG =~ ^dpn-[A-Za-z0-9_.-]+$ ]] || { say "DPN_TAG=$DPN_TAG: not a tag of this script"; exit 2; }
}

node_count() {  # how many nodes DPN_TAG has
  ip netns list | awk -v t="$DPN_TAG-" '{ n = $1; if (index(n, t) == 1 && substr(n, length(t) + 1) ~ /^[0-9]+$/) c++ } END { print c + 0 }'
}

node_addr() {  # node index -> its IPv4 address (read from the node, so no state is needed)
  ip -n "$DPN_TAG-$1" -4 -o addr show dev "$IFACE" | awk '{ split($4, a, "/"); print a[1]; exit }'
}

node_index() {  # NODE (index, address or namespace name) -> index
  local spec=$1 k i
  k=$(node_count)
  ((k > 0)) || die "no nodes for tag $DPN_TAG (already down?)"
  if [[ $spec =~ ^[0-9]+$ ]]; then
    i=$spec
  elif [[ $spec == "$DPN_TAG-"* ]]; then
    i=${spec#"$DPN_TAG-"}
  elif [[ $spec =~ ^[0-9]+\.[0-9]+\.[0-9]+\.([0-9]+)$ ]]; then
    i=${BASH_REMATCH[1]}
    [[ $(node_addr "$i" 2>/dev/null) == "$spec" ]] || die "$spec is not the address of a node of $DPN_TAG"
  else
    die "no node '$spec' (want 1..$k, an address or a namespace name)"
  fi
  if ! [[ $i =~ ^[0-9]+$ ]] || ((10#$i < 1 || 10#$i > k)); then die "no node '$spec' (want 1..$k)"; fi
  printf '%d\n' "$((10#$i))"
}

# The environment of every process on node $1 (orted, ranks, `exec` commands): which
# node it is, and a TMPDIR and XDG_RUNTIME_DIR of its own. The nodes share one file
# system (and hostname), so without these, programs that put sockets or session
# directories in /tmp or $XDG_RUNTIME_DIR would meet across nodes: Open MPI's
# session directories (/tmp/ompi.<host>.<uid>) did, and orted crashed or failed
# with "mkdir ... File exists".
node_env() {
  local i=$1 d="$STATE_DIR/$DPN_TAG/node$1"
  printf '%s\n' "DPN_TAG=$DPN_TAG" "DPN_NODE=$i" "DPN_ADDR=$(node_addr "$i")" "TMPDIR=$d/tmp" "XDG_RUNTIME_DIR=$d/run"
}

# --- up / down -------------------------------------------------------------------------------

# Can `from` (index) reach `addr`? A closed port answers with a reset ("Connection
# refused"): proof enough that packets went both ways; no ping needed.
reachable() {
  local from=$1 addr=$2 out
  out=$(timeout 5 ip netns exec "$DPN_TAG-$from" bash -c "exec 3<>/dev/tcp/$addr/9" 2>&1) && return 0
  [[ $out == *"Connection refused"* ]] && return 0
  say "node $from cannot reach $addr: ${out:-timed out}"
  return 1
}

up() {
  local k=${1:-}
  if ! [[ $k =~ ^[0-9]+$ ]] || ((10#$k < 1 || 10#$k > 250)); then say "up: want a node count 1..250"; exit 2; fi
  k=$((10#$k))
  local net
  net=$(subnet_prefix)
  check || exit $?
  if [[ -z ${DPN_TAG:-} ]]; then
    DPN_TAG="dpn-$$"
    while [[ -e /run/netns/$DPN_TAG-br || -e $STATE_DIR/$DPN_TAG ]]; do DPN_TAG="dpn-$$-$RANDOM"; done
  fi
  tag_or_die
  [[ ! -e /run/netns/$DPN_TAG-br ]] || die "tag $DPN_TAG is in use"
  # From here on, whatever fails or interrupts us removes what was made.
  trap 'down_tag "$DPN_TAG" >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  local dir="$STATE_DIR/$DPN_TAG" br="$DPN_TAG-br" i ns
  mkdir -p "$dir"
  # The owner is whoever called us (a shell, pytest): `gc` removes the nodes once it is gone.
  printf 'owner=%s\nnodes=%s\nsubnet=%s.0/24\n' "${DPN_OWNER:-$(caller_pid)}" "$k" "$net" > "$dir/info"
  try ip netns add "$br"
  try ip -n "$br" link set lo up
  try ip -n "$br" link add "$BRIDGE" type bridge
  try ip -n "$br" link set "$BRIDGE" up
  for ((i = 1; i <= k; i++)); do
    ns="$DPN_TAG-$i"
    try ip netns add "$ns"
    # Made inside the node and the bridge namespace: no name in the root namespace to clash with.
    try ip -n "$ns" link add "$IFACE" type veth peer name "dpn$i" netns "$br"
    try ip -n "$ns" addr add "$net.$i/24" dev "$IFACE"
    try ip -n "$ns" link set lo up
    try ip -n "$ns" link set "$IFACE" up
    try ip -n "$br" link set "dpn$i" master "$BRIDGE"
    try ip -n "$br" link set "dpn$i" up
    # The node's own TMPDIR and XDG_RUNTIME_DIR (see node_env).
    mkdir -m 0700 "$dir/node$i" "$dir/node$i/tmp" "$dir/node$i/run"
  done
  # Every node reaches the next one (a ring covers each node's way out and in).
  if ((k > 1)); then
    for ((i = 1; i <= k; i++)); do
      reachable "$i" "$net.$((i % k + 1))"
    done
  fi
  trap - EXIT INT TERM HUP
  say "up: $k nodes $DPN_TAG-1..$k on $net.0/24 (bridge in $br)"
  printf 'export DPN_TAG=%s\n' "$DPN_TAG"
}

# Our parent, or rather, when that is a shell's subshell (`eval "$(netns.sh up 3)"` runs
# us from one, and it ends at once), the shell: a forked subshell has its parent's
# command line.
caller_pid() {
  local pid=$PPID parent
  while parent=$(sed -E 's/^.*\) . ([0-9]+) .*$/\1/' "/proc/$pid/stat" 2>/dev/null) && ((parent > 1)) &&
    cmp -s "/proc/$pid/cmdline" "/proc/$parent/cmdline"; do
    pid=$parent
  done
  printf '%s\n' "$pid"
}

# Ends every process inside a namespace: TERM, then KILL after 3 s.
kill_in_ns() {
  local ns=$1 t
  local -a pids
  mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null || true)
  ((${#pids[@]})) || return 0
  say "down: ending processes in $ns: ${pids[*]}"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for ((t = 0; t < 30; t++)); do
    mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null || true)
    ((${#pids[@]})) || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

down_tag() {
  local tag=$1 ns
  local -a spaces
  mapfile -t spaces < <(ip netns list 2>/dev/null | awk -v t="$tag-" 'index($1, t) == 1 { print $1 }')
  for ns in "${spaces[@]}"; do kill_in_ns "$ns"; done
  # Deleting a node's namespace deletes its veth end and with it the bridge's; deleting
  # the bridge namespace deletes the bridge.
  for ns in "${spaces[@]}"; do ip netns del "$ns" 2>/dev/null || say "down: could not delete $ns"; done
  rm -rf "${STATE_DIR:?}/$tag"
  rmdir "$STATE_DIR" 2>/dev/null || true
  if ip netns list | awk -v t="$tag-" 'index($1, t) == 1 { found = 1 } END { exit !found }'; then
    die "down: namespaces of $tag are left: $(ip netns list | grep -- "^$tag-" | tr '\n' ' ')"
  fi
  ((${#spaces[@]} == 0)) || say "down: removed ${#spaces[@]} namespaces of $tag"
}

down() {
  [[ -n ${1:-} ]] && DPN_TAG=$1
  tag_or_die
  down_tag "$DPN_TAG"
}

gc() {  # the leftovers of runs whose owner is gone (a crashed test, a killed shell)
  local f tag owner
  for f in "$STATE_DIR"/dpn-*/info; do
    [[ -e $f ]] || continue
    tag=${f%/info}
    tag=${tag##*/}
    owner=$(sed -n 's/^owner=//p' "$f")
    if [[ -z $owner ]] || ! kill -0 "$owner" 2>/dev/null; then
      say "gc: $tag (owner ${owner:-?} is gone)"
      down_tag "$tag"
    fi
  done
}

with() {
  local k=${1:-}; shift || true
  [[ ${1:-} == -- ]] && shift
  (($# > 0)) || { say "with: want K -- CMD ARGS..."; exit 2; }
  local lines
  DPN_OWNER=$$
  lines=$(up "$k") || exit $?
  eval "$lines"  # DPN_TAG
  WITH_PID=
  trap 'down_tag "$DPN_TAG" || true' EXIT
  trap 'with_signal TERM 130' INT
  trap 'with_signal TERM 143' TERM
  trap 'with_signal HUP 129' HUP
  export DPN_TAG DPN_NETNS="$SELF"
  # In the background so that a signal reaches the trap at once (bash runs traps only
  # between commands); then `down` ends whatever CMD left in the namespaces.
  local rc=0
  "$@" &
  WITH_PID=$!
  wait "$WITH_PID" || rc=$?
  exit "$rc"
}

with_signal() {  # pass the signal on to CMD, then exit (the EXIT trap takes the nodes down)
  if [[ -n ${WITH_PID:-} ]]; then kill "-$1" "$WITH_PID" 2>/dev/null || true; fi
  exit "$2"
}

# --- hosts behind the nodes (a host and its DPU) ---------------------------------------------

host_link() {  # node index -> "DPU_ADDRESS HOST_ADDRESS" of its host link
  local net
  net=$(subnet_prefix "${DPN_HOST_SUBNET:-10.213.58}")
  printf '%s %s\n' "$net.$((4 * $1 - 3))" "$net.$((4 * $1 - 2))"
}

# The environment of every process in node $1's host: as node_env, with a TMPDIR and
# XDG_RUNTIME_DIR of the host's own.
host_env() {
  local d="$STATE_DIR/$DPN_TAG/node$1/host" link
  link=$(host_link "$1")
  printf '%s\n' "DPN_TAG=$DPN_TAG" "DPN_NODE=$1" "DPN_ADDR=${link#* }" "DPN_DPU_ADDR=${link% *}" \
    "TMPDIR=$d/tmp" "XDG_RUNTIME_DIR=$d/run"
}

# Each node gets a host namespace joined to it alone, as a host to its DPU: the host
# reaches its node (and nothing else), the node keeps its place on the bridge.
add_hosts() {
  tag_or_die
  local k i dpu host link dir="$STATE_DIR/$DPN_TAG"
  k=$(node_count)
  ((k > 0)) || die "no nodes for tag $DPN_TAG (already down?)"
  ((k <= 63)) || die "add-hosts: at most 63 nodes get hosts (a /30 each in DPN_HOST_SUBNET)"
  for ((i = 1; i <= k; i++)); do
    [[ ! -e /run/netns/$DPN_TAG-h$i ]] || die "add-hosts: node $i has a host already"
    link=$(host_link "$i")
    dpu=${link% *}
    host=${link#* }
    try ip netns add "$DPN_TAG-h$i"
    try ip -n "$DPN_TAG-h$i" link add "$HOST_IFACE" type veth peer name "$DPU_IFACE" netns "$DPN_TAG-$i"
    try ip -n "$DPN_TAG-h$i" addr add "$host/30" dev "$HOST_IFACE"
    try ip -n "$DPN_TAG-$i" addr add "$dpu/30" dev "$DPU_IFACE"
    try ip -n "$DPN_TAG-h$i" link set lo up
    try ip -n "$DPN_TAG-h$i" link set "$HOST_IFACE" up
    try ip -n "$DPN_TAG-$i" link set "$DPU_IFACE" up
    mkdir -m 0700 "$dir/node$i/host" "$dir/node$i/host/tmp" "$dir/node$i/host/run"
    local out
    out=$(timeout 5 ip netns exec "$DPN_TAG-h$i" bash -c "exec 3<>/dev/tcp/$dpu/9" 2>&1) ||
      [[ $out == *"Connection refused"* ]] || die "host $i cannot reach its node at $dpu: ${out:-timed out}"
  done
  say "add-hosts: $k hosts $DPN_TAG-h1..$k, each joined to its node alone"
}

host_exec() {
  local node=${1:-}; shift || true
  [[ ${1:-} == -- ]] && shift
  if [[ -z $node ]] || (($# == 0)); then say "host-exec: want NODE -- CMD ARGS..."; exit 2; fi
  tag_or_die
  local i
  local -a envs
  i=$(node_index "$node")
  [[ -e /run/netns/$DPN_TAG-h$i ]] || die "node $i has no host (run add-hosts first)"
  mapfile -t envs < <(host_env "$i")
  exec env "${envs[@]}" ip netns exec "$DPN_TAG-h$i" "$@"
}

# --- commands inside the nodes ----------------------------------------------------------------

exec_in() {
  local node=${1:-}; shift || true
  [[ ${1:-} == -- ]] && shift
  if [[ -z $node ]] || (($# == 0)); then say "exec: want NODE -- CMD ARGS..."; exit 2; fi
  tag_or_die
  local i
  local -a envs
  i=$(node_index "$node")
  mapfile -t envs < <(node_env "$i")
  exec env "${envs[@]}" ip netns exec "$DPN_TAG-$i" "$@"
}

link_set() {
  local state=$1 node=${2:-}
  [[ -n $node ]] || { say "link-$state: want NODE"; exit 2; }
  tag_or_die
  local i
  i=$(node_index "$node")
  # The bridge's end: the node keeps its address and sees NO-CARRIER, like a pulled cable.
  try ip -n "$DPN_TAG-br" link set "dpn$i" "$state"
  say "link-$state: node $i ($(node_addr "$i"))"
}

# The rsh agent mpirun uses to start its orted on another node: called as
# `rsh-agent [ssh options] HOST COMMAND...`, it runs COMMAND (one shell line, as
# ssh would) inside the namespace whose address is HOST. Not a user command. The line
# may be a list ("PATH=... ; export PATH ; orted ...": mpirun started by its absolute
# path adds its prefix so), so a shell runs it, not `exec`.
rsh_agent() {
  while [[ ${1:-} == -* ]]; do shift; done
  local host=${1:-}; shift || true
  tag_or_die
  local i
  local -a envs
  i=$(node_index "$host")
  mapfile -t envs < <(node_env "$i")
  exec env "${envs[@]}" ip netns exec "$DPN_TAG-$i" /bin/sh -c "$*"
}

# The processes of a run-mpi job: each carries DPN_RUN=<id> in its environment
# (mpirun's environment reaches every orted and rank: there is no ssh in between).
run_pids() {
  grep -lxzsF "DPN_RUN=$1" /proc/[0-9]*/environ 2>/dev/null | awk -F/ '{ print $3 }' || true
}

# Ends what a run-mpi job left behind (after a --timeout abort, mpirun cannot reach the
# orted of a node whose link is down, and that orted and its rank live on): TERM, KILL.
reap_run() {
  local id=$1 sig p t
  local -a left names
  for sig in TERM KILL; do
    mapfile -t left < <(run_pids "$id")
    ((${#left[@]})) || return 0
    names=()
    for p in "${left[@]}"; do names+=("$(cat "/proc/$p/comm" 2>/dev/null || echo '?')($p)"); done
    say "run-mpi: SIG$sig to ${#left[@]} processes the job left: ${names[*]}"
    kill "-$sig" "${left[@]}" 2>/dev/null || true
    for ((t = 0; t < 30; t++)); do
      sleep 0.1
      [[ -n $(run_pids "$id") ]] || return 0
    done
  done
}

run_mpi() {
  tag_or_die
  local n='' timeout=${DPN_TIMEOUT:-120} map=1
  local -a extra=()
  while (($#)); do
    case $1 in
      --) shift; break ;;
      --timeout) timeout=${2:?}; shift 2 ;;
      --timeout=*) timeout=${1#*=}; shift ;;
      -n | -np) n=${2:?}; shift 2 ;;
      --map-by | --map-by=*) map=0; extra+=("$1"); shift ;;
      *) if [[ -z $n && $1 =~ ^[0-9]+$ ]]; then n=$1; else extra+=("$1"); fi; shift ;;
    esac
  done
  (($# > 0)) || { say "run-mpi: want [K] [--timeout S] [MPIRUN-OPTS...] -- CMD ARGS..."; exit 2; }
  command -v mpirun >/dev/null || { say "cannot run MPI here: mpirun not found (Debian: openmpi-bin)"; exit $SKIP; }
  if ! [[ $timeout =~ ^[0-9]+$ ]] || ((timeout == 0)); then say "run-mpi: --timeout wants whole seconds > 0"; exit 2; fi
  local k i
  k=$(node_count)
  ((k > 0)) || die "no nodes for tag $DPN_TAG (already down?)"
  n=${n:-$k}
  ((n >= 1 && n <= k)) || die "run-mpi: $n ranks, but $DPN_TAG has $k nodes"
  local net
  net="$(node_addr 1 | cut -d. -f1-3).0/24"

  # Globals, not locals: the EXIT trap reads them.
  RUN_DIR=$(mktemp -d "$STATE_DIR/$DPN_TAG/run.XXXXXX")
  RUN_ID="$DPN_TAG/${RUN_DIR##*/}"
  RUN_PID=
  trap 'run_cleanup' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  local dir=$RUN_DIR
  # One slot on each node: rank i on node i+1 (with --map-by node).
  for ((i = 1; i <= n; i++)); do printf '%s slots=1\n' "$(node_addr "$i")"; done > "$dir/hostfile"
  printf '#!/bin/sh\nexec "%s" --tag "%s" rsh-agent "$@"\n' "$SELF" "$DPN_TAG" > "$dir/rsh"
  chmod +x "$dir/rsh"

  # PMIx: a rank may reach its orted's PMIx server over TCP, on the nodes' subnet.
  export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=$net
  if ((EUID == 0)); then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  # shellcheck disable=SC2054  # "tcp,self" is one argument
  local -a cmd=(mpirun --timeout "$timeout" -np "$n" --hostfile "$dir/hostfile"
    --mca plm rsh --mca plm_rsh_agent "$dir/rsh"
    --mca btl tcp,self --mca btl_tcp_if_include "$net" --mca oob_tcp_if_include "$net")
  # One rank per node unless the caller maps otherwise (e.g. --map-by ppr:1:node).
  ((map)) && cmd+=(--map-by node)
  cmd+=("${extra[@]}" "$@")
  say "run-mpi: on node 1 ($DPN_TAG-1): ${cmd[*]}"
  # mpirun itself runs on node 1: it must reach every node (the root namespace cannot).
  # Its own --timeout aborts the job; `timeout` backs it up should mpirun hang aborting
  # (--foreground: signal mpirun alone, which then ends its job; not its process group).
  local -a envs
  mapfile -t envs < <(node_env 1)
  env "${envs[@]}" DPN_RUN="$RUN_ID" timeout --foreground -k 5 $((timeout + 15)) ip netns exec "$DPN_TAG-1" "${cmd[@]}" </dev/null &
  RUN_PID=$!
  local rc=0
  wait "$RUN_PID" || rc=$?
  RUN_PID=
  exit "$rc"
}

run_cleanup() {
  local t
  if [[ -n ${RUN_PID:-} ]]; then
    # Interrupted: mpirun gets TERM (through `timeout`) and 5 s to end its job itself.
    kill -TERM "$RUN_PID" 2>/dev/null || true
    for ((t = 0; t < 50; t++)); do
      # Ended is a zombie here, too: nobody waits for it in this trap.
      [[ $(sed -E 's/^.*\) (.) .*$/\1/' "/proc/$RUN_PID/stat" 2>/dev/null || echo Z) != Z ]] || break
      sleep 0.1
    done
  fi
  reap_run "$RUN_ID"
  rm -rf "$RUN_DIR"
}

# --- main ------------------------------------------------------------------------------------

while (($#)); do
  case $1 in
    --tag) DPN_TAG=${2:?}; shift 2 ;;
    --tag=*) DPN_TAG=${1#*=}; shift ;;
    *) break ;;
  esac
done
command_name=${1:-}; shift || true
case $command_name in
  check) check ;;
  up) up "$@" ;;
  down) down "$@" ;;
  gc) gc ;;
  with) with "$@" ;;
  run-mpi) run_mpi "$@" ;;
  exec) exec_in "$@" ;;
  link-down) link_set down "$@" ;;
  link-up) link_set up "$@" ;;
  rsh-agent) rsh_agent "$@" ;;
  add-hosts) add_hosts ;;
  host-exec) host_exec "$@" ;;
  host-link) tag_or_die; host_link "$(node_index "${1:?host-link NODE}")" ;;
  nodes)
    tag_or_die
    k=$(node_count)
    for ((i = 1; i <= k; i++)); do printf '%d %s %s\n' "$i" "$DPN_TAG-$i" "$(node_addr "$i")"; done ;;
  addr) tag_or_die; node_addr "$(node_index "${1:?addr NODE}")" ;;
  -h | --help | help) usage ;;
  *) say "unknown command '$command_name'"; usage ;;
esac
