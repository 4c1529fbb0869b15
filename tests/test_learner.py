"""The learner: measuring the noise scale must not change training."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from rlscale.agents.a2c import A2CLearner, A2CRows, nstep_returns
from rlscale.agents.gradients import (
    CPU_CHUNK_ROWS,
    PPO_CPU_CHUNK_ROWS,
    backward,
    env_groups,
    pass_count,
    row_chunks,
)
from rlscale.agents.optim import RMSpropTF
from rlscale.agents.ppo import PPOLearner
from rlscale.config import build_config
from rlscale.envs.vector import EnvSpec
from rlscale.models.nets import build_network
from rlscale.rollout.worker import Batch, flat_weights
from tests.floats import largest, sum_tolerance

# These tests hand a learner a few batches and read their measurements: each batch is measured at once
# (test_batches_while_new_environments_settle_stay_out_of_the_noise_averages is about the wait).
AT_ONCE = {"noise_settle": 0}

# The Nature CNN's first conv sums each weight's gradient over its 20x20 output
# positions per row: the longest reduction in these networks.
CONV_POSITIONS = {"mlp": 1, "nature_cnn": 20 * 20}


def random_batch(spec: EnvSpec, n_steps: int, n_envs: int, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    shape = (n_steps, n_envs)
    if spec.is_image:
        obs = rng.integers(0, 256, size=(*shape, *spec.obs_shape), dtype=np.uint8)
    else:
        obs = rng.standard_normal((*shape, *spec.obs_shape)).astype(np.float32)
    return Batch(
        obs=obs,
        actions=rng.integers(0, spec.n_actions, size=shape),
        rewards=rng.choice([-1.0, 0.0, 1.0], size=shape).astype(np.float32),
        terminated=rng.random(shape) < 0.1,
        truncated=rng.random(shape) < 0.05,
        truncation_values=rng.standard_normal(shape).astype(np.float32),
        values=rng.standard_normal(shape).astype(np.float32),
        logprobs=np.zeros(shape, dtype=np.float32),
        bootstrap_values=rng.standard_normal(n_envs).astype(np.float32),
        env_ids=np.arange(n_envs),
    )


SPECS = {
    "mlp": EnvSpec((4,), "float32", 2, False),
    "nature_cnn": EnvSpec((4, 84, 84), "uint8", 6, True),
}


@pytest.mark.parametrize("kind", ["mlp", "nature_cnn"])
@pytest.mark.parametrize("parts_every", [0, 1])
def test_update_with_measurement_equals_update_without(kind, parts_every):
    spec = SPECS[kind]
    n_envs = 8
    torch.manual_seed(0)
    model = build_network(spec, "auto", 64)
    batch = random_batch(spec, 5, n_envs)
    results = []
    start = torch.from_numpy(flat_weights(model))
    for measure in (False, True):
        cfg = build_config("cartpole", None, {**AT_ONCE, "measure_noise": measure, "noise_groups": 4,
                                              "noise_parts_every": parts_every, "n_envs": n_envs,
                                              "optimizer": "rmsprop_tf"})  # steps ~lr*g: tests/floats.py
        learner = A2CLearner.from_config(copy.deepcopy(model), cfg)
        for _ in range(2):  # the second step also exercises the optimizer state
            metrics = learner.update(batch)
        results.append((torch.from_numpy(flat_weights(learner.model)), metrics))
    (plain, m_plain), (measured, m_measured) = results
    # Float rounding only: grouped and whole-batch passes sum the rows in different orders;
    # the weights differ by that rounding times the optimizer's step (its largest: the scale).
    rows = 5 * n_envs * CONV_POSITIONS[kind]
    torch.testing.assert_close(measured, plain, **sum_tolerance(rows, largest(plain - start)))
    assert m_plain["train/grad_norm"] == pytest.approx(m_measured["train/grad_norm"], rel=sum_tolerance(rows)["rtol"])
    assert "noise_raw/grad_sq_total" in m_measured and "noise_raw/grad_sq_total" not in m_plain
    assert ("noise_raw/grad_sq_policy" in m_measured) == (parts_every == 1)


@pytest.mark.parametrize("kind", ["mlp", "nature_cnn"])
def test_parts_sum_to_total(kind):
    """Per env group, the policy and value parts' gradients add up to the total's.

    For each group j, g_total = g_policy + g_value, so |g_total|^2 =
    |g_policy|^2 + |g_value|^2 + 2 g_policy.g_value. The cross term is read off
    the same groups' explicit gradients; the reported norms must satisfy it.
    (The MLP's policy and value have separate trunks: there the cross term is zero.)
    """
    spec = SPECS[kind]
    torch.manual_seed(3)
    model = build_network(spec, "auto", 64)
    cfg = build_config("cartpole", None, {**AT_ONCE, "noise_parts_every": 1, "noise_groups": 4, "n_envs": 8})
    learner = A2CLearner.from_config(model, cfg)
    batch = random_batch(spec, 5, 8)
    returns = nstep_returns(batch, cfg.agent.gamma)
    data = A2CRows(learner.rows(batch.obs), learner.rows(batch.actions), learner.rows(returns),
                   learner.rows(returns - batch.values))
    groups = learner.env_group_rows(np.arange(batch.size), batch.n_envs)
    report = backward(learner.model, learner.route, lambda rows: learner.loss(data, rows), groups,
                      measure=True, parts=True)
    for j, rows in enumerate(groups):
        policy, value, _ = learner.loss(data, rows)
        g_policy = torch.autograd.grad(policy, learner.params, retain_graph=True, materialize_grads=True)
        g_value = torch.autograd.grad(value, learner.params, materialize_grads=True)
        cross = float(sum((a * b).sum() for a, b in zip(g_policy, g_value, strict=True)))
        parts = report.sq_norms["policy"][j] + report.sq_norms["value"][j] + 2 * cross
        assert report.sq_norms["total"][j] == pytest.approx(parts, rel=1e-4)
        assert report.sq_norms["policy"][j] == pytest.approx(float(sum(g.square().sum() for g in g_policy)), rel=1e-4)
        if kind == "mlp":
            assert cross == 0.0


def test_a_lagged_batch_weights_the_policy_gradient_by_truncated_importance():
    """--overlap: rho = min(1, pi/mu) per row; 1 where the acting policy is the current one."""
    spec = SPECS["mlp"]
    torch.manual_seed(0)
    cfg = build_config("cartpole", None, {"overlap": True, "ent_coef": 0.0})
    learner = A2CLearner.from_config(build_network(spec, "auto", 64), cfg)
    batch = random_batch(spec, 5, 8)
    obs, actions = learner.rows(batch.obs), learner.rows(batch.actions)
    advantages = torch.randn(40)
    with torch.no_grad():
        logits, _ = learner.forward(obs)
        current = torch.distributions.Categorical(logits=logits).log_prob(actions)
    rows = np.arange(40)

    def policy_loss(behaviour):
        data = A2CRows(obs, actions, torch.zeros(40), advantages, behaviour)
        return float(learner.loss(data, rows)[0].detach())

    plain = policy_loss(None)
    assert policy_loss(current) == pytest.approx(plain, rel=1e-6)  # on-policy: rho = 1
    assert policy_loss(current + np.log(2.0)) == pytest.approx(0.5 * plain, rel=1e-5)  # mu = 2 pi: rho = 1/2
    assert policy_loss(current - 1.0) == pytest.approx(plain, rel=1e-6)  # pi > mu: truncated at 1


def test_row_chunks_pack_whole_items_near_the_target():
    assert row_chunks([20] * 4, 128) == [[0, 1, 2, 3]]
    assert row_chunks([160] * 4, 128) == [[0], [1], [2], [3]]
    assert row_chunks([24, 24, 16, 16], 40) == [[0, 1], [2, 3]]
    assert row_chunks([300, 10], 128) == [[0], [1]]  # an item bigger than a pass gets its own
    assert row_chunks([5, 5], 0) == [[0, 1]]  # 0: one pass
    assert [len(c) for c in row_chunks([1] * 640, 128)] == [128] * 5


def test_ppo_takes_its_default_minibatch_in_one_pass_on_cpu_and_a2c_passes_of_about_128():
    """The automatic pass size of a convolutional network on CPU is the learner's (measured per agent)."""
    spec = SPECS["nature_cnn"]
    cfg = build_config("pong", "ppo", {})
    ppo = PPOLearner.from_config(build_network(spec, "auto", 64), cfg)
    a2c = A2CLearner.from_config(build_network(spec, "auto", 64), build_config("pong", "a2c", {}))
    assert (ppo.route.chunk_rows, a2c.route.chunk_rows) == (PPO_CPU_CHUNK_ROWS, CPU_CHUNK_ROWS)
    a = ppo.agent
    minibatch = cfg.env.n_envs * a.n_steps // a.n_minibatches  # 8 x 128 / 4
    assert pass_count(minibatch, ppo.route.chunk_rows) == 1 and pass_count(minibatch, CPU_CHUNK_ROWS) == 2
    set_by_hand = PPOLearner.from_config(build_network(spec, "auto", 64),
                                         build_config("pong", "ppo", {"learner_chunk_rows": 64}))
    assert set_by_hand.route.chunk_rows == 64


@pytest.mark.parametrize("measure", [False, True])
def test_passes_of_a_few_rows_give_the_whole_batch_gradient(measure):
    """Gradients summed over passes of 8 rows equal one pass over the batch's 40 (float rounding only)."""
    spec = SPECS["nature_cnn"]
    torch.manual_seed(0)
    model = build_network(spec, "auto", 64)
    batch = random_batch(spec, 5, 8)
    grads = []
    start = torch.from_numpy(flat_weights(model))
    for chunk_rows in (0, 8):
        cfg = build_config("cartpole", None, {**AT_ONCE, "measure_noise": measure, "noise_groups": 4, "n_envs": 8,
                                              "learner_chunk_rows": chunk_rows, "optimizer": "rmsprop_tf"})
        learner = A2CLearner.from_config(copy.deepcopy(model), cfg)
        metrics = learner.update(batch)
        grads.append((torch.from_numpy(flat_weights(learner.model)), metrics))
    (whole, m_whole), (passes, m_passes) = grads
    tolerance = sum_tolerance(40 * CONV_POSITIONS["nature_cnn"], largest(whole - start))
    torch.testing.assert_close(passes, whole, **tolerance)
    assert m_passes["train/grad_norm"] == pytest.approx(m_whole["train/grad_norm"], rel=tolerance["rtol"])


def test_env_groups_hold_whole_environments():
    groups = env_groups(10, 4)
    assert [g.tolist() for g in groups] == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    assert sum(g.size for g in env_groups(3, 8)) == 3


def test_nstep_returns_by_hand():
    """Two envs, three steps: env 0 terminates at t=1, env 1 is truncated at t=0."""
    g = 0.5
    b = Batch(
        obs=np.zeros((3, 2, 1), np.float32), actions=np.zeros((3, 2), np.int64),
        rewards=np.array([[1, 2], [3, 4], [5, 6]], np.float32),
        terminated=np.array([[0, 0], [1, 0], [0, 0]], bool),
        truncated=np.array([[0, 1], [0, 0], [0, 0]], bool),
        truncation_values=np.array([[0, 10], [0, 0], [0, 0]], np.float32),
        values=np.zeros((3, 2), np.float32), logprobs=np.zeros((3, 2), np.float32),
        bootstrap_values=np.array([100, 200], np.float32), env_ids=np.arange(2),
    )
    r = nstep_returns(b, g)
    # env 0: t2 = 5 + .5*100 = 55; t1 = 3 (terminal); t0 = 1 + .5*3 = 2.5
    # env 1: t2 = 6 + .5*200 = 106; t1 = 4 + .5*106 = 57; t0 = 2 + .5*10 = 7 (truncated)
    np.testing.assert_allclose(r[:, 0], [2.5, 3.0, 55.0])
    np.testing.assert_allclose(r[:, 1], [7.0, 57.0, 106.0])


def test_rmsprop_tf_first_step_is_small():
    """TF-style RMSprop: mean square starts at 1, so the first step is lr * g / sqrt(1 + ...)."""
    p = torch.nn.Parameter(torch.tensor([0.0, 0.0]))
    opt = RMSpropTF([p], lr=0.1, alpha=0.99, eps=1e-5)
    p.grad = torch.tensor([0.01, 2.0])
    opt.step()
    ms = 0.99 + 0.01 * torch.tensor([0.01, 2.0]) ** 2
    expected = -0.1 * torch.tensor([0.01, 2.0]) / torch.sqrt(ms + 1e-5)
    torch.testing.assert_close(p.detach(), expected)
    # torch's RMSprop would have moved the small coordinate by ~lr/sqrt(0.01) = 1.0
    assert abs(float(p.detach()[0])) < 2e-3


def test_non_finite_gradient_is_skipped_and_counted():
    spec = SPECS["mlp"]
    cfg = build_config("cartpole", None, {})
    learner = A2CLearner.from_config(build_network(spec, "auto", 64), cfg)
    before = torch.from_numpy(flat_weights(learner.model)).clone()
    batch = random_batch(spec, 5, 8)
    batch.rewards[2, 3] = np.nan
    metrics = learner.update(batch)
    after = torch.from_numpy(flat_weights(learner.model))
    assert torch.equal(before, after)
    assert metrics["train/skipped_updates"] == 1 and learner.updates == 0
    batch.rewards[2, 3] = 0.0
    learner.update(batch)
    assert learner.updates == 1 and learner.skipped_in_a_row == 0


def test_a_resumed_learner_keeps_the_curvature_cadence():
    """The every-k-th-batch measurement of B_P and B_noise continues across a checkpoint, not from 0."""
    spec = SPECS["mlp"]
    # A resumed learner's environments are new, so it would wait to measure: AT_ONCE.
    cfg = build_config("cartpole", None, {**AT_ONCE, "curvature_every": 3})
    learner = A2CLearner.from_config(build_network(spec, "auto", 64), cfg)
    for _ in range(2):
        learner.update(random_batch(spec, 5, 8))
    resumed = A2CLearner.from_config(build_network(spec, "auto", 64), cfg)
    resumed.load_state_dict(learner.state_dict())
    assert resumed.batches == 2
    assert "perf/curvature_seconds" not in resumed.update(random_batch(spec, 5, 8))  # batch 2: not a multiple of 3
    assert "perf/curvature_seconds" in resumed.update(random_batch(spec, 5, 8))  # batch 3: measured


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
def test_batches_while_new_environments_settle_stay_out_of_the_noise_averages(algo):
    """--noise-settle 10 at 5 steps a batch: the first 2 batches of a learner and the 2 after the batch grows
    add no sample to any average (B_simple's, B_P's, B_noise's) and add nothing that would age them; a batch
    that shrinks or keeps its size is measured."""
    spec = SPECS["mlp"]
    cfg = build_config("cartpole", algo, {"noise_settle": 10, "n_steps": 5, "n_envs": 8, "curvature_every": 1,
                                          "noise_parts_every": 1})
    learner = {"a2c": A2CLearner, "ppo": PPOLearner}[algo].from_config(build_network(spec, "auto", 64), cfg)
    emas = learner.noise.emas
    sizes = [8, 8, 8, 16, 16, 16, 8, 8, 12]
    measured = [False, False, True, False, False, True, True, True, False]
    for i, (n_envs, expected) in enumerate(zip(sizes, measured, strict=True)):
        before = {part: (ema.samples, ema.weight, learner.noise.pending[part]) for part, ema in emas.items()}
        metrics = learner.update(random_batch(spec, 5, n_envs, seed=i))
        after = {part: (ema.samples, ema.weight, learner.noise.pending[part]) for part, ema in emas.items()}
        if expected:
            assert all(after[p][0] == before[p][0] + 1 for p in ("total", "policy", "value", "precond", "hessian"))
            assert "perf/curvature_seconds" in metrics
        else:
            # Not even the observations that age the averages at the next sample (PPO's unmeasured minibatches')
            assert after == before and "perf/curvature_seconds" not in metrics, (i, n_envs)
    assert learner.updates == len(sizes) * (1 if algo == "a2c" else cfg.agent.n_epochs * cfg.agent.n_minibatches)


def test_no_settling_measures_from_the_first_batch():
    spec = SPECS["mlp"]
    cfg = build_config("cartpole", None, {**AT_ONCE, "n_envs": 8})
    learner = A2CLearner.from_config(build_network(spec, "auto", 64), cfg)
    learner.update(random_batch(spec, 5, 8))
    assert learner.noise.emas["total"].samples == 1


@pytest.mark.parametrize("parts", [False, True])
def test_gram_route_gives_the_explicit_norms_and_gradient(parts):
    """The big Linear layer's per-group norms from Gram matrices equal autograd's, as does the update."""
    from rlscale.agents.gradients import _per_group_backward

    spec = SPECS["nature_cnn"]
    torch.manual_seed(1)
    model = build_network(spec, "auto", 64)
    cfg = build_config("cartpole", None, {**AT_ONCE, "noise_groups": 4, "n_envs": 8, "noise_parts_every": 1})
    learner = A2CLearner.from_config(model, cfg)
    assert [m.weight.shape for m in learner.route.gram_layers] == [torch.Size([512, 3136])]
    batch = random_batch(spec, 5, 8, seed=3)
    obs = torch.from_numpy(batch.obs)
    actions = torch.from_numpy(batch.actions)
    target = torch.from_numpy(batch.values) + 1.0

    def loss(rows):
        idx = torch.from_numpy(rows)
        logits, value = model(obs.flatten(0, 1)[idx])
        logprob = torch.distributions.Categorical(logits=logits).log_prob(actions.flatten()[idx])
        return -logprob.mean(), (value - target.flatten()[idx]).pow(2).mean(), {}

    groups = learner.env_group_rows(np.arange(40), 8)
    results = []
    for gram in ([], learner.route.gram_layers):
        grad = _per_group_backward(learner.params, loss, groups, measure=True, parts=parts, gram_layers=gram)
        results.append((grad, [p.grad.clone() for p in learner.params]))
        assert model.trunk[7].weight.grad is not None
    (plain, plain_grads), (gram, gram_grads) = results
    for name in plain.sq_norms:
        np.testing.assert_allclose(gram.sq_norms[name], plain.sq_norms[name], rtol=1e-4)
        assert gram.big_sq_norms[name] == pytest.approx(plain.big_sq_norms[name], rel=1e-4)
    tolerance = sum_tolerance(40 * CONV_POSITIONS["nature_cnn"], largest(plain_grads))
    for a, b in zip(plain_grads, gram_grads, strict=True):
        torch.testing.assert_close(a, b, **tolerance)
    # The hooks are gone afterwards: a plain forward pass records nothing.
    assert not model.trunk[7]._forward_hooks


@pytest.mark.parametrize("parts", [False, True])
def test_groups_split_into_passes_give_the_same_norms_and_gradient(parts):
    """A group larger than a pass is differentiated in several passes; its norms and the update do not change."""
    from rlscale.agents.gradients import _per_group_backward

    spec = SPECS["nature_cnn"]
    torch.manual_seed(4)
    model = build_network(spec, "auto", 64)
    cfg = build_config("cartpole", None, {**AT_ONCE, "noise_groups": 4, "n_envs": 8})
    learner = A2CLearner.from_config(model, cfg)
    batch = random_batch(spec, 5, 8, seed=6)
    obs, actions = torch.from_numpy(batch.obs).flatten(0, 1), torch.from_numpy(batch.actions).flatten()
    target = torch.from_numpy(batch.values).flatten() + 1.0

    def loss(rows):
        idx = torch.from_numpy(rows)
        logits, value = model(obs[idx])
        logprob = torch.distributions.Categorical(logits=logits).log_prob(actions[idx])
        return -logprob.mean(), (value - target[idx]).pow(2).mean(), {"value_loss": (value - target[idx]).pow(2).mean()}

    groups = learner.env_group_rows(np.arange(40), 8)  # 4 groups of 10 rows
    results = []
    for chunk_rows in (0, 4):  # one pass per group; passes of 3-4 rows
        report = _per_group_backward(learner.params, loss, groups, measure=True, parts=parts,
                                     gram_layers=learner.route.gram_layers, chunk_rows=chunk_rows)
        results.append((report, [p.grad.clone() for p in learner.params]))
    (whole, whole_grads), (split, split_grads) = results
    for name in whole.sq_norms:
        np.testing.assert_allclose(split.sq_norms[name], whole.sq_norms[name], rtol=1e-4)
        assert split.big_sq_norms[name] == pytest.approx(whole.big_sq_norms[name], rel=1e-4)
    assert split.stats["value_loss"] == pytest.approx(whole.stats["value_loss"], rel=1e-5)
    tolerance = sum_tolerance(40 * CONV_POSITIONS["nature_cnn"], largest(whole_grads))
    for a, b in zip(whole_grads, split_grads, strict=True):
        torch.testing.assert_close(a, b, **tolerance)


def test_gram_norms_take_the_cheaper_form_for_their_size():
    """|delta^T x|^2 from Gram matrices below in*out/(in+out) rows, from the product above; same number."""
    from rlscale.agents.gradients import _product_sq_norm, gram_is_cheaper

    assert gram_is_cheaper(440, 3136, 512) and not gram_is_cheaper(441, 3136, 512)  # the Nature CNN's layer
    torch.manual_seed(0)
    for rows in (2, 50):  # 8x4 layer: the Gram route up to 2.67 rows
        delta, x = torch.randn(rows, 4, dtype=torch.float64), torch.randn(rows, 8, dtype=torch.float64)
        assert gram_is_cheaper(rows, 8, 4) == (rows == 2)
        assert _product_sq_norm(delta, x) == pytest.approx(float((delta.T @ x).square().sum()), rel=1e-6)


@pytest.mark.parametrize("parts", [False, True])
def test_a_gram_layer_with_nothing_trainable_upstream_is_measured(parts):
    """A bias-free first layer: autograd needs no gradient at its output for any other parameter.

    A tensor hook on that output never fired, and its norms silently read as
    zero; asked of autograd directly, they equal the plain per-group route's.
    """
    from rlscale.agents.gradients import _per_group_backward

    torch.manual_seed(3)
    first = torch.nn.Linear(12, 16, bias=False)
    model = torch.nn.Sequential(first, torch.nn.Tanh(), torch.nn.Linear(16, 2))
    params = list(model.parameters())
    x, target = torch.randn(24, 12), torch.randn(24, 2)

    def loss(rows):
        out = model(x[torch.from_numpy(rows)])
        policy = (out[:, 0] - target[torch.from_numpy(rows), 0]).pow(2).mean()
        value = (out[:, 1] - target[torch.from_numpy(rows), 1]).pow(2).mean()
        return policy, value, {}

    groups = np.array_split(np.arange(24), 4)
    plain = _per_group_backward(params, loss, groups, measure=True, parts=parts)
    plain_grad = first.weight.grad.clone()
    gram = _per_group_backward(params, loss, groups, measure=True, parts=parts, gram_layers=[first])
    assert first.weight.grad.abs().sum() > 0
    torch.testing.assert_close(first.weight.grad, plain_grad)
    for name in plain.sq_norms:
        np.testing.assert_allclose(gram.sq_norms[name], plain.sq_norms[name], rtol=1e-5)
        assert gram.big_sq_norms[name] == pytest.approx(plain.big_sq_norms[name], rel=1e-5)


@pytest.mark.parametrize("chunk_rows", [0, 8, 40])
@pytest.mark.parametrize("algo", ["a2c", "ppo"])
@pytest.mark.parametrize("kind", ["mlp", "nature_cnn"])
def test_shared_pass_measurement_equals_a_pass_per_group(algo, kind, chunk_rows, monkeypatch):
    """Groups measured together in passes give the same norms and update as one pass per group.

    10 envs in k = 4 groups (3, 3, 2, 2 envs): unequal group sizes, and PPO's
    random minibatches make them more unequal still. A2C's 80 rows go in one
    pass (0), two passes of two groups (40) or a pass per group (8, where the
    learner falls back to the per-group route); PPO's minibatches of 20 rows in
    passes of about 8 rows hold one or two groups each.
    """
    import rlscale.agents.gradients
    from rlscale.agents.ppo import PPOLearner

    calls = []
    real = rlscale.agents.gradients._shared_pass_backward
    monkeypatch.setattr(rlscale.agents.gradients, "_shared_pass_backward", lambda *a, **k: calls.append(1) or real(*a, **k))
    spec = SPECS[kind]
    torch.manual_seed(2)
    model = build_network(spec, "auto", 64)
    batch = random_batch(spec, 8, 10, seed=5)
    cls = PPOLearner if algo == "ppo" else A2CLearner
    # The policy/value split always takes the per-group route, so it is off here.
    cfg = build_config("cartpole", algo, {**AT_ONCE, "n_steps": 8, "noise_groups": 4, "n_envs": 10, "vector_size": 1,
                                          "noise_parts_every": 0, "max_grad_norm": 0.0,
                                          # TF-style RMSprop's first steps are ~lr * g: float rounding in g
                                          # stays that small in the weights (Adam's would be ~lr * sign(g)).
                                          "optimizer": "rmsprop_tf", "learner_chunk_rows": chunk_rows})
    runs = []
    start = torch.from_numpy(flat_weights(model))
    for shared_pass in (False, True):
        learner = cls.from_config(copy.deepcopy(model), cfg)
        learner.route.shared_pass = shared_pass
        metrics = learner.update(batch)
        runs.append((learner, metrics))
    (groups, m_groups), (one, m_one) = runs
    assert bool(calls) == (algo == "ppo" or chunk_rows != 8)
    after = torch.from_numpy(flat_weights(groups.model))
    torch.testing.assert_close(torch.from_numpy(flat_weights(one.model)), after,
                               **sum_tolerance(80 * CONV_POSITIONS[kind], largest(after - start)))
    for part in ("total",):
        assert one.noise.emas[part].samples == groups.noise.emas[part].samples > 0
        for name in ("grad_sq", "trace_sigma"):
            a, b = getattr(one.noise.emas[part], name), getattr(groups.noise.emas[part], name)
            # Both are differences of two close norms (eq. A.2), which magnify float rounding.
            assert a == pytest.approx(b, rel=1e-3), (part, name)
    for key in ("train/grad_norm", "train/policy_loss", "train/value_loss", "train/entropy"):
        assert m_one[key] == pytest.approx(m_groups[key], rel=1e-4), key


def test_networks_with_other_layers_are_measured_a_pass_per_group():
    """A layer the shared-pass route cannot split by rows (here LayerNorm's parameters) selects the fallback."""
    from rlscale.models.nets import ActorCritic

    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 32), torch.nn.LayerNorm(32), torch.nn.Tanh())
    cfg = build_config("cartpole", None, {**AT_ONCE, "noise_groups": 4, "n_envs": 8})
    learner = A2CLearner.from_config(ActorCritic(trunk, 32, 2, 1.0), cfg)
    assert not learner.route.shared_pass
    learner.update(random_batch(SPECS["mlp"], 5, 8))
    assert learner.noise.emas["total"].samples == 1 and learner.updates == 1
    assert A2CLearner.from_config(build_network(SPECS["mlp"], "auto", 64), cfg).route.shared_pass


