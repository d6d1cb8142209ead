#!/usr/bin/env bash
# Hosts made of Linux network namespaces on this machine, for multi-host LP tests (tests/scripts/test_multihost.sh).
#   netns-hosts.sh up PREFIX SUBNET N   # N hosts PREFIXa, PREFIXb, ... with SUBNET.1, .2, ... (SUBNET e.g. 10.213.7)
#   netns-hosts.sh down PREFIX          # kill their processes, remove namespaces, bridge, links and /etc/netns files
#   netns-hosts.sh run PREFIX HOST PROGRAM ARGS...   # PROGRAM on HOST (its namespace and hostname)
#   netns-hosts.sh cut PREFIX HOST      # pull HOST's cable (its switch-side link down)
#   netns-hosts.sh mend PREFIX HOST     # plug it back
#   netns-hosts.sh impair PREFIX HOST LINKEM CONTROL   # HOST's cable through LINKEM (multihost/linkem.c: delay and
#                                       # loss from the file CONTROL, re-read on SIGHUP to the pid in
#                                       # /run/lookahead-netns/HOST/linkem.pid), in place of netem, which this kernel lacks
#   netns-hosts.sh plain PREFIX HOST    # back to the plain veth cable
# Every host: its own network namespace with loopback and eth0 (one end of a veth pair whose other end,
# PREFIX<letter>, is a port of the bridge PREFIXbr), address SUBNET.<i>/24, no default route; the bridge has no
# address and the root namespace no route into the subnet, so traffic goes only between the hosts. Names resolve
# through /etc/netns/HOST/hosts (which `ip netns exec` mounts over /etc/hosts). Processes get their own hostname
# from tests/scripts/multihost/ns-rsh (unshare --uts), Open MPI's rsh agent.
set -euo pipefail
cmd=${1:-}; P=${2:-}
[ -n "$P" ] && [ ${#P} -le 10 ] || { echo "netns-hosts.sh: PREFIX missing or longer than 10 characters" >&2; exit 2; }
letters=(a b c d e f g h)
RUN=/run/lookahead-netns  # per host: its address, linkem's pid and log (not in /etc/netns/HOST: `ip netns exec`
                          # would bind every file there over /etc)
case "$cmd" in
  up)
    SUB=$3; N=$4
    ip link add "${P}br" type bridge
    ip link set "${P}br" up
    hosts=""
    for ((i = 0; i < N; i++)); do hosts+="$SUB.$((i + 1)) ${P}${letters[$i]}"$'\n'; done
    for ((i = 0; i < N; i++)); do
      h=${P}${letters[$i]}
      ip netns add "$h"
      ip link add "$h" type veth peer name eth0 netns "$h"
      ip link set "$h" master "${P}br" up
      ip -n "$h" link set lo up
      ip -n "$h" addr add "$SUB.$((i + 1))/24" dev eth0
      ip -n "$h" link set eth0 up
      mkdir -p "/etc/netns/$h"
      printf '127.0.0.1 localhost\n%s' "$hosts" > "/etc/netns/$h/hosts"
      mkdir -p "$RUN/$h"
      echo "$SUB.$((i + 1))/24" > "$RUN/$h/addr"
    done
    ;;
  down)
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${P}[a-h]$" || true); do
      [ -f "$RUN/$ns/linkem.pid" ] && kill -9 "$(cat "$RUN/$ns/linkem.pid")" 2>/dev/null
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null || true; kill -9 "$pid" 2>/dev/null || true; done
      ip netns del "$ns" 2>/dev/null || true
      ip link del "$ns" 2>/dev/null || true
      rm -rf "/etc/netns/$ns" "$RUN/$ns"
    done
    ip link del "${P}br" 2>/dev/null || true
    ;;
  run)  # run HOST PROGRAM ARGS...: PROGRAM on HOST (its namespace and hostname), arguments kept as they are
    h=$3; shift 3
    # `ip netns exec` mounts a fresh /sys, without the cgroup file systems; daemons that need them (slurmd) get
    # this machine's cgroup v1 controllers mounted again with LA_NS_CGROUP=1.
    cg=""
    if [ "${LA_NS_CGROUP:-0}" = 1 ]; then
      cg='mount -t tmpfs cgroup_root /sys/fs/cgroup && for c in $(awk '"'"'$4 == 1 {print $1}'"'"' /proc/cgroups); do '
      cg+='mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c; done; '
      cg+='mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd; '
    fi
    exec ip netns exec "$h" unshare --uts sh -c "${cg}"'hostname "$0" && exec "$@"' "$h" "$@" ;;
  impair)
    h=$3; linkem=$4; ctl=$5
    ip link del "$h" 2>/dev/null || true   # the veth pair (its eth0 end goes too)
    "$linkem" "${h}t" "${h}s" "$ctl" > "$RUN/$h/linkem.out" 2>&1 &
    echo $! > "$RUN/$h/linkem.pid"
    for _ in $(seq 100); do grep -q ready "$RUN/$h/linkem.out" 2>/dev/null && break; sleep 0.05; done
    grep -q ready "$RUN/$h/linkem.out" || { cat "$RUN/$h/linkem.out" >&2; exit 1; }
    ip link set "${h}t" netns "$h"
    ip -n "$h" link set "${h}t" name eth0
    ip -n "$h" addr add "$(cat "$RUN/$h/addr")" dev eth0
    ip -n "$h" link set eth0 up
    ip link set "${h}s" master "${P}br" up
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${P}[a-h]$"); do ip -n "$ns" neigh flush all; done
    ;;
  plain)
    h=$3
    if [ -f "$RUN/$h/linkem.pid" ]; then
      pid=$(cat "$RUN/$h/linkem.pid"); kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      rm -f "$RUN/$h/linkem.pid"
    fi
    for _ in $(seq 100); do ip -n "$h" link show eth0 >/dev/null 2>&1 || break; sleep 0.05; done
    ip link add "$h" type veth peer name eth0 netns "$h"
    ip link set "$h" master "${P}br" up
    ip -n "$h" addr add "$(cat "$RUN/$h/addr")" dev eth0
    ip -n "$h" link set eth0 up
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${P}[a-h]$"); do ip -n "$ns" neigh flush all; done
    ;;
  cut)  ip link set "$3" down ;;
  mend) ip link set "$3" up ;;
  *) echo "netns-hosts.sh: unknown command '$cmd' (up, down, run, cut, mend, impair, plain)" >&2; exit 2 ;;
esac
