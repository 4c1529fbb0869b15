"""RLlib PPO with rlscale's gradient noise scale and batch-size controller.

Optional extra: ``pip install 'rlscale[rllib]'``; run it with
``python -m rlscale.train pong --backend rllib``. RLlib's new API stack does the
sampling and the PPO update; this module adds what RLlib lacks:

* **Env groups.** A callback tags every episode with the global id of the
  environment that played it (env runner x env index) and a learner connector
  turns the tag into a batch column, so the learner can split each minibatch
  into groups of whole environments, exactly as the native engine does.
* **Noise-scale learner.** ``NoiseScalePPOLearner`` computes, on the first
  epoch's minibatches, one gradient per env group (a forward and backward pass
  per group) and applies their size-weighted mean, which is the minibatch
  gradient stock PPO applies (every PPO loss term is a masked mean over rows).
  The group norms feed ``rlscale.control.noise.estimate``; later epochs reuse the data,
  are not fresh draws, and take RLlib's stock path.
* **The engine.** ``RLlibEngine`` is what rlscale's one training loop
  (``rlscale.training.trainer``) drives: an update is one ``algo.train()``, whose
  noise samples feed a ``NoiseMeter`` and whose episodes go to the loop's
  goals; on the controller's resize it rebuilds every env runner's vector env
  with the new count and changes the train batch and minibatch sizes with it
  (the minibatch count stays fixed). Its checkpoint is RLlib's own, written
  beside the loop's (``checkpoints/ckpt-<steps>.rllib``).

RLlib's internals move between releases; the learner hooks used here
(``_make_batch_if_necessary``, ``_uncompiled_update``) and the metrics API are
those of RLlib 2.60, so other versions are refused with a clear message.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rlscale import tags
from rlscale.config import Config, EnvConfig
from rlscale.control.noise import NoiseMeter, NoiseSample, estimate
from rlscale.distributed.ray_pool import init_ray, notices_path
from rlscale.engine.native import UpdateResult
from rlscale.envs.vector import NativeAtariEnv
from rlscale.errors import UserError
from rlscale.rollout.worker import ResizeReport

SUPPORTED_RLLIB = ((2, 60), (3, 0))  # [lowest tested, first unsupported)
GROUP_COLUMN = "rlscale_env"  # batch column: global id of the environment that played the row
ENV_ID_STRIDE = 1_000_000  # global env id = env runner index * stride + env index
# Item-series metrics, one float per item (RLlib flattens tuple items when it merges series).
NOISE_KEYS = {part: ("rlscale", f"noise_{part}") for part in ("grad_sq", "trace_sigma", "b_big")}
EPISODE_KEYS = {part: ("rlscale", f"episode_{part}") for part in ("return", "length")}


def check_rllib_version(version: str | None = None) -> str:
    """The installed RLlib version, or a one-line UserError saying what to install."""
    if version is None:
        try:
            import ray
            import ray.rllib  # noqa: F401 - fails without the extra's dependencies
        except ImportError as err:
            raise UserError(f"--backend rllib needs RLlib: pip install 'rlscale[rllib]' ({err})") from None
        version = ray.__version__
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    low, high = SUPPORTED_RLLIB
    if len(parts) < 2 or not low <= parts < high:
        raise UserError(
            f"RLlib {version} is not supported by rlscale's RLlib integration (tested with "
            f"{low[0]}.{low[1]}; needs >={low[0]}.{low[1]},<{high[0]}.{high[1]}): "
            "pip install 'rlscale[rllib]'"
        )
    return version


# --------------------------------------------------------------------------- environments


ATARI_KEYS = ("env_id", "frame_skip", "noop_max", "sticky_actions", "max_episode_frames")  # EnvConfig's


def make_env(env_config: dict[str, Any]):
    """One gymnasium env with the native engine's preprocessing (RLlib vectorises it).

    Atari: ``rlscale.envs.vector.NativeAtariEnv``, one environment of the native vector env (ALE's
    no-op starts, FIRE at each reset, frame skip with a max over the last two frames, 84x84
    grayscale, 4 frames stacked with black padding at an episode's start, no life-loss resets,
    sticky actions and the episode cap as configured), its frames scaled to [0, 1] and stacked on
    the last axis (RLlib's CNN wants HWC; ``scaled_channels_last``). Rewards are clipped to their
    sign for the learner while RecordEpisodeStatistics, which wraps the env before the clip,
    reports the raw game score.
    """
    import gymnasium as gym

    env_id = env_config["env_id"]
    if env_id.startswith("ALE/"):
        env = scaled_channels_last(NativeAtariEnv(EnvConfig(**{key: env_config[key] for key in ATARI_KEYS})))
    else:
        env = gym.make(env_id)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    if env_config["reward_clip"]:
        env = gym.wrappers.TransformReward(env, np.sign)
    return env


def scaled_channels_last(env):
    """The env's uint8 frame stacks (stack first) as RLlib's CNN takes them: float32 in [0, 1], stack last."""
    import gymnasium as gym

    space = env.observation_space
    shape = (*space.shape[1:], space.shape[0])
    return gym.wrappers.TransformObservation(
        env, lambda obs: np.moveaxis(obs, 0, -1).astype(np.float32) / 255.0,
        gym.spaces.Box(0.0, 1.0, shape, np.float32))


def _env_config(cfg: Config) -> dict[str, Any]:
    return {**{key: getattr(cfg.env, key) for key in ATARI_KEYS},
            "reward_clip": cfg.env.reward_clip and cfg.is_atari}


# --------------------------------------------------------------------------- RLlib plug-ins
# Imported lazily: the classes subclass RLlib's, which only exists with the extra.


@functools.cache  # one set of classes per process, so isinstance checks and pickling agree
def rllib_classes() -> dict[str, type]:
    """The classes rlscale adds to RLlib, defined once RLlib is imported (RLlib is an optional extra)."""
    check_rllib_version()
    return {**_episode_classes(), "NoiseScalePPOLearner": _ppo_learner_class()}


def _episode_classes() -> dict[str, type]:
    """The callback that tags each episode with its environment, and the connector that makes it a column."""
    from ray.rllib.callbacks.callbacks import RLlibCallback
    from ray.rllib.connectors.connector_v2 import ConnectorV2

    class EnvTagCallback(RLlibCallback):
        """Tags each episode with its environment; reports raw episode returns."""

        def on_episode_start(self, *, episode, env_runner=None, env_index: int, **kwargs) -> None:
            runner = (env_runner.worker_index if env_runner is not None else 0) or 0
            episode.custom_data[GROUP_COLUMN] = runner * ENV_ID_STRIDE + env_index

        def on_episode_end(self, *, episode, metrics_logger=None, **kwargs) -> None:
            stats = episode.get_infos(-1).get("episode")
            if stats is not None and metrics_logger is not None:
                metrics_logger.log_value(EPISODE_KEYS["return"], float(stats["r"]), reduce="item_series")
                metrics_logger.log_value(EPISODE_KEYS["length"], int(stats["l"]), reduce="item_series")

    class AddEnvIdColumn(ConnectorV2):
        """Learner connector: one GROUP_COLUMN entry per row, from the episode's tag."""

        def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None,
                     **kwargs):
            for sa_episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
                env = sa_episode.custom_data.get(GROUP_COLUMN, -1)
                self.add_n_batch_items(batch, GROUP_COLUMN,
                                       items_to_add=np.full(len(sa_episode), env, dtype=np.int64),
                                       num_items=len(sa_episode), single_agent_episode=sa_episode)
            return batch

    return {"EnvTagCallback": EnvTagCallback, "AddEnvIdColumn": AddEnvIdColumn}


