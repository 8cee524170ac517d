#!/usr/bin/env bash
# A single-node Slurm cluster on localhost, for tests (crates/sweep/tests/slurm_local.rs):
#
#   bash scripts/slurm-local.sh start DIR   writes DIR/slurm.conf, starts munged (its own key and
#                                           socket under DIR), slurmctld and slurmd, waits until
#                                           the node is idle (60 s at most) and prints
#                                           `export SLURM_CONF=DIR/slurm.conf`
#   bash scripts/slurm-local.sh stop DIR    stops the daemons that `start DIR` started
#
# Everything — configuration, state, spool, logs, pid files, munge key and socket — lives under
# DIR, so several clusters never share files and nothing under /etc or /var is touched; the
# ports are free ones picked at start (SLURM_LOCAL_PORT=N asks for N and N+1). The node is
# `localhost` with the CPUs and memory `slurmd -C` reports, in one default partition `debug`;
# MaxArraySize=1001 (Slurm's default) so the tests exercise the same array split as a stock
# cluster. Meant for a container where we are root without systemd or cgroups: processes are
# tracked by /proc (proctrack/linuxproc) and tasks are not bound (task/none). Authentication is
# munge; when munged cannot start (not installed, refuses its key) it falls back to auth/none,
# which Slurm 22.05 still ships, and says so.
#
# Exit status: 0 when the cluster is up (start) or down (stop); otherwise non-zero with the
# reason and the tail of the failing daemon's log on stderr.
set -euo pipefail

usage() {
    echo "usage: $0 start DIR | stop DIR" >&2
    exit 2
}

[ "$#" -eq 2 ] || usage
cmd=$1
dir=$2

die() {
    echo "slurm-local: $*" >&2
    exit 1
}

# Prints the last lines of a daemon log to stderr, for a failure message.
show_log() {
    if [ -s "$1" ]; then
        echo "--- last lines of $1:" >&2
        tail -n 20 "$1" >&2
    fi
}

