#!/usr/bin/env bash
# The README's cluster commands, for real, on this one machine: `ray up` of
# scripts/cluster-local.yaml (a head at 127.0.0.1 and a worker node at 127.0.0.2, both
# reached over SSH), a short CartPole run submitted as a Ray job through `ray
# dashboard`'s tunnel, then `ray down`, all as a non-root user (the commands, like the
# nodes, as the user rlscale-ci: one host is both the user's machine and the head, and
# they share Ray's files). The user's machine is a copy of this checkout's source in
# ~rlscale-ci/client with its own ./scripts/install.sh, as a user would have it. Fails if any of them fails, if the
# job's actors did not run on both nodes, if its run directory and event files are not
# on the head, or if a Ray process is left behind. Cleans up after itself either way.
#
# Needs root (it installs openssh-server and rsync from the distribution, adds the user
# rlscale-ci, starts sshd if none listens on port 22) and the venv (./scripts/install.sh).
# Run by .ci/run after the test suite; takes ~3-5 min (the node's own install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
NODE_USER=rlscale-ci
WORK=$(mktemp -d /tmp/rlscale-cluster-launch.XXXXXX)
RAY_TMPDIR=/tmp/rlct
CFG=$WORK/cluster.yaml
SSHD_PID=""
TUNNEL_PID=""
CLIENT=""
RAY=""

say() { printf '\n== %s\n' "$*"; }
# `ray dashboard` and its ssh -L run under runuser in a subshell: stop them by what they are.
stop_tunnel() {
    [ -n "$TUNNEL_PID" ] || return 0
    pkill -u "$NODE_USER" -f "ray dashboard -p 8266" || true
    pkill -u "$NODE_USER" -f "ssh -tt -L 8266:" || true
    wait "$TUNNEL_PID" 2>/dev/null || true  # its status is the signal's
    TUNNEL_PID=""
}
# Ray's processes of the user (not the SSH connections Ray's command runner keeps open a while).
ray_processes() { ps -o pid=,args= -u "$NODE_USER" 2>/dev/null | grep -v -e "ssh" -e "sleep" | grep -i "ray" || true; }
# A command as the user, in the user's checkout (runuser keeps the working directory).
as_user() { (cd "$CLIENT" && runuser -u "$NODE_USER" -- env RAY_TMPDIR="$RAY_TMPDIR" "$@"); }
fail() { printf 'test-cluster-launch: FAILED: %s\n' "$*" >&2; exit 1; }

cleanup() {
    local rc=$?
    set +e
    stop_tunnel
    if [ "$rc" -ne 0 ] && [ -f "$CFG" ] && [ -x "$RAY" ]; then
        as_user timeout 180 "$RAY" down -y "$CFG" >"$WORK/down-after-failure.log" 2>&1
    fi
    if id "$NODE_USER" >/dev/null 2>&1; then
        pkill -KILL -u "$NODE_USER" 2>/dev/null
        sleep 1
        # What its processes left in the shared /tmp: the client's cached cluster configs,
        # SSH control sockets, Python's and torch's temporary folders.
        find /tmp -maxdepth 1 -user "$NODE_USER" -exec rm -rf {} + 2>/dev/null
        userdel -r "$NODE_USER" >/dev/null 2>&1
    fi
    [ -n "$SSHD_PID" ] && kill "$SSHD_PID" 2>/dev/null
    rm -rf "$WORK" /tmp/rlct
    [ "$rc" -eq 0 ] && echo "test-cluster-launch: passed" || echo "test-cluster-launch: failed (exit $rc)" >&2
    exit "$rc"
}
trap cleanup EXIT

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

say "sshd"
if ! (exec 3<>/dev/tcp/127.0.0.1/22) 2>/dev/null; then
    mkdir -p /run/sshd
    ssh-keygen -A >/dev/null
    /usr/sbin/sshd -D -p 22 -o ListenAddress=127.0.0.1 -o ListenAddress=127.0.0.2 &
    SSHD_PID=$!
    for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/22) 2>/dev/null && break; sleep 0.2; done
fi
for ip in 127.0.0.1 127.0.0.2; do
    ssh -q -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
        -i "$WORK/id_ed25519" "$NODE_USER@$ip" true || fail "cannot ssh to $NODE_USER@$ip"
done

say "the cluster config: scripts/cluster-local.yaml with this machine's IPs, user and key"
as_user "$RAY" get-auth-token --generate >/dev/null
# Only what one host needs: two node IPs instead of auto-detection (both nodes would
# report this host's address, and the local provider tells its nodes apart by IP), a
# dashboard-agent port for each (its fixed default, 52365, can be bound once per host,
# and a Ray job needs the agent), and no `ray stop` before the worker's `ray start`: on
# one host as one user it would stop the head too. (`ray down`'s own `ray stop` stays:
# that is what must work.)
"$PY" - "$ROOT/scripts/cluster-local.yaml" "$CFG" "$NODE_USER" "$WORK/id_ed25519" <<'EOF'
import sys