def _ppo_learner_class() -> type:
    """NoiseScalePPOLearner: RLlib's PPO learner measuring the noise scale on its first epoch's minibatches."""
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

    class NoiseScalePPOLearner(PPOTorchLearner):
        """PPO whose first-epoch minibatch gradients are measured per group of environments."""

        noise_groups: int = 4

        def build(self) -> None:
            super().build()
            self.noise_groups = int(self.config.learner_config_dict.get("noise_groups", 4))
            self._rows_first_epoch = 0  # rows of the current train batch
            self._rows_seen = 0  # rows trained on so far in this update() call
            self._rlscale_lr: float | None = None

        def set_lr(self, lr: float) -> None:
            """Used by the driver: the controller's (and annealing's) learning rate."""
            self._rlscale_lr = lr
            self._apply_lr()

        def _apply_lr(self) -> None:
            if self._rlscale_lr is None:
                return
            for module_id in self.module.keys():
                for _, optimizer in self.get_optimizers_for_module(module_id):
                    self._set_optimizer_lr(optimizer, lr=self._rlscale_lr)

        def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
            super().after_gradient_based_update(timesteps=timesteps)
            self._apply_lr()  # RLlib's fixed-lr scheduler resets it to config.lr here

        def _make_batch_if_necessary(self, training_data):
            batch = super()._make_batch_if_necessary(training_data)
            # RLlib's minibatch iterator shuffles the train batch only when it wraps around, so
            # its first epoch walks the batch in episode order: each minibatch is a few
            # contiguous stretches of a few episodes, and its env groups range from 1 row to
            # 100 rows of one stretch. The noise scale is measured on that epoch, and on such
            # groups its tr(Sigma) estimate came out negative on average (CartPole; "RLlib's
            # first epoch" in docs/results.md). CleanRL shuffles before every epoch; so does this.
            if self.config.shuffle_batch_per_epoch:
                for module_batch in batch.policy_batches.values():
                    module_batch.shuffle()
            self._rows_first_epoch = max(b.count for b in batch.policy_batches.values())
            self._rows_seen = 0
            return batch

        def _uncompiled_update(self, batch: dict, **kwargs):
            rows = max(_rows(b) for b in batch.values())
            # Measured only when every row is fresh: RLlib's cyclic iterator fills the last
            # minibatch of an epoch with rows of the next one, which were trained on already.
            first_epoch = self._rows_seen + rows <= self._rows_first_epoch
            self._rows_seen += rows
            groups = self._groups(batch) if first_epoch else None
            if groups is None:
                return super()._uncompiled_update(batch, **kwargs)
            return self._grouped_update(batch, groups)

        def _groups(self, batch: dict) -> list[dict] | None:
            """Row indices of each env group (round-robin over the envs present)."""
            import torch

            if len(batch) != 1:
                return None  # multi-agent batches: not supported, stock update
            (module_id, sub), = batch.items()
            if GROUP_COLUMN not in sub:
                return None
            envs = sub[GROUP_COLUMN]
            unique, inverse = torch.unique(envs, return_inverse=True)
            k = min(self.noise_groups, len(unique))
            if k < 2:
                return None
            group_of = inverse % k
            return [torch.nonzero(group_of == g).squeeze(1) for g in range(k)]

        def _grouped_update(self, batch: dict, groups: list):
            return grouped_update(self, batch, groups, lambda b: super(NoiseScalePPOLearner, self)._uncompiled_update(b))

    return NoiseScalePPOLearner