# Sends SIGTERM to the processes whose ids are in the pid files given, waits for them to exit
# (SIGKILL after 10 s) and removes the pid files. All at once: each takes a second or two to
# shut down, and nothing here needs them to stop in order.
stop_pidfiles() {
    local pidfile pid i pids=()
    for pidfile in "$@"; do
        [ -s "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    for pid in "${pids[@]}"; do
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -f "$@"
}

# True when something listens on TCP port $1 of localhost.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Waits up to $2 tenths of a second for pid file $1 to name a live process.
wait_pidfile() {
    local pidfile=$1 tenths=$2 i
    for ((i = 0; i < tenths; i++)); do
        if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

do_stop() {
    [ -d "$dir" ] || die "no such directory: $dir"
    stop_pidfiles "$dir/run/slurmd.pid" "$dir/run/slurmctld.pid" "$dir/run/munged.pid"
    echo "slurm-local: stopped the cluster in $dir"
}

do_start() {
    for tool in slurmctld slurmd sinfo; do
        command -v "$tool" >/dev/null 2>&1 \
            || die "$tool not found; fix: bash scripts/install-test-deps.sh slurm"
    done
    [ "$(id -u)" -eq 0 ] || die "must run as root (slurmd launches jobs as their user)"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ -s "$dir/run/slurmctld.pid" ] && kill -0 "$(cat "$dir/run/slurmctld.pid")" 2>/dev/null; then
        die "a cluster already runs from $dir; fix: $0 stop $dir"
    fi
    mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/run" "$dir/munge"
    # munged refuses directories others may write to.
    chmod 0700 "$dir/munge"

    # The node as slurmd sees it; declaring more than this would drain the node.
    local hw cpus boards sockets cores threads mem
    hw=$(slurmd -C | head -n 1) || die "slurmd -C failed"
    field() { sed -n "s/.*[[:space:]]$1=\([0-9]*\).*/\1/p" <<<"$hw"; }
    cpus=$(field CPUs)
    boards=$(field Boards)
    sockets=$(field SocketsPerBoard)
    cores=$(field CoresPerSocket)
    threads=$(field ThreadsPerCore)
    mem=$(field RealMemory)
    if [ -z "$cpus" ] || [ -z "$mem" ]; then
        die "cannot read CPUs/RealMemory from 'slurmd -C': $hw"
    fi

    local port
    if [ -n "${SLURM_LOCAL_PORT:-}" ]; then
        port=$SLURM_LOCAL_PORT
    else
        for _ in $(seq 1 50); do
            port=$((20000 + RANDOM % 40000))
            if ! port_in_use "$port" && ! port_in_use $((port + 1)); then
                break
            fi
        done
    fi

    local auth="auth/munge" cred="cred/munge" authinfo="AuthInfo=socket=$dir/munge/munge.socket"
    if ! start_munge; then
        echo "slurm-local: munged did not start; using AuthType=auth/none (test cluster only)" >&2
        show_log "$dir/log/munged.log"
        auth="auth/none"
        cred="cred/none"
        authinfo=""
    fi

    cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh: a one-node test cluster; everything lives under $dir.
ClusterName=harness-local
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=$auth
CredType=$cred
$authinfo
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MaxArraySize=1001
ReturnToService=2
# Test jobs are short: schedule and clean up promptly.
SchedulerParameters=sched_interval=2
MinJobAge=300
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus Boards=${boards:-1} SocketsPerBoard=${sockets:-1} CoresPerSocket=${cores:-$cpus} ThreadsPerCore=${threads:-1} RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF="$dir/slurm.conf"

    # Daemons log to files: their inherited stdout would keep a caller's pipe open.
    slurmctld -i -f "$SLURM_CONF" -L "$dir/log/slurmctld.log" </dev/null >>"$dir/log/slurmctld.out" 2>&1 \
        || { show_log "$dir/log/slurmctld.out"; show_log "$dir/log/slurmctld.log"; do_stop >/dev/null 2>&1; die "slurmctld failed to start"; }
    if ! wait_pidfile "$dir/run/slurmctld.pid" 100; then
        show_log "$dir/log/slurmctld.out"
        show_log "$dir/log/slurmctld.log"
        do_stop >/dev/null 2>&1
        die "slurmctld did not come up (no live pid in $dir/run/slurmctld.pid after 10 s)"
    fi
    # -N: the node is `localhost` whatever this machine's host name is.
    slurmd -N localhost -f "$SLURM_CONF" -L "$dir/log/slurmd.log" </dev/null >>"$dir/log/slurmd.out" 2>&1 \
        || { show_log "$dir/log/slurmd.out"; show_log "$dir/log/slurmd.log"; do_stop >/dev/null 2>&1; die "slurmd failed to start"; }
    if ! wait_pidfile "$dir/run/slurmd.pid" 100; then
        show_log "$dir/log/slurmd.out"
        show_log "$dir/log/slurmd.log"
        do_stop >/dev/null 2>&1
        die "slurmd did not come up (no live pid in $dir/run/slurmd.pid after 10 s)"
    fi

    local state="" i
    for ((i = 0; i < 60; i++)); do
        state=$(sinfo -h -n localhost -o %t 2>/dev/null || true)
        [ "$state" = "idle" ] && break
        sleep 1
    done
    if [ "$state" != "idle" ]; then
        show_log "$dir/log/slurmctld.log"
        show_log "$dir/log/slurmd.log"
        do_stop >/dev/null 2>&1
        die "node localhost not idle after 60 s (sinfo state: '${state:-none}')"
    fi
    echo "export SLURM_CONF=$dir/slurm.conf"
}

# Starts munged with a fresh key and its socket under DIR/munge; false when it cannot.
start_munge() {
    command -v munged >/dev/null 2>&1 || return 1
    local key="$dir/munge/munge.key"
    if [ ! -s "$key" ]; then
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile="$key" >/dev/null 2>&1 || return 1
        else
            head -c 1024 /dev/urandom >"$key" || return 1
        fi
        chmod 0600 "$key"
    fi
    # --force: munged refuses to run as root or beside a world-writable /tmp without it.
    munged --force \
        --key-file="$key" \
        --socket="$dir/munge/munge.socket" \
        --pid-file="$dir/run/munged.pid" \
        --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge/munged.seed" \
        </dev/null >>"$dir/log/munged.out" 2>&1 || return 1
    wait_pidfile "$dir/run/munged.pid" 50
}

case "$cmd" in
    start) do_start ;;
    stop) do_stop ;;
    *) usage ;;
esac
