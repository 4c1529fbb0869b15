#!/usr/bin/env bash
# docs/cluster.md's commands, for real, on this one machine. The commands are read from the
# page's ```bash blocks (there is no copy of them here to drift): the launch with Ray's own
# tools (`ray up` of scripts/cluster-local.yaml with a head at this machine's address and a
# worker node at 127.0.0.2, both reached over SSH; `ray status` on the head; a short
# CartPole run submitted as a Ray job through an SSH tunnel to the head's dashboard;
# `ray rsync-down`; the tunnel closed; `ray down`), then a cluster started by hand
# (`ray start --head`, a node joining it, a run with --address auto, `ray stop`). Each
# runs as written but for CHANGES below, which the page names (tests/test_cluster.py
# checks that they are the same), as the non-root user rlscale-ci (one host is the user's
# machine and both nodes, and they share Ray's files) in ~rlscale-ci/client, a copy of
# this checkout's source with its own ./scripts/install.sh. Fails if any command fails,
# if the worker node does not join, if the job's actors did not run on both nodes, if its
# run directory and event files are not on the head or do not come down, if the tunnel
# outlives its `kill`, if `ray down` or `ray stop` leaves a Ray process behind, or if the
# hand-started run had its actors on fewer than two nodes. Cleans up after itself either
# way: what is left of the user's processes, the user, its files in /tmp, the sshd.
#
# Needs root (it installs openssh-server and rsync from the distribution, adds the user
# rlscale-ci, starts an sshd where none listens on the nodes' addresses) and the venv
# (./scripts/install.sh). Run by .ci/run after the test suite; takes ~5-7 min (the nodes'
# own install.sh).
#
#   scripts/test-cluster-launch.sh --list   # the changes and the commands as it runs them (JSON; no root)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DOC=$ROOT/docs/cluster.md
PYTHON=$ROOT/.venv/bin/python
[ -x "$PYTHON" ] || PYTHON=python3

# The changes to the page's commands, "written → run", each named in docs/cluster.md's
# "The launch test" section in the same words. $CFG is the test's copy of
# scripts/cluster-local.yaml with this machine's IPs and user, $HEAD the head's address
# (both made below).
CHANGES=(
    'scripts/cluster-local.yaml → $CFG'
    'rl@192.168.1.10 → rlscale-ci@$HEAD'
    'HEAD_IP → $HEAD'
    'pong --batch critical → cartpole --n-actors 2 --total-frames 20000'
)

# The commands of the page's ```bash blocks in order (a line ending in \ continues the
# command; blank and comment-only lines are none), CHANGES applied: as JSON with the
# changes ($1 = json) or NUL-separated (nul).
doc_commands() {
    "$PYTHON" - "$DOC" "$1" "${CHANGES[@]}" <<'EOF'
import json
import re
import sys

doc, form, *changes = sys.argv[1:]
changes = [change.split(" → ") for change in changes]
commands = []
for block in re.findall(r"^```bash\n(.*?)^```", open(doc).read(), re.S | re.M):
    command = ""
    for line in block.splitlines():
        command += line
        if line.endswith("\\"):
            command += "\n"
            continue
        if command.strip() and not command.lstrip().startswith("#"):
            for written, run in changes:
                command = command.replace(written, run)
            commands.append(command)
        command = ""
if form == "json":
    print(json.dumps({"changes": changes, "commands": commands}, indent=1, ensure_ascii=False))
else:
    sys.stdout.write("".join(command + "\0" for command in commands))
EOF
}