def grouped_update(learner: Any, batch: dict, groups: list, stock_update: Callable[[dict], Any]) -> Any:
    """NoiseScalePPOLearner's measured update: one forward/backward per env group, the size-weighted mean of
    the groups' gradients applied (the stock minibatch gradient), and the noise sample logged; the stock
    update (``stock_update``) where fewer than two groups hold rows."""
    import torch
    import tree
    from ray.rllib.core.columns import Columns

    (module_id, sub), = batch.items()
    mask = sub.get(Columns.LOSS_MASK)
    # Each PPO loss term is a mean over the group's valid rows (the mask hides the
    # bootstrap step RLlib appends to each episode); a group without any adds nothing.
    sizes = [float(mask[rows].sum()) if mask is not None else float(len(rows)) for rows in groups]
    groups = [rows for rows, size in zip(groups, sizes, strict=True) if size > 0]
    sizes = [size for size in sizes if size > 0]
    if len(groups) < 2:
        return stock_update(batch)
    learner._compute_off_policyness(batch)
    grads: list[dict] = []
    losses: list[torch.Tensor] = []
    fwd_out = None
    for rows in groups:
        part = {module_id: tree.map_structure(lambda v, r=rows: v[r], dict(sub))}
        fwd_out = learner.module.forward_train(part)
        loss_per_module = learner.compute_losses(fwd_out=fwd_out, batch=part)
        grads.append({pid: g.detach().clone() for pid, g in
                      learner.compute_gradients(loss_per_module).items() if g is not None})
        losses.append(loss_per_module[module_id].detach())
    total = sum(sizes)
    weights = [s / total for s in sizes]
    mean_grad = {pid: sum(w * g[pid] for w, g in zip(weights, grads, strict=True))
                 for pid in grads[0]}
    sample = estimate(
        [float(sum((g[pid].double() ** 2).sum() for pid in g)) for g in grads], sizes,
        float(sum((v.double() ** 2).sum() for v in mean_grad.values())))
    for part, key in NOISE_KEYS.items():
        learner.metrics.log_value(key, float(getattr(sample, part)), reduce="item_series")
    postprocessed = learner.postprocess_gradients(mean_grad)
    learner.apply_gradients(postprocessed)
    loss = sum(w * loss for w, loss in zip(weights, losses, strict=True))
    return fwd_out, {module_id: loss}, {}


def _rows(sub) -> int:
    from ray.rllib.core.columns import Columns

    return int(sub[Columns.OBS].shape[0])


def _add_env_id_column(input_observation_space, input_action_space, device=None):
    return rllib_classes()["AddEnvIdColumn"]()


# --------------------------------------------------------------------------- config