def test_bf16_learner_stays_close_to_fp32():
    """bf16 autocast changes the gradient and the noise estimates only by bf16 rounding."""
    spec = SPECS["nature_cnn"]
    batch = random_batch(spec, 5, 8, seed=4)
    results = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(2)
        cfg = build_config("cartpole", None, {**AT_ONCE, "noise_groups": 4, "n_envs": 8, "noise_parts_every": 0,
                                              "learner_precision": precision})
        learner = A2CLearner.from_config(build_network(spec, "auto", 64), cfg)
        results[precision] = learner.update(batch)
        assert all(p.dtype == torch.float32 for p in learner.params)  # master weights stay fp32
    fp32, bf16 = results["fp32"], results["bf16"]
    assert bf16["train/grad_norm"] != fp32["train/grad_norm"]  # bf16 really ran
    for key in ("train/grad_norm", "noise_raw/trace_sigma_total", "train/policy_loss", "train/value_loss"):
        assert bf16[key] == pytest.approx(fp32[key], rel=0.03), key
    # |G|^2 is a difference of nearly equal norms: compare it on the scale of tr(Sigma)/B.
    scale = fp32["noise_raw/trace_sigma_total"] / 40
    assert abs(bf16["noise_raw/grad_sq_total"] - fp32["noise_raw/grad_sq_total"]) < 0.05 * scale
