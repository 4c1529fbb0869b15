"""One Nature CNN pass of 256 rows by a team of 2 threads, by 1 thread and by 2 passes side by side, quiet and
beside one busy process, in turns (2026-11-29).

    python research/experiments/pass_threads_busy.py fp32|bf16
"""

import subprocess, sys, time, statistics, torch, numpy as np
from rlscale.agents.ppo import PPOLearner
from rlscale.agents.side_by_side import SideBySide
from rlscale.config import build_config
from rlscale.envs.vector import EnvSpec
from rlscale.models.nets import build_network
prec = sys.argv[1]
spec = EnvSpec((4, 84, 84), "uint8", 6, True)
torch.manual_seed(0)
L = PPOLearner(build_network(spec, "auto", 64), build_config("pong", "ppo", {"learner_precision": prec}))
obs = torch.randint(0, 255, (256, *spec.obs_shape), dtype=torch.uint8)
def grad(x):
    l, v = L.forward(x); return torch.autograd.grad(l.float().mean() + v.float().mean(), L.params)
side = SideBySide(2)
def team(): torch.set_num_threads(2); grad(obs)
def one(): torch.set_num_threads(1); grad(obs)
def sbs(): torch.set_num_threads(2); side.gradients(lambda p: (grad(obs[torch.from_numpy(p)]), {}), np.arange(256))
fns = dict(team2=team, one1=one, side2=sbs)
for load in ("quiet", "busy", "quiet", "busy"):
    bp = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load == "busy" else None
    time.sleep(0.5)
    for f in fns.values(): f()
    t = {k: [] for k in fns}
    for r in range(5):
        for k, f in fns.items():
            s = time.perf_counter(); f(); t[k].append(time.perf_counter() - s)
    m = {k: statistics.median(v) for k, v in t.items()}
    print(prec, load, " ".join(f"{k} {1e3*v:.0f} ms" for k, v in m.items()), f"| side2 vs one1: {m['one1']/m['side2']:.2f}x, team2 vs one1: {m['one1']/m['team2']:.2f}x", flush=True)
    if bp: bp.kill(); bp.wait()
side.close()