def check_supported(cfg: Config) -> None:
    if cfg.agent.algo != "ppo":
        raise UserError("--backend rllib runs PPO only: add --agent ppo (or leave --agent out)")
    if cfg.pool.in_this_process:
        raise UserError("--backend rllib has no serial pool; leave --pool serial out")
    if cfg.env.n_envs % cfg.pool.n_actors:
        raise UserError(f"--backend rllib splits --n-envs evenly over --n-actors env runners: "
                        f"{cfg.env.n_envs} is not a multiple of {cfg.pool.n_actors}")


def ppo_config(cfg: Config):
    """An RLlib PPOConfig with the run's settings (CleanRL-style PPO where RLlib allows)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    classes = rllib_classes()
    a = cfg.agent
    n_runners = cfg.pool.n_actors
    batch = cfg.env.n_envs * a.n_steps
    if cfg.is_atari:
        # Nature CNN conv stack (valid padding: 7x7x64 = 3136 features); RLlib puts a
        # 512-unit layer in each of the policy and value heads (Nature shares one).
        model = DefaultModelConfig(conv_filters=[[32, 8, 4, "valid"], [64, 4, 2, "valid"],
                                                 [64, 3, 1, "valid"]],
                                   conv_activation="relu", head_fcnet_hiddens=[512],
                                   vf_share_layers=True)
    else:
        model = DefaultModelConfig(fcnet_hiddens=[a.mlp_hidden, a.mlp_hidden], fcnet_activation="tanh",
                                   vf_share_layers=False)
    return (
        PPOConfig()
        .environment("rlscale-env", env_config=_env_config(cfg))
        .framework("torch")
        .env_runners(num_env_runners=n_runners, num_envs_per_env_runner=cfg.env.n_envs // n_runners,
                     rollout_fragment_length=a.n_steps, num_cpus_per_env_runner=1)
        .training(
            lr=a.lr, gamma=a.gamma, lambda_=a.gae_lambda, clip_param=a.clip_coef,
            # RLlib clips the squared value error (not the value change, as CleanRL does).
            vf_clip_param=10.0 if a.clip_value_loss else math.inf,
            entropy_coeff=a.ent_coef, vf_loss_coeff=a.vf_coef, use_kl_loss=False,
            grad_clip=a.max_grad_norm or None, grad_clip_by="global_norm",
            train_batch_size_per_learner=batch, minibatch_size=batch // a.n_minibatches,
            num_epochs=a.n_epochs,
        )
        .learners(
            num_learners=0, learner_class=classes["NoiseScalePPOLearner"],
            learner_connector=_add_env_id_column,
            learner_config_dict={"noise_groups": cfg.noise.noise_groups if cfg.noise.measure_noise else 1},
        )
        .rl_module(model_config=model)
        .callbacks(classes["EnvTagCallback"])
        .debugging(seed=cfg.run.seed, log_level="ERROR")
    )


def resize_envs(algo, n_envs: int) -> float:
    """Give every env runner n_envs / runners environments; seconds it took.

    Unfinished episodes of the old envs are dropped (never reported, never
    trained on); the train batch follows the env count, the minibatch count stays.
    """
    runners = max(1, algo.config.num_env_runners)
    per_runner = n_envs // runners
    start = time.perf_counter()
    horizon = algo.config.get_rollout_fragment_length()
    minibatches = algo.config.train_batch_size_per_learner // algo.config.minibatch_size
    algo.config._is_frozen = False  # RLlib freezes a built algorithm's config; these fields are read per train()
    algo.config.num_envs_per_env_runner = per_runner
    algo.config.train_batch_size_per_learner = n_envs * horizon
    algo.config.minibatch_size = n_envs * horizon // minibatches
    algo.config.freeze()

    def rebuild(runner) -> int:
        runner.config = runner.config.copy(copy_frozen=False)
        runner.config.num_envs_per_env_runner = per_runner
        runner.make_env()
        return runner.num_envs

    algo.env_runner_group.foreach_env_runner(rebuild, local_env_runner=algo.config.num_env_runners == 0)
    return time.perf_counter() - start


def set_learner_lr(algo, lr: float) -> None:
    algo.learner_group.foreach_learner(lambda learner: learner.set_lr(lr))


# --------------------------------------------------------------------------- the engine


def _items(result: dict, key: tuple[str, ...]) -> list:
    """An item-series metric's items this iteration (RLlib reports an empty one as NaN)."""
    value = _find(result, key)
    return list(value) if isinstance(value, list | tuple) else []


def _find(result: dict, key: tuple[str, ...], default: Any = None) -> Any:
    node: Any = result
    for part in key:
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