say() { printf '\n== %s\n' "$*"; }
fail() { printf 'test-cluster-launch: FAILED: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------
# The user's part: run as rlscale-ci (`$0 --client WORK`) in the user's checkout with its
# venv active. Runs each command in this one shell (eval: `TUNNEL` lives on between
# commands) and checks after the ones it knows.
client() {
    WORK=$1
    # shellcheck disable=SC1091
    . "$WORK/env"  # CFG, HEAD, NODE_USER
    cd ~/client
    # shellcheck disable=SC1091
    source .venv/bin/activate
    set +e
    local step=0 cmd bare log checked=""

    run() {  # the command, its output to $log; fails the test if it fails
        eval "$cmd" </dev/null >"$log" 2>&1
        local rc=$?
        [ "$rc" -eq 0 ] || { tail -40 "$log"; fail "exit $rc: $cmd"; }
    }
    ray_processes() {  # Ray's processes of the user (not the SSH connections Ray keeps open a while)
        ps -o pid=,args= -u "$NODE_USER" | grep -v -e "ssh" -e "sleep" -e "ps -o" -e "grep" -e "test-cluster-launch" | grep -i "ray" || true
    }
    no_ray_left() {
        for _ in $(seq 30); do [ -z "$(ray_processes)" ] && return 0; sleep 1; done
        ray_processes | head -20
        fail "Ray processes left after: $1"
    }
    listening() { (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }
    head_logs() {  # the head's autoscaler log: where a worker's failed setup shows
        tail -n 40 "$RAY_TMPDIR"/ray/session_latest/logs/monitor.{log,err} 2>/dev/null || true
    }

    while IFS= read -r -d '' -u 9 cmd; do
        step=$((step + 1))
        log=$WORK/step-$step.log
        bare=${cmd%%#*}  # without its comment: what it does
        say "$cmd"
        case "$bare" in
        *"ray status"*)
            # Again until "Active:" counts both nodes: ray up returns when the head is up,
            # and the head's autoscaler then sets up the worker (its install.sh: minutes).
            local deadline=$((SECONDS + 900)) active=0
            while :; do
                eval "$cmd" </dev/null >"$log" 2>&1
                active=$(tr -d '\r' <"$log" | awk '/^Active:/ {on = 1; next} /^[^ ]/ {on = 0}
                    on && $1 ~ /^[0-9]+$/ {n += $1} END {print n + 0}')
                [ "$active" -ge 2 ] && break
                [ "$SECONDS" -lt "$deadline" ] || { cat "$log"; head_logs; fail "the worker node did not join (active: $active)"; }
                sleep 10
            done
            tr -d '\r' <"$log" | sed -n '/^Node status/,/^Resources/p'
            checked+=" nodes"
            ;;
        *"ray job submit"*)
            # Right after `ray up` the head's job agent may not be up yet: no job was made,
            # so submitting again is safe (the page says so).
            for attempt in $(seq 12); do
                eval "$cmd" </dev/null >"$log" 2>&1 && break
                grep -q "No available agent to submit job" "$log" && [ "$attempt" -lt 12 ] || { cat "$log"; fail "ray job submit"; }
                echo "the head's job agent is not up yet; submitting again in 5 s"
                sleep 5
            done
            cat "$log"
            grep -q "2 Ray actors on 2 nodes" "$log" || fail "the job's actors did not run on both nodes"
            run_dir=$(sed -n 's/.*run directory: //p' "$log" | head -1)
            case "$run_dir" in
            "$HOME"/rlscale-runs/*) ;;
            *) fail "the job's run directory is '$run_dir', not under ~/rlscale-runs on the head" ;;
            esac
            ray exec "$CFG" "ls $run_dir/events.out.tfevents.* $run_dir/summary.json" </dev/null \
                || fail "no events in $run_dir on the head"
            checked+=" job"
            ;;
        *) run ;;
        esac
        case "$bare" in
        "ssh "*"-L 8266:"*)
            for _ in $(seq 100); do listening 8266 && break; sleep 0.3; done
            listening 8266 || { cat "$log"; fail "the tunnel: nothing listens on port 8266"; }
            echo "the tunnel is up: localhost:8266 (ssh, pid $TUNNEL)"
            checked+=" tunnel"
            ;;
        *"ray rsync-down"*)
            ls runs/"$(basename "$run_dir")"/events.out.tfevents.* || { cat "$log"; fail "the run's events did not come down"; }
            checked+=" rsync-down"
            ;;
        "kill "*TUNNEL*)
            for _ in $(seq 10); do listening 8266 || break; sleep 0.5; done
            ! listening 8266 || fail "the tunnel still listens on port 8266 after: $cmd"
            wait "$TUNNEL" 2>/dev/null  # its status is the signal's
            ! kill -0 "$TUNNEL" 2>/dev/null || fail "the tunnel's ssh still runs after: $cmd"
            echo "the tunnel is closed"
            checked+=" tunnel-closed"
            ;;
        *"ray down"*)
            tail -5 "$log"
            no_ray_left "$cmd"
            echo "no Ray process of $NODE_USER left"
            checked+=" down"
            ;;
        *"--address auto"*)
            cat "$log"
            grep -q "2 Ray actors on 2 nodes" "$log" || fail "the run on the hand-started cluster did not have its actors on two nodes"
            checked+=" manual-run"
            ;;
        "ray stop"*)
            no_ray_left "$cmd"
            echo "no Ray process of $NODE_USER left"
            checked+=" manual-stop"
            ;;
        *get-auth-token*) echo "(the token: not shown)" ;;
        *"ray status"* | *"ray job submit"*) ;;  # shown above
        *) tail -3 "$log" ;;
        esac
    done 9<"$WORK/commands"

    for check in nodes tunnel job rsync-down tunnel-closed down manual-run manual-stop; do
        [[ " $checked " == *" $check "* ]] \
            || fail "the check '$check' never ran: docs/cluster.md no longer has the command it follows"
    done
    echo "$step commands of docs/cluster.md ran; checked:$checked"
}

case "${1:-}" in
--list) doc_commands json; exit 0 ;;
--client) client "$2"; exit 0 ;;
esac

# ---------------------------------------------------------------------------------------
# Root's part: the machine (sshd, rsync), the user and its checkout, the cluster config.
NODE_USER=rlscale-ci
WORK=$(mktemp -d /tmp/rlscale-cluster-launch.XXXXXX)
RAY_TMPDIR=/tmp/rlct
CFG=$WORK/cluster.yaml
SSHD_PID=""
CLIENT=""
RAY=""

# A command as the user, in the user's checkout (runuser keeps the working directory).
as_user() { (cd "$CLIENT" && runuser -u "$NODE_USER" -- env RAY_TMPDIR="$RAY_TMPDIR" "$@"); }

cleanup() {
    local rc=$?
    set +e
    if [ "$rc" -ne 0 ] && [ -f "$CFG" ] && [ -x "$RAY" ]; then
        as_user timeout 180 "$RAY" down -y "$CFG" >"$WORK/down-after-failure.log" 2>&1
    fi
    if id "$NODE_USER" >/dev/null 2>&1; then
        # Whatever of the user's is left (after a failure: Ray, the tunnel, SSH connections).
        pkill -KILL -u "$NODE_USER" 2>/dev/null
        sleep 1
        # What its processes left in the shared /tmp: the client's cached cluster configs,
        # SSH control sockets, Python's and torch's temporary folders.
        find /tmp -maxdepth 1 -user "$NODE_USER" -exec rm -rf {} + 2>/dev/null
        userdel -r "$NODE_USER" >/dev/null 2>&1
    fi
    [ -n "$SSHD_PID" ] && kill "$SSHD_PID" 2>/dev/null && wait "$SSHD_PID" 2>/dev/null
    rm -rf "$WORK" "$RAY_TMPDIR"
    [ "$rc" -eq 0 ] && echo "test-cluster-launch: passed" || echo "test-cluster-launch: failed (exit $rc)" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'printf "test-cluster-launch: FAILED at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

[ "$(id -u)" -eq 0 ] || fail "run as root: it installs packages, adds a user and may start sshd"

say "openssh-server and rsync"
if ! command -v sshd >/dev/null && [ ! -x /usr/sbin/sshd ] || ! command -v rsync >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server rsync >/dev/null
fi

say "user $NODE_USER (non-root) with a fresh key"
if id "$NODE_USER" >/dev/null 2>&1; then
    pkill -KILL -u "$NODE_USER" 2>/dev/null || true
    userdel -r "$NODE_USER" >/dev/null 2>&1 || true
fi
useradd -m -s /bin/bash "$NODE_USER"
HOME_DIR=$(getent passwd "$NODE_USER" | cut -d: -f6)
CLIENT=$HOME_DIR/client
RAY=$CLIENT/.venv/bin/ray
PY=$CLIENT/.venv/bin/python
chown "$NODE_USER" "$WORK"
ssh-keygen -q -t ed25519 -N "" -f "$WORK/id_ed25519"
chown "$NODE_USER" "$WORK/id_ed25519"
install -d -m 700 -o "$NODE_USER" -g "$NODE_USER" "$HOME_DIR/.ssh"
install -m 600 -o "$NODE_USER" -g "$NODE_USER" "$WORK/id_ed25519.pub" "$HOME_DIR/.ssh/authorized_keys"
# The node installs from the package sources this machine's pip uses (here a local wheel
# folder with the CPU torch; elsewhere PyPI), as a real node would from its own.
for conf in /root/.config/pip/pip.conf; do
    if [ -f "$conf" ]; then
        install -d -o "$NODE_USER" -g "$NODE_USER" "$HOME_DIR/.config" "$HOME_DIR/.config/pip"
        install -m 644 -o "$NODE_USER" -g "$NODE_USER" "$conf" "$HOME_DIR/.config/pip/pip.conf"
    fi
done
# Two "machines" on one host share /tmp, and /tmp/ray may be root's (the test suite's):
# the nodes' Ray and this client (`ray up` keeps the local provider's node states there
# and ships them to the head at the same path) use a folder of their own. Short: Ray's
# socket paths must stay under 108 characters.
rm -rf "$RAY_TMPDIR"; install -d -m 1777 "$RAY_TMPDIR" "$RAY_TMPDIR/ray"
echo "export RAY_TMPDIR=$RAY_TMPDIR" >>"$HOME_DIR/.bashrc"

say "the user's checkout: this one's source, and ./scripts/install.sh"
rsync -a --filter='dir-merge,- .gitignore' --exclude .git "$ROOT/" "$CLIENT/"
chown -R "$NODE_USER:$NODE_USER" "$CLIENT"
as_user ./scripts/install.sh >"$WORK/install.log" 2>&1 || { tail -20 "$WORK/install.log"; fail "install.sh in the user's checkout"; }

# The head at this machine's address as Ray sees it, which is also what Ray makes of
# 127.0.0.1 (a head listed as 127.0.0.1 would advertise another address than the listed
# one, and the autoscaler would not count it: `ray status` would never show two nodes);
# the worker at another loopback address, which Ray keeps.
HEAD_IP=$("$PYTHON" -c 'from ray._private.services import get_node_ip_address; print(get_node_ip_address())')
WORKER_IP=127.0.0.2
[ "$HEAD_IP" != "$WORKER_IP" ] || fail "this machine's address is $WORKER_IP"
echo "head: $HEAD_IP, worker: $WORKER_IP"
# The user's key where the example has it (~/.ssh/id_ed25519), and the nodes' host keys
# known, as for a user who has ssh'ed into each node.
install -m 600 -o "$NODE_USER" -g "$NODE_USER" "$WORK/id_ed25519" "$HOME_DIR/.ssh/id_ed25519"

say "sshd"
listen=()
for ip in "$HEAD_IP" "$WORKER_IP"; do
    (exec 3<>/dev/tcp/"$ip"/22) 2>/dev/null || listen+=(-o "ListenAddress=$ip")
done
if [ "${#listen[@]}" -gt 0 ]; then
    mkdir -p /run/sshd
    ssh-keygen -A >/dev/null
    /usr/sbin/sshd -D -p 22 "${listen[@]}" &
    SSHD_PID=$!
    for ip in "$HEAD_IP" "$WORKER_IP"; do
        for _ in $(seq 50); do (exec 3<>/dev/tcp/"$ip"/22) 2>/dev/null && break; sleep 0.2; done
    done
fi
for ip in "$HEAD_IP" "$WORKER_IP"; do  # and the user's known_hosts learns their keys
    ssh -q -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile="$HOME_DIR/.ssh/known_hosts" \
        -i "$WORK/id_ed25519" "$NODE_USER@$ip" true || fail "cannot ssh to $NODE_USER@$ip"
done
chown "$NODE_USER:$NODE_USER" "$HOME_DIR/.ssh/known_hosts"

say "the cluster config: scripts/cluster-local.yaml with this machine's IPs and user"
# Only the values a user edits for their own machines (docs/cluster.md names them); the
# key (~/.ssh/id_ed25519) and the setup and start commands are the file's own.
"$PY" - "$ROOT/scripts/cluster-local.yaml" "$CFG" "$NODE_USER" "$HEAD_IP" "$WORKER_IP" <<'EOF'
import sys

import yaml

source, out, user, head_ip, worker_ip = sys.argv[1:]
cfg = yaml.safe_load(open(source))
cfg["cluster_name"] = "rlscale-launch-test"
cfg["provider"].update(head_ip=head_ip, worker_ips=[worker_ip])
cfg["min_workers"] = cfg["max_workers"] = 1
cfg["auth"]["ssh_user"] = user
yaml.safe_dump(cfg, open(out, "w"), sort_keys=False)
EOF
chown "$NODE_USER" "$CFG"

say "docs/cluster.md's commands, as $NODE_USER in ~/client (changes: ${CHANGES[*]})"
doc_commands nul >"$WORK/commands"
printf 'CFG=%q\nHEAD=%q\nNODE_USER=%q\nexport CFG HEAD\n' "$CFG" "$HEAD_IP" "$NODE_USER" >"$WORK/env"
install -m 755 "$ROOT/scripts/test-cluster-launch.sh" "$WORK/test-cluster-launch.sh"
chown "$NODE_USER" "$WORK/commands" "$WORK/env" "$WORK/test-cluster-launch.sh"
as_user timeout 3000 bash "$WORK/test-cluster-launch.sh" --client "$WORK" \
    || fail "docs/cluster.md's commands (exit $?; see above)"
