"""Tolerances for float comparisons, derived from the dtype and the size of the reduction.

Two computations of the same quantity that add the same terms in different
orders (whole batch vs groups vs passes, one learner vs an all-reduce, a
vendor's kernel vs another CPU's) differ by rounding alone. Each addition
rounds by at most eps/2 of its running magnitude, so after n terms the
difference is a sum of n small random roundings: it grows like sqrt(n)·eps
times the magnitude of what is summed (n·eps in the adversarial worst case,
which vectorised kernels' tree sums do not approach). A tolerance picked from
one machine's run encodes that machine's summation order; one derived here
holds on any CPU, AVX2 or AVX-512, with or without bf16 units.

Weights after optimizer steps differ by the optimizer's step's sensitivity
to its gradient times that rounding. TF-style RMSprop (mean square starting at
1) takes steps of about lr·g, so the largest weight change is the right scale.
torch's RMSprop and Adam take first steps of about lr·sign(g): near g = 0
their step amplifies a gradient's rounding up to lr/eps (10^2 here), so tests
that compare weights after steps use TF-style RMSprop (``optimizer =
"rmsprop_tf"``), whatever the algorithm.

``sum_tolerance(n, scale)`` returns pytest/torch/numpy keyword arguments:
``atol = SAFETY·sqrt(n)·eps·scale`` with ``scale`` the largest magnitude in
play (the reference's largest element, or what an optimizer step scales a
gradient by), and ``rtol = SAFETY·sqrt(n)·eps``. SAFETY = 16 puts the bound
well above the random-walk spread (its standard deviation is ~sqrt(n)·eps/2)
while a real error (a dropped group, a wrong weight) stays orders of
magnitude outside it.
"""

from __future__ import annotations

import math

import numpy as np
import torch

SAFETY = 16.0


def sum_tolerance(n_terms: int, scale: float = 1.0, dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """rtol/atol for two results of the same n-term float sum added in different orders."""
    rel = SAFETY * math.sqrt(max(1, n_terms)) * torch.finfo(dtype).eps
    return {"rtol": rel, "atol": rel * scale}


def largest(values) -> float:
    """The largest magnitude in a tensor, an array or a list of either."""
    if isinstance(values, (list, tuple)):
        return max(largest(v) for v in values)
    return float(np.max(np.abs(np.asarray(values.detach() if isinstance(values, torch.Tensor) else values))))