LEARNER_TAGS = {  # rlscale's tag -> RLlib's learner metric
    tags.loss_stat("policy_loss"): "policy_loss", tags.loss_stat("value_loss"): "vf_loss",
    tags.loss_stat("entropy"): "entropy", tags.loss_stat("approx_kl"): "mean_kl_loss",
    tags.EXPLAINED_VARIANCE: "vf_explained_var", tags.GRAD_NORM: "gradients_default_optimizer_global_norm",
}


def _learner_metrics(result: dict) -> dict[str, float]:
    module = _find(result, ("learners", "default_policy"), {}) or {}
    return {tag: float(module[key]) for tag, key in LEARNER_TAGS.items() if key in module}


class RLlibEngine:
    """RLlib PPO as an rlscale engine: one ``algo.train()`` per update.

    The caller (``rlscale.training.trainer``) has checked the RLlib version and the
    settings before it created the run directory.
    """

    def __init__(self, cfg: Config, run_dir: Path, n_envs: int, state: dict[str, Any] | None = None) -> None:
        import torch
        from ray.tune.registry import register_env
        from ray.util.debug import log_once

        try:
            # Here first: RLlib reports an env that fails in a remote env runner as an IndexError.
            make_env(_env_config(cfg)).close()
        except Exception as err:  # noqa: BLE001 - any failure becomes one line for the user
            raise UserError(f"cannot create {cfg.env.env_id} for RLlib: {err}") from None
        self.cfg = cfg
        self.noise = NoiseMeter(cfg.noise.noise_horizon, parts=("total",), clip=cfg.noise.noise_clip)
        self._optimizer_steps = 0
        # One torch thread in the driver: RLlib's small-batch train() ran much faster so.
        torch.set_num_threads(cfg.learner.learner_threads or 1)
        self.owns_ray = init_ray(cfg.run.address, log_to_driver=False, notices=notices_path(cfg))
        register_env("rlscale-env", make_env)
        # RLlib warns on every PPO build that it runs on the new API stack, which is what we
        # ask for; consuming its once-key keeps the console to rlscale's own lines.
        log_once("PPO_on_new_api_stack")
        self.algo = None
        try:
            self.algo = ppo_config(replace(cfg, env=replace(cfg.env, n_envs=n_envs))).build_algo()
            if state is not None:
                self.algo.restore_from_path(str(run_dir / "checkpoints" / state["rllib_checkpoint"]))
                self.noise.load_state_dict(state["noise"])
                self._optimizer_steps = int(state["optimizer_steps"])
        except BaseException:
            self.close()
            raise

    def describe(self) -> str:
        import ray

        return f"RLlib {ray.__version__} PPO | {self.cfg.pool.n_actors} env runners"

    @property
    def optimizer_steps(self) -> int:
        return self._optimizer_steps

    @property
    def start_warmup_steps(self) -> int:
        return 0  # RLlib's env runners take no random warm-up steps

    def update(self, lr: float) -> UpdateResult:
        a = self.cfg.agent
        set_learner_lr(self.algo, lr)
        result = self.algo.train()
        steps = int(_find(result, ("env_runners", "num_env_steps_sampled"), 0))
        optimizer_steps = a.n_epochs * a.n_minibatches
        self._optimizer_steps += optimizer_steps
        metrics = _learner_metrics(result)
        noise = zip(*(_items(result, ("learners", *key)) for key in NOISE_KEYS.values()), strict=True)
        for grad_sq, trace_sigma, b_big in noise:
            self.noise.observe(b_big)  # each measured minibatch's rows are fresh
            metrics |= self.noise.record_sample("total", NoiseSample(grad_sq, trace_sigma, math.nan, b_big))
        episodes = zip(*(_items(result, ("env_runners", *key)) for key in EPISODE_KEYS.values()), strict=True)
        return UpdateResult(agent_steps=steps, optimizer_steps=optimizer_steps,
                            optimizer_batch=steps / a.n_minibatches,
                            episodes=[(float(r), int(n)) for r, n in episodes], metrics=metrics)

    def resize(self, n_envs: int) -> ResizeReport:
        return ResizeReport(resize_envs(self.algo, n_envs), warmup_steps=0)

    def save(self, prefix: Path) -> dict[str, Any]:
        """RLlib's checkpoint into ``<prefix>.rllib``; the loop's checkpoint file names it."""
        target = prefix.with_suffix(".rllib")
        self.algo.save_to_path(str(target))
        return {"rllib_checkpoint": target.name, "noise": self.noise.state_dict(),
                "optimizer_steps": self._optimizer_steps}

    def close(self) -> None:
        import ray

        if self.algo is not None:
            self.algo.stop()
            self.algo = None
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()
