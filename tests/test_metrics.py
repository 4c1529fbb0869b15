"""B_simple, B_P, B_noise and B_PH against an anisotropic problem whose first three differ >= 5x in closed form.

Least squares with anisotropic Gaussian inputs (docs/noise-scale.md): x ~ N(0, C),
y = x.theta* + e, e ~ N(0, s^2), D = theta - theta*. The per-sample gradient is
x (x.D - e) and the per-sample Hessian x x^T, so G = C D, H = C and
Sigma = C D D^T C + (D^T C D + s^2) C; for any fixed metric M,
G^T M G and tr(M Sigma) follow in closed form. The per-sample Hessian varies
with the sample, so an H taken on the rows of the vector it multiplies is
biased, which a test below shows. The last tests check what PPO logs for an update of many minibatches.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from rlscale import tags
from rlscale.agents.a2c import A2CLearner, A2CRows, nstep_returns
from rlscale.agents.curvature import MetricSamples, metric_samples
from rlscale.agents.ppo import PPOLearner
from rlscale.config import build_config
from rlscale.control.noise import NoiseMeter, estimate, metric_estimate
from rlscale.models.nets import build_network
from rlscale.rollout.worker import Batch
from tests.test_learner import SPECS, random_batch

C = np.array([36.0, 6.0, 1.0, 1 / 6])  # eigenvalues of the input covariance (the Hessian)
D = np.array([0.03, 0.1, 3.0, 1.0])  # theta - theta*
S = 4.0  # the label noise's standard deviation
P = C ** -2.0  # a diagonal preconditioner
# B_PH's truth test takes a milder one: C^-2 would weight the smallest direction's noise
# 216x in P H P, and its estimate would need ~10x the draws to settle within 5 %.
P_PH = C ** -1.0


def closed_form() -> dict[str, float]:
    g = C * D
    sigma = np.outer(g, g) + (D @ (C * D) + S**2) * np.diag(C)
    return {"simple": np.trace(sigma) / (g @ g), "precond": np.trace(np.diag(P) @ sigma) / (g @ (P * g)),
            "hessian": np.trace(np.diag(C) @ sigma) / (g @ (C * g)), "eps_max": (g @ g) / (g @ (C * g)),
            "precond_hessian": np.trace(np.diag(P_PH * C * P_PH) @ sigma) / (g @ (P_PH * C * P_PH * g))}


TRUTH = closed_form()  # B_PH 11.9, B_P 19.2, B_simple 104.3, B_noise 634.4, eps_max 0.065


def group_draws(rng: np.random.Generator, batch: int, k: int, n: int):
    """n batches of ``batch`` rows in k env groups: the groups' inputs and their mean gradients."""
    sizes = [len(a) for a in np.array_split(np.arange(batch), k)]
    bounds = np.cumsum([0, *sizes])
    x = rng.standard_normal((n, batch, C.size)) * np.sqrt(C)
    residual = x @ D - S * rng.standard_normal((n, batch))
    g = np.stack([np.einsum("nbd,nb->nd", x[:, a:b], residual[:, a:b]) / (b - a)
                  for a, b in zip(bounds[:-1], bounds[1:], strict=True)], axis=1)
    return sizes, [x[:, a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)], g


def hessian_terms(xs, g, same_rows: bool = False):
    """g_j^T H_h g_{h-1} for every j, h: H_h from group h's rows (or, to show the bias, from g's own)."""
    k = g.shape[1]
    hv = []
    for h in range(k):
        i = (h - 1) % k
        rows = xs[i] if same_rows else xs[h]
        hv.append(np.einsum("nbd,nb->nd", rows, np.einsum("nbd,nd->nb", rows, g[:, i])) / rows.shape[1])
    dots = np.einsum("njd,nhd->njh", g, np.stack(hv, axis=1))
    diagonal = dots[:, np.arange(k), (np.arange(k) + 1) % k]  # g_i^T H_{i+1} g_i
    pairs = [(j, h) for h in range(k) for j in range(k) if j not in ((h - 1) % k, h)]
    cross = dots[:, [j for j, _ in pairs], [h for _, h in pairs]]
    return diagonal, cross


