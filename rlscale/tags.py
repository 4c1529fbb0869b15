"""TensorBoard scalar tags: one definition, imported by the writers and the readers.

Namespaces as SB3 and CleanRL use them: ``rollout/`` (episodes), ``train/``
(losses, optimizer, counters), ``noise/`` (the noise scales, averaged), ``noise_raw/``
(one update's estimates: noisy by design), ``batch/`` (the batch size and its
control), ``perf/`` (time). Every scalar's step is agent steps, and every
quantity has one tag: the charts a run's TensorBoard opens with
(``custom_scalars_layout``) pick the story out of them.
"""

from __future__ import annotations

PARTS = ("total", "policy", "value")  # the loss parts the noise scale is measured for
# The total loss's noise scale in other metrics (docs/noise-scale.md): the optimizer's
# preconditioner P (B_P = tr(P Sigma) / G^T P G), the Hessian H (B_noise, eq. 2.8) and
# the Hessian seen through the preconditioner (B_PH = tr(PHP Sigma) / G^T PHP G: the
# critical batch of the step the optimizer takes, -lr * P * g).
METRICS = ("precond", "hessian", "precond_hessian")
SIGNALS = PARTS + METRICS  # what the controller can follow (--signal)
METRIC_LABELS = {"precond": "B_P", "hessian": "B_noise", "precond_hessian": "B_PH"}  # the console's and reports' names

EPISODE_RETURN = "rollout/episode_return"  # unclipped game score of one episode
EPISODE_LENGTH = "rollout/episode_length"  # agent steps

LR = "train/lr"  # learning rate of the update's optimizer steps
UPDATES = "train/updates"  # optimizer steps S so far
EXAMPLES = "train/examples"  # observations the optimizer consumed, E
GRAD_NORM = "train/grad_norm"
SKIPPED_UPDATES = "train/skipped_updates"
EXPLAINED_VARIANCE = "train/explained_variance"


def loss_stat(name: str) -> str:
    """A loss statistic of the update: policy_loss, value_loss, entropy, approx_kl, ..."""
    return f"train/{name}"


def noise(quantity: str, part: str) -> str:
    """noise/<quantity>_<part>: b_simple, grad_sq or trace_sigma of a loss part (bias-corrected EMAs)."""
    return f"noise/{quantity}_{part}"


def raw_noise(quantity: str, part: str) -> str:
    """noise_raw/<quantity>_<part>: one update's unbiased grad_sq or trace_sigma (smooth to read them)."""
    return f"noise_raw/{quantity}_{part}"


# Runs written before each quantity had one tag also logged the controller's signal here.
LEGACY_SIGNAL = "noise/b_simple"

# Per metric: its noise scale, G^T M G and tr(M Sigma) (bias-corrected EMAs over the measured updates).
METRIC_TAGS = {
    "precond": ("noise/b_precond", "noise/gpg", "noise/trace_p_sigma"),
    "hessian": ("noise/b_noise", "noise/ghg", "noise/trace_h_sigma"),
    "precond_hessian": ("noise/b_precond_hessian", "noise/gphpg", "noise/trace_php_sigma"),
}


def signal_label(signal: str) -> str:
    """How the console names a signal's noise scale: B_P, B_noise, B_PH, or a part's B_simple[part]."""
    return METRIC_LABELS.get(signal, f"B_simple[{signal}]")


def signal_tag(signal: str) -> str:
    """The tag of the noise scale a signal (``SIGNALS``) names: what ``--signal`` makes the controller follow."""
    return METRIC_TAGS[signal][0] if signal in METRICS else noise("b_simple", signal)


NOISE_CLIPPED = "noise/clipped_total"  # the total loss's estimates noise_clip has bounded so far
EPS_MAX = "noise/eps_max"  # |G|^2 / G^T H G (eq. 2.6): the largest useful SGD learning rate
CURVATURE_SECONDS = "perf/curvature_seconds"  # the metrics' extra passes on a measured update

N_ENVS = "batch/n_envs"  # environments, counting those still starting
STARTING_ENVS = "batch/starting_envs"  # environments starting in the background (not with a fixed batch)
SIZE = "batch/size"  # observations this update trained on
OPTIMIZER_BATCH = "batch/optimizer_batch"  # observations per optimizer step (PPO: the minibatch)
TARGET = "batch/target"  # the batch the controller aims at
RESIZE_SECONDS = "batch/resize_seconds"
# The cost model's quantities: logged by --batch auto only, the mode that aims at B* with them.
EXCHANGE_RATE = "batch/exchange_rate"  # r = a/b of the cost model, in optimizer-batch observations
PREDICTED_SPEEDUP = "batch/predicted_speedup"  # time per unit of progress at this batch / at B*

STEPS_PER_S = "perf/steps_per_s"
ROLLOUT_SECONDS = "perf/rollout_seconds"
# The slowest rollout worker's own time in that rollout: rollout_seconds less this is the trip
# through the pool (weights out, the batch back, waiting for a CPU). Native engine only; with
# --overlap the actors step while the learner trains, so it can exceed rollout_seconds.
ACTING_SECONDS = "perf/acting_seconds"
LEARNER_SECONDS = "perf/learner_seconds"
LEARNER_THREADS = "perf/learner_threads"  # torch threads of the learner (--learner-threads 0 adapts them)
WALL_SECONDS = "perf/wall_seconds"  # training time so far, summed over the resumes of one run
UPDATE_SECONDS = "perf/update_seconds"  # collection and learning of this update (what the cost model fits)
OVERHEAD_SECONDS = "perf/overhead_seconds"  # a of T(B) = a + b*B
SECONDS_PER_OBSERVATION = "perf/seconds_per_observation"  # b, per observation collected and trained on
# The cluster clock (--cluster-nodes N): what the run's updates would have taken on an elastic cluster
# of up to N nodes, priced with the run's latest resolved fit of T(B) (or cluster_fit): logged once one exists.
CLUSTER_WALL_SECONDS = "cluster/wall_seconds"
CLUSTER_NODE_HOURS = "cluster/node_hours"
CLUSTER_NODES = "cluster/nodes"  # the nodes this update's batch takes there