import yaml

source, out, user, key = sys.argv[1:]
cfg = yaml.safe_load(open(source))
cfg["cluster_name"] = "rlscale-launch-test"
cfg["provider"].update(head_ip="127.0.0.1", worker_ips=["127.0.0.2"])
cfg["min_workers"] = cfg["max_workers"] = 1
cfg["auth"] = {"ssh_user": user, "ssh_private_key": key}
cfg["head_start_ray_commands"][-1] += " --node-ip-address=127.0.0.1 --dashboard-agent-listen-port=52371"
cfg["worker_start_ray_commands"] = [c for c in cfg["worker_start_ray_commands"] if not c.endswith("ray stop")]
cfg["worker_start_ray_commands"][-1] += " --node-ip-address=127.0.0.2 --dashboard-agent-listen-port=52372"
yaml.safe_dump(cfg, open(out, "w"), sort_keys=False)
EOF

say "ray up"
as_user timeout 1200 "$RAY" up -y --no-config-cache "$CFG" >"$WORK/up.log" 2>&1 || { tail -40 "$WORK/up.log"; fail "ray up"; }
grep -q "\.venv" <(ssh -q -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -i "$WORK/id_ed25519" \
    "$NODE_USER@127.0.0.1" "ls -a ~/rlscale") || fail "the node has no venv of its own"
echo "ray up: done; waiting for the worker node (the head's autoscaler sets it up)"
for _ in $(seq 180); do
    nodes=$(as_user "$RAY" exec "$CFG" "RAY_AUTH_MODE=token ~/rlscale/.venv/bin/python -c 'import ray; ray.init(logging_level=\"ERROR\"); print(\"alive\", sum(n[\"Alive\"] for n in ray.nodes()))'" 2>/dev/null | grep -o "alive [0-9]*" | cut -d" " -f2 || true)
    [ "${nodes:-0}" -ge 2 ] && break
    sleep 5
done
[ "${nodes:-0}" -ge 2 ] || fail "the worker node did not join (nodes alive: ${nodes:-0})"
echo "nodes alive: $nodes"

say "ray dashboard (SSH tunnel) and ray job submit"
as_user "$RAY" dashboard -p 8266 "$CFG" >"$WORK/dashboard.log" 2>&1 &
TUNNEL_PID=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8266) 2>/dev/null && break; sleep 0.3; done
# Right after `ray up` the nodes' job agents may not be up yet ("No available agent to
# submit job, please try again later"): the job was not created, so submitting again is safe.
for attempt in $(seq 12); do
    if as_user env RAY_AUTH_MODE=token timeout 600 "$RAY" job submit --address http://127.0.0.1:8266 \
        --working-dir . -- python -m rlscale.train cartpole --n-actors 2 --total-frames 20000 >"$WORK/job.log" 2>&1; then
        break
    fi
    grep -q "No available agent to submit job" "$WORK/job.log" || { cat "$WORK/job.log"; fail "ray job submit"; }
    [ "$attempt" -lt 12 ] || { cat "$WORK/job.log"; fail "ray job submit: no job agent after 12 tries"; }
    echo "the job agents are not up yet; submitting again in 5 s"
    sleep 5
done
cat "$WORK/job.log"
grep -q "2 Ray actors on 2 nodes" "$WORK/job.log" || fail "the job's actors did not run on both nodes"
run_dir=$(sed -n 's/.*run directory: //p' "$WORK/job.log" | head -1)
case "$run_dir" in
    "$HOME_DIR"/rlscale-runs/*) ;;
    *) fail "the job's run directory is '$run_dir', not under ~/rlscale-runs on the head" ;;
esac
as_user "$RAY" exec "$CFG" "ls $run_dir/events.out.tfevents.* $run_dir/summary.json" || fail "no events in $run_dir on the head"
stop_tunnel

say "ray rsync-down: the runs, from the head to the user's checkout"
as_user "$RAY" rsync-down "$CFG" '~/rlscale-runs/' runs/ >"$WORK/rsync-down.log" 2>&1 \
    || { cat "$WORK/rsync-down.log"; fail "ray rsync-down"; }
ls "$CLIENT/runs/$(basename "$run_dir")"/events.out.tfevents.* || fail "the run's events did not come down"

say "ray down"
as_user timeout 300 "$RAY" down -y "$CFG" >"$WORK/down.log" 2>&1 || { tail -20 "$WORK/down.log"; fail "ray down"; }
for _ in $(seq 20); do [ -z "$(ray_processes)" ] && break; sleep 0.5; done
if [ -n "$(ray_processes)" ]; then
    ray_processes | head -20
    fail "Ray processes left after ray down"
fi
echo "no Ray process of $NODE_USER left"
