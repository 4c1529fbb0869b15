"""Data-parallel learning: one learner's share of the batch, averaged with the others by all-reduce.

Each of L learner processes holds a replica of the network and optimizer and
takes whole environments of the batch (``env_shares``). A learner's gradient
g_r is the mean-loss gradient over its n_r rows; the batch's is their
size-weighted mean G = sum_r (n_r / N) g_r, formed by one all-reduce
(torch.distributed; gloo on CPU, NCCL on GPU) before clipping and the
optimizer step, so every replica takes the same step.

The noise scale then comes for free (paper §2.2, docs/noise-scale.md): the local
squared norms |g_r|^2 with B_small = n_r and the all-reduced |G|^2 with
B_big = N are exactly the estimator's env groups — whole environments each,
unequal sizes handled as for one learner — with no extra backward pass. With
L learners the estimator has L groups (the single learner splits its batch
into ``noise_groups``); the policy/value split is not measured (it needs a
second backward pass, which is what this route saves).

No Ray here: the Ray actors that run the learners live in ``ray_learners``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from rlscale.agents.gradients import GradientReport


def env_shares(n_envs: int, n_learners: int) -> list[np.ndarray]:
    """Batch columns of each learner: whole environments, sizes differing by at most one."""
    return list(np.array_split(np.arange(n_envs), n_learners))


def local_rows(rows: np.ndarray, n_envs: int, first_env: int, share_envs: int) -> np.ndarray:
    """The batch rows (row = step * n_envs + env) of one learner's environments, as rows of its share.

    The share holds environments ``first_env`` .. ``first_env + share_envs - 1``
    of a batch of ``n_envs``; its own rows are numbered step * share_envs +
    (env - first_env). Order is kept, so a minibatch drawn over the whole batch
    is the same minibatch on every learner.
    """
    env = rows % n_envs
    mine = rows[(env >= first_env) & (env < first_env + share_envs)]
    return (mine // n_envs) * share_envs + (mine % n_envs - first_env)


@dataclass
class Share:
    """Which environments of the current batch this learner holds."""

    n_envs: int  # environments in the whole batch
    first_env: int  # the first of this learner's
    envs: int  # how many are this learner's


class DataParallel:
    """This learner's side of the all-reduce; one per learner process, in an initialised process group."""

    def __init__(self) -> None:
        if not dist.is_initialized():
            raise RuntimeError("DataParallel needs torch.distributed.init_process_group first")
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.share = Share(0, 0, 0)  # set by the learner's host before each update

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """This learner's rows among ``rows`` of the whole batch (see ``local_rows``)."""
        return local_rows(rows, self.share.n_envs, self.share.first_env, self.share.envs)

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sums over the learners, in float64."""
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t)
        return t.tolist()

    def mean_std(self, x: torch.Tensor) -> tuple[float, float]:
        """Mean and standard deviation (n - 1 in the denominator, as torch's) of ``x`` over all learners."""
        x = x.double()
        n, total, squares = self.sum([float(x.numel()), float(x.sum()), float(x.square().sum())])
        mean = total / n
        return mean, math.sqrt(max(squares - n * mean * mean, 0.0) / max(n - 1.0, 1.0))

    def variance(self, x: np.ndarray) -> float:
        """Population variance (as numpy's) of ``x`` over all learners; nan when empty."""
        x = x.astype(np.float64)
        n, total, squares = self.sum([float(x.size), float(x.sum()), float(np.square(x).sum())])
        return math.nan if n == 0 else max(squares / n - (total / n) ** 2, 0.0)

    def combine(self, params: list[torch.nn.Parameter], local: GradientReport | None, measure: bool
                ) -> GradientReport:
        """Average the learners' gradients in ``p.grad`` into the batch's; the report the estimator reads.

        ``local``: this learner's ``backward`` report (its gradient in
        ``p.grad``), or None when it holds no rows of this (mini)batch — it then
        adds zeros. Every learner returns the same report and holds the same
        gradient afterwards.
        """
        n_local = sum(local.sizes) if local is not None else 0
        mine = (n_local, local.big_sq_norms["total"] if local is not None else 0.0,
                local.stats if local is not None else {}, local.finite if local is not None else True)
        gathered: list = [None] * self.world_size
        dist.all_gather_object(gathered, mine)
        n_total = sum(n for n, *_ in gathered)
        # One flat buffer: one all-reduce for the whole model.
        flat = torch.cat([(p.grad if p.grad is not None and local is not None else torch.zeros_like(p)).reshape(-1)
                          for p in params])  # in the parameters' dtype (fp32: bf16 autocast leaves them fp32)
        flat.mul_(n_local / n_total)
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        big_sq = float(flat.double().square().sum())
        sizes = [n for n, *_ in gathered if n > 0]
        stats: dict[str, float] = {}
        for n, _, local_stats, _ in gathered:
            for key, value in local_stats.items():
                stats[key] = stats.get(key, 0.0) + n / n_total * value
        report = GradientReport(sizes=sizes, big_sq_norms={"total": big_sq}, stats=stats)
        # One learner's rows cannot be compared with anything: no estimate from a lone share.
        report.sq_norms["total"] = [sq for n, sq, *_ in gathered if n > 0] if measure and len(sizes) > 1 else []
        report.finite = math.isfinite(big_sq) and all(finite for *_, finite in gathered) and all(
            math.isfinite(v) for v in stats.values())
        return report
