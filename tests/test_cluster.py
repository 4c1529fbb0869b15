"""A simulated Ray cluster on this machine: a head and two worker nodes (ray.cluster_utils).

Every node is a real raylet with its own resources; actors on a removed node
die exactly as they would when a machine is lost.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import ray
import yaml

from rlscale.distributed.ray_pool import RayPool, actor_cpu_share
from rlscale.train import main as train_main
from tests.test_rollout import (
    assert_episodes_consistent,
    cartpole,
    check_layout,
    episode_ledger,
    weights_for,
)

# slow: a local Ray cluster of 3 nodes (CI runs it: .ci/run).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def simulated_cluster():
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    # Ray notices a lost node within ~1.5 s instead of its default tens of seconds.
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3}})
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


@pytest.fixture(autouse=True)
def quick_fallback_for_a_lost_node(monkeypatch):
    """A replacement actor waits 3 s for a free CPU, not the real 10, before it starts without one.

    No node comes back on this simulated cluster, so the wait only costs time
    (twice per module); the fallback after it is what these tests check.
    """
    monkeypatch.setattr(RayPool, "PLACEMENT_TIMEOUT", 3.0)


def raylet_alive(node) -> bool:  # noqa: ANN001 - a ray._private.node.Node
    return all(info.process.poll() is None for info in node.all_processes.get("raylet", []))


@pytest.fixture
def cluster(simulated_cluster):
    """The module's cluster with a head and two live worker nodes, no driver connected.

    One cluster for the module (starting a head and two nodes took seconds per
    test); a node that an earlier test removed or killed is replaced first.
    """
    c = simulated_cluster
    if ray.is_initialized():
        ray.shutdown()
    for node in list(c.worker_nodes):
        if not raylet_alive(node):
            c.remove_node(node, allow_graceful=False)  # its other processes too
    while len(c.worker_nodes) < 2:
        c.add_node(num_cpus=1)
    c.wait_for_nodes()
    yield c, sorted(c.worker_nodes, key=lambda node: node.node_id)
    if ray.is_initialized():
        ray.shutdown()


def test_actor_cpu_shares_pack_onto_nodes():
    assert actor_cpu_share([2.0], 2) == 1.0
    assert actor_cpu_share([2.0], 4) == 0.5
    assert actor_cpu_share([1.0, 1.0, 1.0], 3) == 1.0
    assert actor_cpu_share([1.0, 1.0, 1.0], 4) == 0.5  # 3/4 would leave one actor unplaced
    assert actor_cpu_share([0.0, 1.0, 1.0], 5) == pytest.approx(1 / 3)
    assert actor_cpu_share([16.0, 16.0], 8) == 1.0


@pytest.mark.timeout(240)
def test_a_ray_job_joins_its_cluster_spreads_actors_and_learns(cluster, tmp_path, capsys, monkeypatch):
    """As ``ray job submit`` starts an entrypoint: $RAY_ADDRESS names the cluster and Ray's job
    variable is set; no --address, no --run-dir. The run joins the cluster (not a Ray of its
    own) and is written under ~/rlscale-runs, which outlives the job's working directory."""
    c, _ = cluster
    monkeypatch.setenv("RAY_ADDRESS", c.address)
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RLSCALE_RUNS", raising=False)
    monkeypatch.chdir(tmp_path / "..")
    code = train_main(["cartpole", "--n-actors", "3", "--total-frames", "150000", "--stop-return", "150"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "3 Ray actors on 3 nodes" in out
    assert "stop: mean return" in out  # learned: the mean of 20 episodes reached 150
    (run_dir,) = (tmp_path / "rlscale-runs").iterdir()
    assert f"run directory: {run_dir}\n" in out and f"tensorboard --logdir {tmp_path / 'rlscale-runs'}\n" in out
    assert list(run_dir.glob("events.out.tfevents.*"))


# Before the tests that lose a node: the cluster is whole for it without being repaired (tests run in file order).
@pytest.mark.timeout(240)
def test_a_measurements_races_run_side_by_side_on_the_clusters_nodes(cluster, tmp_path, capsys):
    """rlscale measure --address: the races join the cluster as Ray tasks and Ray spreads them over its nodes; the
    measurement leaves the cluster as it found it."""
    from rlscale.measure import main as measure_main

    c, _ = cluster
    run_dir = tmp_path / "run"
    assert train_main(["cartpole", "--pool", "serial", "--goals", "30", "--stop-return", "30", "--n-envs", "8",
                       "--log-interval", "600", "--run-dir", str(run_dir)]) == 0
    code = measure_main([str(run_dir), "--address", c.address, "--at-once", "2", "--goal", "45", "--batches", "0.5",
                         "2", "--races", "2", "--cap-updates", "400", "--out", str(tmp_path / "m.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "racing 2 races at once (Ray tasks on 3 nodes, 3 CPUs)" in out
    nodes = {race["node"] for race in json.loads((tmp_path / "m.json").read_text())["races"]}
    assert len(nodes) >= 2, nodes
    assert not ray.is_initialized()


@pytest.mark.timeout(240)
def test_losing_a_node_replaces_its_actors_and_keeps_counts(cluster, capsys):
    c, workers = cluster
    cfg = cartpole(n_envs=12, vector_size=2, warmup_max_steps=0, n_actors=3, address=c.address)
    spec, weights = weights_for(cfg)
    pool = RayPool(cfg, spec)
    ledger: dict[int, list[int]] = {}
    dones: Counter = Counter()
    steps: Counter = Counter()
    try:
        before = pool.placement()
        assert len(set(before)) == 3  # one actor per node
        episode_ledger(pool, weights, 10, ledger, dones, steps)
        lost = workers[0].node_id
        lost_actors = before.count(lost)
        assert lost_actors == 1
        c.remove_node(workers[0])
        batch = episode_ledger(pool, weights, 10, ledger, dones, steps)
        # The run goes on at full size, on the nodes that are left.
        check_layout(batch, 5, 12, spec.obs_shape)
        after = pool.placement()
        assert lost not in after and len(after) == 3
        assert pool.failures == lost_actors
        assert "died (its process or node was lost); replacing it on the nodes left" in capsys.readouterr().out
        assert_episodes_consistent(ledger, dones, steps)  # counters stay consistent
    finally:
        pool.close()


def test_cluster_yaml_passes_rays_own_validation():
    from ray.autoscaler._private.util import prepare_config, validate_config

    for name in ("cluster.yaml", "cluster-local.yaml"):
        config = yaml.safe_load((ROOT / "scripts" / name).read_text())
        prepared = prepare_config(config)  # fills defaults as `ray up` does
        validate_config(prepared)  # Ray's JSON schema for cluster configs
        assert prepared["cluster_name"].startswith("rlscale")
        setup = " ".join(prepared.get("setup_commands", []))
        assert "install.sh" in setup
        # Source only (.gitignore keeps out .venv and runs/), and the nodes' venv on PATH for `ray stop`.
        assert prepared["rsync_filter"] == [".gitignore"] and "rlscale/.venv/bin" in setup
        start = " ".join(prepared["head_start_ray_commands"])
        assert "--dashboard-host=127.0.0.1" in start and "RAY_AUTH_MODE=token" in start
    # The validator does reject a broken config (so passing it means something).
    broken = yaml.safe_load((ROOT / "scripts" / "cluster-local.yaml").read_text())
    broken["head_node_typo"] = "head"
    with pytest.raises(Exception, match="head_node_typo"):
        validate_config(prepare_config(broken))


def test_local_cluster_yaml_works_on_one_host():
    """A worker's `ray stop` stops every Ray process of the user on its machine, the head's
    too where both run (one host, as scripts/test-cluster-launch.sh has it): a worker skips
    it where a GCS server (a head) of the user runs. Each node advertises the IP it was
    reached at, the local provider's name for it."""
    config = yaml.safe_load((ROOT / "scripts" / "cluster-local.yaml").read_text())
    worker = config["worker_start_ray_commands"]
    stops = [c for c in worker if "ray stop" in c]
    assert stops == ['pgrep -u "$(id -u)" -x gcs_server >/dev/null || ~/rlscale/.venv/bin/ray stop']
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = config[key][-1]
        assert "ray start" in start and "RAY_AUTH_MODE=token" in start
        assert "--node-ip-address=\"$(echo $SSH_CONNECTION | cut -d' ' -f3)\"" in start
        assert "--dashboard-agent-listen-port=0" in start  # 52365 can be bound once per host


def test_a_workers_ray_stop_is_skipped_where_a_head_of_the_user_runs(tmp_path):
    """The worker's guard, run for real: with a process of this user named gcs_server (what
    `ray stop` and pgrep know a head's GCS by) it stops nothing."""
    import shutil

    config = yaml.safe_load((ROOT / "scripts" / "cluster-local.yaml").read_text())
    (guarded,) = [c for c in config["worker_start_ray_commands"] if "ray stop" in c]
    guarded = guarded.replace("~/rlscale/.venv/bin/ray stop", "echo stopped")
    fake = tmp_path / "gcs_server"
    shutil.copy(shutil.which("sleep"), fake)
    head = subprocess.Popen([str(fake), "60"])
    try:
        out = subprocess.run(["bash", "-c", guarded], capture_output=True, text=True, check=True).stdout
        assert out == "", out
    finally:
        head.kill()
        head.wait()
    # Where no such process runs, it stops what a stale Ray left.
    elsewhere = guarded.replace("gcs_server", "rlscale_nohead")
    assert subprocess.run(["bash", "-c", elsewhere], capture_output=True, text=True).stdout == "stopped\n"


def _doc_bash_commands(text: str) -> list[str]:
    """The commands of a page's ```bash blocks: a line ending in \\ continues one; blank and
    comment-only lines are none."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        lines = block.splitlines()
        while lines:
            command = lines.pop(0)
            while command.endswith("\\"):
                command += "\n" + lines.pop(0)
            if command.strip() and not command.lstrip().startswith("#"):
                commands.append(command)
    return commands


def test_the_launch_test_runs_docs_cluster_commands_with_the_changes_the_page_names():
    """scripts/test-cluster-launch.sh reads its commands from docs/cluster.md: every one of the
    page's bash blocks, as written but for the changes the page lists under "The launch test"
    (`written` → `run`), no more and no fewer."""
    text = (ROOT / "docs" / "cluster.md").read_text()
    section = text[text.index("## The launch test"):]
    section = section[: section.index("\n## ")]
    named = re.findall(r"^\* `([^`]+)` → `([^`]+)`", section, re.M)
    listed = json.loads(subprocess.run(["bash", str(ROOT / "scripts" / "test-cluster-launch.sh"), "--list"],
                                       capture_output=True, text=True, check=True).stdout)
    assert [tuple(change) for change in listed["changes"]] == named
    expected = []
    for command in _doc_bash_commands(text):
        for written, run in named:
            command = command.replace(written, run)
        expected.append(command)
    assert listed["commands"] == expected
    assert len(expected) >= 10 and all(written in text for written, _ in named)


def test_docs_cluster_commands_authenticate_and_close_their_tunnel():
    commands = [c.split("#")[0] for c in _doc_bash_commands((ROOT / "docs" / "cluster.md").read_text())]
    # A node joining a token-authenticated head needs RAY_AUTH_MODE=token (Ray 2.60 turns it on
    # by itself only for a head and for `--address auto`): AuthenticationError without it.
    starts = [c for c in commands if "ray start" in c]
    assert any("--address=" in c for c in starts) and all(c.startswith("RAY_AUTH_MODE=token ") for c in starts)
    assert all("RAY_AUTH_MODE=token" in c for c in commands if "ray status" in c or "ray job" in c)
    # The tunnel is one ssh of its own (`-S none`: no connection shared with Ray's commands, whose
    # ControlMaster kept `ray dashboard`'s port open after it was killed and after `ray down`),
    # closed by its pid before `ray down`.
    (tunnel,) = [i for i, c in enumerate(commands) if "-L 8266:" in c]
    assert commands[tunnel].startswith("ssh -N -S none ") and commands[tunnel].rstrip().endswith("& TUNNEL=$!")
    assert not any("ray dashboard" in c for c in commands)
    kills = [i for i, c in enumerate(commands) if c.rstrip() == "kill $TUNNEL"]
    downs = [i for i, c in enumerate(commands) if c.startswith("ray down")]
    assert len(kills) == 1 and tunnel < kills[0] < downs[0]


@pytest.mark.timeout(240)
def test_training_run_survives_losing_a_node(cluster, tmp_path, capsys):
    """The whole training loop, with a worker node's raylet killed while it runs (as a lost machine):
    the run goes on, and the console says so in a line each, Ray's notices in full in the run directory."""
    import json
    import os
    import signal
    import threading
    import time

    c, workers = cluster
    run_dir = tmp_path / "run"
    result: dict = {}

    def train() -> None:
        result["code"] = train_main(["cartpole", "--address", c.address, "--n-actors", "3",
                                     "--total-frames", "10000", "--checkpoint-every", "50",
                                     "--run-dir", str(run_dir)])

    thread = threading.Thread(target=train)
    thread.start()
    deadline = time.monotonic() + 120
    while not (run_dir / "summary.json").exists():  # the first checkpoint: training is under way
        assert time.monotonic() < deadline and thread.is_alive(), "training did not start"
        time.sleep(0.2)
    os.kill(workers[1].all_processes["raylet"][0].process.pid, signal.SIGKILL)
    thread.join(timeout=200)
    assert not thread.is_alive() and result["code"] == 0
    out = capsys.readouterr().out
    assert "died (its process or node was lost); replacing it on the nodes left" in out and "done: 10,000 agent steps" in out
    # Ray's "Raylet is terminated" notice (~20 of its log lines, printed twice) is one line, once.
    notices = run_dir / "ray-notices.log"
    told = [line for line in out.splitlines() if line.startswith("Ray: Raylet is terminated.")]
    assert len(told) == 1 and told[0].endswith(f"(in full: {notices})"), out
    assert "Last 20 lines of the Raylet logs" not in out and "(raylet)" not in out
    assert "Last 20 lines of the Raylet logs" in notices.read_text()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["finished"] and summary["agent_steps"] == 10_000
    assert summary["updates"] == 10_000 // 40  # every update kept its full batch of 8 envs x 5 steps


def test_where_a_run_joins_and_writes(monkeypatch, tmp_path):
    """--address, else $RAY_ADDRESS (not the Jobs API's http:// one), else a Ray of the run's own;
    runs under $RLSCALE_RUNS, else ~/rlscale-runs in a Ray job, else ./runs."""
    from rlscale.config import runs_root
    from rlscale.distributed.ray_pool import cluster_address

    for name in ("RAY_ADDRESS", "RLSCALE_RUNS", "RAY_JOB_CONFIG_JSON_ENV_VAR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cluster_address("") == ("", "") and runs_root() == Path("runs")
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    assert cluster_address("") == ("", "")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert cluster_address("") == ("10.0.0.1:6379", "$RAY_ADDRESS")
    assert cluster_address("auto") == ("auto", "--address")
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")
    assert runs_root() == tmp_path / "rlscale-runs"
    monkeypatch.setenv("RLSCALE_RUNS", "~/shared")
    assert runs_root() == tmp_path / "shared"
