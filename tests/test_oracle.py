"""The oracle schedule and the cluster clock: hand-worked answers, a real run's stages, bad input."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from rlscale.control.cluster_clock import ClusterClock, ElasticCluster, cluster_batch
from rlscale.control.cost import Fit
from rlscale.reports.oracle import (
    CellStages,
    Schedule,
    best_fixed,
    bound,
    cheapest_within,
    cluster_costs,
    equal_speed,
    equal_speed_text,
    held_out_gain,
    oracle_schedule,
    run_stages,
    schedule_cost,
    stage_medians,
)
from rlscale.reports.runs import load_run
from tests.conftest import run_in_process

FIT = Fit(overhead=0.1, per_observation=0.001)
CLUSTER = ElasticCluster(max_nodes=4, node_batch=100, round_trip=0.05)


def test_the_cluster_clock_on_a_hand_worked_sequence():
    # T_N(B) = a + b*B/n(B) + c (n > 1), n(B) = min(4, ceil(B/100)); by hand:
    #   B=50:   n=1, 0.1 + 0.05            = 0.15,     node-s 0.15
    #   B=200:  n=2, 0.1 + 0.2/2 + 0.05    = 0.25,     node-s 0.50 (fills two nodes exactly: not three)
    #   B=250:  n=3, 0.1 + 0.25/3 + 0.05   = 0.23333,  node-s 0.70
    #   B=1000: n=4 (the cap), 0.1 + 1/4 + 0.05 = 0.40, node-s 1.60
    expected = {50: (1, 0.15, 0.15), 200: (2, 0.25, 0.5), 250: (3, 0.7 / 3, 0.7), 1000: (4, 0.4, 1.6)}
    clock = ClusterClock(CLUSTER)
    for batch, (nodes, seconds, node_seconds) in expected.items():
        assert CLUSTER.nodes_for(batch) == nodes
        assert CLUSTER.update_seconds(FIT, batch) == pytest.approx(seconds)
        assert CLUSTER.node_seconds(FIT, batch) == pytest.approx(node_seconds)
        clock.tick(batch)
    clock.tick(200, updates=3)
    assert clock.wall_seconds(FIT) == pytest.approx(0.15 + 4 * 0.25 + 0.7 / 3 + 0.4)
    assert clock.node_seconds(FIT) == pytest.approx(0.15 + 4 * 0.5 + 0.7 + 1.6)
    # Priced with the fit it is read with: updates before the fit was identified count too.
    again = ClusterClock(CLUSTER)
    again.load_state_dict(clock.state_dict())
    assert again.updates == {50.0: 1, 200.0: 4, 250.0: 1, 1000.0: 1}


def test_the_cluster_batch_on_hand_worked_candidates():
    # Up to 4 nodes of 100, a = 0.1, b = 0.001, c = 0.05. T_N: B=100 0.2 (one node), B=200 0.25, B=400 0.25.
    # Wall time per unit of progress T_N(B)(1 + B_crit/B), and node-seconds n times that, by hand:
    #   B_crit 50:  100: 0.300 (node-s 0.300); 200: 0.3125 (0.625); 400: 0.28125 (1.125), the fastest.
    #     Within 5 % (0.2953): 400 alone. Within 7 % (0.3009): 100 too, and it costs the least.
    #   B_crit 200: 100: 0.600 (0.600); 200: 0.500 (1.000); 400: 0.375 (1.500), the fastest.
    #     Within 40 % (0.525): 200 and 400; 200 costs less.
    #   B_crit 10:  100: 0.22; 400: 0.25625: one node is the fastest and the cheapest.
    candidates = [400, 100, 200]
    assert cluster_batch(FIT, CLUSTER, 50, 0.05, candidates) == 400
    assert cluster_batch(FIT, CLUSTER, 50, 0.07, candidates) == 100
    assert cluster_batch(FIT, CLUSTER, 200, 0.40, candidates) == 200
    assert cluster_batch(FIT, CLUSTER, 200, 0.05, candidates) == 400
    assert cluster_batch(FIT, CLUSTER, 10, 0.0, candidates) == 100
    with pytest.raises(ValueError):
        cluster_batch(FIT, CLUSTER, 50, 0.05, [])


def test_the_cluster_batch_with_a_price_per_node_second_on_hand_worked_candidates():
    # The same candidates; the least T_N(B)(1 + B_crit/B)(1 + price n(B)), the slack unused. By hand, B_crit 50:
    #   price 0.02: 100: 0.300 x 1.02 = 0.306; 200: 0.3125 x 1.04 = 0.325; 400: 0.28125 x 1.08 = 0.30375, the least.
    #   price 0.03: 100: 0.309; 200: 0.33125; 400: 0.315: one node (the two cross at 0.01875 / 0.825 = 0.0227).
    #   B_crit 200, price 0.3: 100: 0.6 x 1.3 = 0.78; 200: 0.5 x 1.6 = 0.8; 400: 0.375 x 2.2 = 0.825: one node.
    candidates = [400, 100, 200]
    assert cluster_batch(FIT, CLUSTER, 50, 0.05, candidates, price=0.02) == 400
    assert cluster_batch(FIT, CLUSTER, 50, 0.05, candidates, price=0.03) == 100
    assert cluster_batch(FIT, CLUSTER, 50, 0.5, candidates, price=0.03) == 100  # the slack does not enter
    assert cluster_batch(FIT, CLUSTER, 200, 0.05, candidates, price=0.3) == 100
    assert cluster_batch(FIT, CLUSTER, 200, 0.05, candidates, price=0.2) == 400


def test_one_node_is_this_machine():
    one = ElasticCluster(max_nodes=1, node_batch=100, round_trip=0.05)
    for batch in (10, 100, 5000):
        assert one.update_seconds(FIT, batch) == pytest.approx(FIT.seconds(batch))  # no round trip, no split


@pytest.mark.parametrize("nodes, node_batch, round_trip", [(0, 100, 0.0), (4, 0, 0.0), (4, 100, -1.0),
                                                            (4, math.inf, 0.0)])
def test_an_impossible_cluster_is_refused(nodes, node_batch, round_trip):
    with pytest.raises(ValueError):
        ElasticCluster(nodes, node_batch, round_trip)


def test_the_oracle_on_hand_worked_stages():
    # Two cells, two stages, three seeds each (medians are the middle seed):
    #   cell 0: stage costs [2, 8]  -> fixed 10
    #   cell 1: stage costs [5, 4]  -> fixed 9: the best fixed cell
    #   oracle: cell 0 for stage 1 (2), cell 1 for stage 2 (4) = 6, a 1.5x gain
    cell0 = np.array([[1.0, 9.0], [2.0, 8.0], [3.0, 7.0]])
    cell1 = np.array([[5.0, 3.0], [5.0, 4.0], [6.0, 5.0]])
    costs = np.stack([stage_medians(cell0), stage_medians(cell1)])
    assert costs.tolist() == [[2.0, 8.0], [5.0, 4.0]]
    assert best_fixed(costs).cells == (1, 1) and best_fixed(costs).cost == 9.0
    assert oracle_schedule(costs).cells == (0, 1) and oracle_schedule(costs).cost == 6.0
    assert bound("t", "min", [cell0, cell1]).gain == pytest.approx(1.5)


def test_held_out_catches_a_lucky_stage():
    # Cell 0's first stage was fast on seed 0 only. Chosen on seed 0, the oracle takes cell 0 there
    # (1 + 4 = 5 against fixed cell 1's 7); costed on seed 1 that schedule is 5 + 4 = 9 against 7: 7/9.
    # Chosen on seed 1, the oracle is cell 1 throughout (7), as the fixed cell: 1. Geometric mean: sqrt(7/9).
    cell0 = np.array([[1.0, 8.0], [5.0, 8.0]])
    cell1 = np.array([[3.0, 4.0], [3.0, 4.0]])
    assert held_out_gain([cell0, cell1]) == pytest.approx(math.sqrt(7 / 9))
    assert held_out_gain([cell0[:1], cell1]) is None  # a cell of one seed has no halves


def test_a_stage_most_seeds_did_not_finish_is_never_chosen():
    cell0 = np.array([[1.0, math.inf], [1.0, math.inf], [1.0, 2.0]])  # reaches the top goal on 1 of 3 seeds
    cell1 = np.array([[4.0, 4.0], [4.0, 4.0], [4.0, 4.0]])
    costs = np.stack([stage_medians(cell0), stage_medians(cell1)])
    assert oracle_schedule(costs).cells == (0, 1)
    assert best_fixed(costs).cells == (1, 1)
    assert schedule_cost(costs, (0, 0)) == math.inf


def test_the_fewest_node_hours_within_the_slack_on_hand_worked_stages():
    # Cluster minutes and node-hours per stage, two stages:
    #   cell 0 (one node): time [4, 4], node-h [4, 4]  -> 8 min, 8 node-h
    #   cell 1:            time [3, 2], node-h [6, 4]  -> 5 min, 10 node-h
    #   cell 2 (fastest):  time [2, 2], node-h [8, 8]  -> 4 min, 16 node-h
    # Within 25 % of cell 2's 4 min (5 min): (1, 1) 5 min 10 node-h, (1, 2) 5 and 14, (2, 1) 4 and 12, (2, 2);
    # the cheapest is cell 1 throughout, 10/16 of the fastest cell's node-hours. Within 5 % (4.2 min) only
    # (2, 1) and (2, 2): 12/16. At 0 % (4 min, a sum equal to the limit counts) still (2, 1).
    times = np.array([[4.0, 4.0], [3.0, 2.0], [2.0, 2.0]])
    node_hours = np.array([[4.0, 4.0], [6.0, 4.0], [8.0, 8.0]])
    assert cheapest_within(node_hours, times, 5.0) == Schedule((1, 1), 10.0)
    assert cheapest_within(node_hours, times, 4.2) == Schedule((2, 1), 12.0)
    assert cheapest_within(node_hours, times, 4.0) == Schedule((2, 1), 12.0)
    assert cheapest_within(node_hours, times, 3.9) is None
    # Per seed (two identical seeds: held out reads what in sample does).
    found = equal_speed([np.stack([row, row]) for row in times], [np.stack([row, row]) for row in node_hours], 0.25)
    assert found.fastest == Schedule((2, 2), 16.0) and found.fastest_time == 4.0
    assert found.oracle == Schedule((1, 1), 10.0) and found.oracle_time == 5.0
    assert found.node_hours == pytest.approx(10 / 16)
    assert found.held_out == pytest.approx((10 / 16, 5 / 4))


def test_the_equal_speed_bound_held_out_is_chosen_on_one_half_and_costed_on_the_other():
    # Two cells, two stages, seeds 0 (half A) and 1 (half B); slack 50 %. Cell 1 is the fastest on both halves (4 min).
    #   half A: cell 0 time [4, 4] node-h [2, 4]; cell 1 time [2, 2] node-h [8, 8]. Within 6 min: (0, 1) 6 min
    #     10 node-h, (1, 0) 6 and 12, (1, 1) 4 and 16: it chooses (0, 1).
    #   half B: cell 0 time [6, 4] node-h [3, 4]: (0, 1) takes 8 min; (1, 0) 2 + 4 = 6 min, 8 + 4 = 12 node-h:
    #     it chooses (1, 0).
    #   (0, 1) costed on B: 3 + 8 = 11 node-h and 6 + 2 = 8 min, against cell 1's 16 and 4: 11/16 and 2.
    #   (1, 0) costed on A: 8 + 4 = 12 node-h and 2 + 4 = 6 min: 3/4 and 3/2.
    #   Held out: (sqrt(11/16 * 3/4), sqrt(2 * 3/2)); chosen and costed on one half it would read
    #   (sqrt(10/16 * 12/16), 3/2). In sample (means of two seeds): cell 0 time [5, 4] node-h [2.5, 4];
    #   (0, 1) takes 7 min, so (1, 0): 6 min, 12 node-h, 0.75x cell 1's 16.
    times = [np.array([[4.0, 4.0], [6.0, 4.0]]), np.array([[2.0, 2.0], [2.0, 2.0]])]
    node_hours = [np.array([[2.0, 4.0], [3.0, 4.0]]), np.array([[8.0, 8.0], [8.0, 8.0]])]
    found = equal_speed(times, node_hours, 0.5)
    assert found.oracle == Schedule((1, 0), 12.0) and found.node_hours == pytest.approx(0.75)
    assert found.held_out == pytest.approx((math.sqrt(11 / 16 * 3 / 4), math.sqrt(3)))
    assert found.held_out_fastest == (1, 1)


def test_the_equal_speed_report_says_when_the_halves_disagree_on_the_fastest_cell():
    # One stage. Batch 100 runs on one node (T = 0.1 + 0.1 = 0.2 s), 400 on four (0.1 + 0.1 + 0.05 = 0.25 s).
    # Batch 100 took 60 updates (12 s) on seed 0 and 600 (120 s) on seed 1; 400 took 100 (25 s) on both. The
    # whole sample's fastest cell is 400 (100's median is 66 s), half A's is 100, half B's 400.
    cells = [CellStages(100.0, 1e-3, np.array([[60.0], [600.0]]), np.zeros((2, 1))),
             CellStages(400.0, 2e-3, np.array([[100.0], [100.0]]), np.zeros((2, 1)))]
    text = "\n".join(equal_speed_text(cells, [10.0], equal_speed(*cluster_costs(cells, FIT, CLUSTER), 0.05),
                                       CLUSTER.max_nodes))
    assert "fastest fixed: 400 lr 0.002 to 10" in text and "a saving of 0%" in text
    assert "the halves' fastest cells, 100 lr 0.001 and 400 lr 0.002, are not all the whole sample's" in text


def test_the_fewest_node_hours_within_the_slack_is_the_exhaustive_answer():
    rng = np.random.default_rng(0)
    for _ in range(50):
        times, costs = rng.uniform(1, 10, (2, 4, 3))
        # From below the fastest schedule's time (no schedule) to above the slowest's (every one).
        limit = float(rng.uniform(0.9 * times.min(axis=0).sum(), 1.1 * times.max(axis=0).sum()))
        within = [cells for cells in itertools.product(range(4), repeat=3) if schedule_cost(times, cells) <= limit]
        best = min(within, key=lambda cells: schedule_cost(costs, cells), default=None)
        found = cheapest_within(costs, times, limit)
        assert (found.cells if found else None) == best
        if found:
            assert found.cost == pytest.approx(schedule_cost(costs, best))


def test_a_real_runs_stages_are_its_goal_records(tmp_path):
    run_dir = tmp_path / "run"
    result = run_in_process(["rlscale.train", "cartpole", "--pool", "serial", "--agent", "ppo", "--seed", "0",
                             "--total-frames", "40000", "--goals", "30", "60", "1000", "--log-interval", "600",
                             "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr
    goals = json.loads((run_dir / "summary.json").read_text())["goals"]
    updates, seconds = run_stages(load_run(run_dir), [30.0, 60.0, 1000.0])
    # PPO: 4 epochs x 4 minibatches = 16 optimizer steps an update; stages are differences of the records.
    assert updates[0] == pytest.approx(goals["30"]["updates"] / 16)
    assert updates[1] == pytest.approx((goals["60"]["updates"] - goals["30"]["updates"]) / 16)
    assert seconds[1] == pytest.approx(goals["60"]["wall_seconds"] - goals["30"]["wall_seconds"], abs=0.2)
    assert updates[2] == math.inf and seconds[2] == math.inf  # 1000 is never reached


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    out = run_in_process(["rlscale", "oracle", str(tmp_path), "--round-trip", "0.01", "--nodes", "0"])
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--nodes 0" in out.stderr
    out = run_in_process(["rlscale", "oracle", str(tmp_path), "--round-trip", "0.01", "--slack", "-0.1"])
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--slack -0.1" in out.stderr
    run_dir = tmp_path / "sweep" / "one"
    trained = run_in_process(["rlscale.train", "cartpole", "--pool", "serial", "--total-frames", "2000",
                              "--log-interval", "600", "--run-dir", str(run_dir)])
    assert trained.returncode == 0, trained.stderr
    one_cell = run_in_process(["rlscale", "oracle", str(tmp_path / "sweep"), "--round-trip", "0.01",
                               "--goals", "10"])
    assert one_cell.returncode == 2 and one_cell.stderr.count("\n") == 1
    assert "at least two batch sizes" in one_cell.stderr