def measured(metric: str, batch: int, k: int, draws: int, seed: int, same_rows: bool = False) -> NoiseMeter:
    """A noise meter fed ``draws`` batches' samples of B_simple and of one metric."""
    rng = np.random.default_rng(seed)
    meter = NoiseMeter(horizon=batch * draws * 100.0)  # a plain mean over the draws, nearly
    for _ in range(draws // 1000):
        sizes, xs, g = group_draws(rng, batch, k, 1000)
        big = np.einsum("nkd,k->nd", g, np.array(sizes) / batch)
        weight = P if metric == "precond" else np.ones_like(P)
        sq, big_sq = (g**2 * weight).sum(axis=2), (big**2 * weight).sum(axis=1)
        # B_PH: the Hessian's terms between the preconditioned vectors P g (P is diagonal).
        diagonal, cross = ((None, None) if metric not in ("hessian", "precond_hessian") else
                           hessian_terms(xs, g * (P_PH if metric == "precond_hessian" else 1.0), same_rows))
        for t in range(1000):
            meter.observe(batch)
            meter.record_sample("total", estimate(list((g[t] ** 2).sum(axis=1)), sizes, float(big[t] @ big[t])))
            if metric == "precond":
                meter.record_sample("precond", estimate(list(sq[t]), sizes, float(big_sq[t])))
            elif diagonal is not None:
                meter.record_sample(metric, metric_estimate(sizes, list(diagonal[t]), list(cross[t])))
    return meter


def test_the_three_noise_scales_differ_at_least_5x_in_closed_form():
    assert TRUTH["simple"] >= 5 * TRUTH["precond"] and TRUTH["hessian"] >= 5 * TRUTH["simple"]


@pytest.mark.parametrize("metric, draws", [("simple", 16_000), ("precond", 16_000), ("hessian", 12_000),
                                           ("precond_hessian", 48_000)])  # batches of 6-24: more draws
@pytest.mark.parametrize("k", [3, 8])
@pytest.mark.parametrize("times_truth", [0.5, 2.0])
def test_each_estimator_lands_within_5_percent_of_its_closed_form(metric, draws, k, times_truth):
    """Batches of 0.5x and 2x each one's truth, 3 and 8 groups; the mean over two seeds' runs."""
    batch = max(k, round(times_truth * TRUTH[metric]))
    part = "total" if metric == "simple" else metric
    values = [measured(metric, batch, k, draws, seed).b_simple(part) for seed in (0, 1)]
    assert np.mean(values) == pytest.approx(TRUTH[metric], rel=0.05), values
    if metric == "hessian":
        eps_max = [measured(metric, batch, k, draws, seed).eps_max() for seed in (0, 1)]
        assert np.mean(eps_max) == pytest.approx(TRUTH["eps_max"], rel=0.05), eps_max


def test_a_hessian_on_the_vectors_own_rows_is_biased():
    """The pitfall the estimator avoids: H_i g_i correlates with g_i. Over 20,000 batches of 24 rows in
    8 groups, the mean G^T H G sample lands within 4 standard errors of the closed form only when
    each Hessian comes from rows other than those of the gradients it multiplies."""
    sizes, xs, g = group_draws(np.random.default_rng(5), 24, 8, 20_000)
    truth = float((C * D) @ (C * (C * D)))  # G^T H G = D^T C^3 D
    for same_rows, expect_unbiased in ((False, True), (True, False)):
        diagonal, cross = hessian_terms(xs, g, same_rows)
        values = np.array([metric_estimate(sizes, list(d), list(c)).grad_sq for d, c in zip(diagonal, cross, strict=True)])
        error = abs(values.mean() - truth) / (values.std() / np.sqrt(values.size))
        assert (error < 4) == expect_unbiased, (same_rows, values.mean(), truth, error)


def test_metric_estimate_recovers_hand_made_terms():
    """G^T M G = 2 from the cross terms; tr(M Sigma) = b_i (d_i - 2) = 8 for every group."""
    sample = metric_estimate([4, 4, 8], [4.0, 4.0, 3.0], [2.0, 1.5, 2.5])
    assert sample.grad_sq == pytest.approx(2.0) and sample.trace_sigma == pytest.approx(8.0)
    assert sample.b_big == 16 and sample.b_small == pytest.approx(3 / (1 / 4 + 1 / 4 + 1 / 8))
    with pytest.raises(ValueError):
        metric_estimate([4, 4], [1.0, 1.0], [1.0])


def test_learner_passes_give_the_same_samples_as_the_closed_form_terms():
    """metric_samples (autograd's gradients and Hessian-vector products) on the least-squares loss
    equals the numpy terms above on the same rows, and leaves p.grad alone."""
    sizes, xs, g = group_draws(np.random.default_rng(3), 24, 4, 1)
    # The same draw's inputs and label noise: with theta* = 0 and theta = D, y = e.
    replay = np.random.default_rng(3)
    x = replay.standard_normal((1, 24, C.size))[0] * np.sqrt(C)
    y = S * replay.standard_normal((1, 24))[0]
    assert np.array_equal(x, np.concatenate([a[0] for a in xs]))
    theta = torch.nn.Parameter(torch.tensor(D))
    theta.grad = torch.full_like(theta, 7.0)
    xt, yt = torch.tensor(x), torch.tensor(y)

    def loss(rows: np.ndarray):
        idx = torch.from_numpy(rows)
        return 0.5 * (xt[idx] @ theta - yt[idx]).square().mean(), torch.zeros(()), {}

    groups = [np.arange(a, b) for a, b in zip(np.cumsum([0, *sizes])[:-1], np.cumsum(sizes), strict=True)]
    precond = [torch.tensor(P)]
    samples = metric_samples([theta], loss, groups, precond)
    big = np.einsum("nkd,k->nd", g, np.array(sizes) / 24)[0]
    expected_p = estimate(list((g[0] ** 2 * P).sum(axis=1)), sizes, float(big @ (P * big)))
    diagonal, cross = hessian_terms(xs, g)
    expected_h = metric_estimate(sizes, list(diagonal[0]), list(cross[0]))
    diagonal, cross = hessian_terms(xs, g * P)
    expected_ph = metric_estimate(sizes, list(diagonal[0]), list(cross[0]))
    for got, want in ((samples.precond, expected_p), (samples.hessian, expected_h),
                      (samples.precond_hessian, expected_ph)):
        assert got.grad_sq == pytest.approx(want.grad_sq, rel=1e-9)
        assert got.trace_sigma == pytest.approx(want.trace_sigma, rel=1e-9)
    assert torch.equal(theta.grad, torch.full_like(theta, 7.0))


def test_the_metrics_cost_k_forward_and_2k_or_3k_backward_passes_per_measured_update(monkeypatch):
    """docs/noise-scale.md: per env group one forward pass, one backward keeping its graph, and one
    double backward (the Hessian-vector product) for B_noise; once the optimizer has a preconditioner,
    a second double backward (H times P g) for B_PH. B_P reuses the group gradients."""
    spec = SPECS["nature_cnn"]
    cfg = build_config("cartpole", None, {"n_envs": 8, "noise_groups": 4, "optimizer": "rmsprop_tf",
                                          "noise_settle": 0})  # each batch measured at once
    torch.manual_seed(0)
    learner = A2CLearner.from_config(build_network(spec, "auto", 64), cfg)
    learner.update(random_batch(spec, 5, 8))  # measures B_noise (batch 0); no preconditioner before a step
    assert learner.noise.emas["hessian"].samples == 1 and learner.noise.emas["precond"].samples == 0
    assert learner.noise.emas["precond_hessian"].samples == 0
    batch = random_batch(spec, 5, 8, seed=1)
    returns = nstep_returns(batch, cfg.agent.gamma)
    data = A2CRows(learner.rows(batch.obs), learner.rows(batch.actions), learner.rows(returns),
                   learner.rows(returns - batch.values))
    forwards, grads = [], []
    learner.model.register_forward_hook(lambda *_: forwards.append(1))
    real_grad = torch.autograd.grad
    monkeypatch.setattr(torch.autograd, "grad", lambda *a, **k: grads.append(k.get("create_graph", False))
                        or real_grad(*a, **k))
    learner.noise.observe(batch.size)
    metrics = learner.record_metrics(lambda rows: learner.loss(data, rows), np.arange(batch.size), 8)
    assert len(forwards) == 4  # k forward passes over B/k rows each
    assert grads == [True] * 4 + [False] * 8  # k backward passes keeping the graph, 2k double backward
    assert metrics["perf/curvature_seconds"] > 0
    assert learner.noise.emas["hessian"].samples == 2 and learner.noise.emas["precond"].samples == 1
    assert learner.noise.emas["precond_hessian"].samples == 1


def test_metric_samples_has_a_field_per_metric_the_learner_records():
    """Learner.record_metrics reads each of tags.METRICS from MetricSamples by name."""
    assert [f.name for f in dataclasses.fields(MetricSamples)] == list(tags.METRICS)


# ---------------------------------------------------------------------------- PPO's logged statistics

def ppo_learner(**overrides) -> tuple[PPOLearner, Batch]:
    """A PPO learner on CartPole's network (4 epochs x 4 minibatches of 32 rows) and a batch whose
    acting log-probs spread the ratio, so that the clip fraction and the losses differ by minibatch."""
    cfg = build_config("cartpole", "ppo", {"n_envs": 8, "n_steps": 16, "noise_settle": 0, **overrides})
    torch.manual_seed(0)
    learner = PPOLearner.from_config(build_network(SPECS["mlp"], "auto", 64), cfg)
    batch = random_batch(SPECS["mlp"], 16, 8)
    batch.logprobs[:] = np.log(np.random.default_rng(1).uniform(0.2, 0.8, batch.logprobs.shape))
    return learner, batch


def returns_of(monkeypatch, owner, name: str) -> list[dict[str, float]]:
    """What each call of ``owner.name`` returns, the real method still doing the work."""
    calls: list[dict[str, float]] = []
    real = getattr(owner, name)

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(dict(out))
        return out

    monkeypatch.setattr(owner, name, spy)
    return calls


PPO_STEP_STATS = [tags.loss_stat(s) for s in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")]


@pytest.mark.timeout(60)
def test_ppo_logs_the_mean_of_its_minibatches_loss_statistics(monkeypatch):
    """The losses, clip fraction, KL and gradient norm PPO logs for an update are the means over its 16 optimizer
    steps (every minibatch of every epoch), each step's own values as the real step returned them."""
    learner, batch = ppo_learner()
    steps = returns_of(monkeypatch, learner, "step")
    metrics = learner.update(batch)
    assert len(steps) == 16 and learner.updates == 16
    for tag in (*PPO_STEP_STATS, tags.GRAD_NORM):
        values = [step[tag] for step in steps]
        assert metrics[tag] == pytest.approx(np.mean(values), rel=1e-12, abs=1e-15), tag
        # The last minibatch's value alone (what PPO logged before 2026-11-28) is not the mean.
        assert abs(values[-1] - np.mean(values)) > 1e-6 * max(1.0, abs(np.mean(values))), (tag, values)
    assert 0 < metrics[tags.loss_stat("clipfrac")] < 1
    assert metrics[tags.SKIPPED_UPDATES] == 0.0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("noise_minibatches, measured", [(1, 1), (2, 2), (0, 4)])
def test_ppo_logs_the_mean_raw_noise_estimate_of_its_measured_minibatches(monkeypatch, noise_minibatches, measured):
    """noise_raw/* (docs/tensorboard.md): each measured minibatch's unbiased |G|^2 and tr(Sigma) estimates, of each
    part, averaged over the first epoch's measured minibatches (--noise-minibatches; 0 = all four)."""
    learner, batch = ppo_learner(noise_parts_every=1, noise_minibatches=noise_minibatches)
    samples = returns_of(monkeypatch, learner.noise, "record")
    metrics = learner.update(batch)
    assert len(samples) == measured * len(tags.PARTS)  # the total loss's and each part's, per measured minibatch
    for part in tags.PARTS:
        for quantity in ("grad_sq", "trace_sigma"):
            tag = tags.raw_noise(quantity, part)
            values = [s[tag] for s in samples if tag in s]
            assert len(values) == measured
            assert metrics[tag] == pytest.approx(np.mean(values), rel=1e-12), tag
            if measured > 1:
                assert values[-1] != pytest.approx(np.mean(values), rel=1e-6), tag
