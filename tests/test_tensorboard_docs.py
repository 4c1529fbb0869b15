"""docs/tensorboard.md against real runs: the tags they log, and the charts they open with.

Two short serial CartPole runs (no Ray) are read back from their event files: PPO under
``--batch auto`` with every optional measurement on, and A2C under ``--batch critical`` (where
the controller's target is the signal's noise scale itself, the case where two charted
lines coincide). Their tags are checked against the doc's tag table in both directions:
every logged tag is in the table, and every table tag is logged exactly where the
conditions in its *logged* column say.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlscale import tags
from rlscale.config import PRECONDITIONED_OPTIMIZERS, Config, load_saved
from rlscale.rundir.checkpoint import CONFIG_FILE
from rlscale.train import main
from rlscale.training.logger import BATCH_CHART, CHART_TAGS, NOISE_CHART, custom_scalars_layout
from tests.conftest import ROOT
from tests.test_train import REQUIRED_TAGS, charted, custom_scalars_charts

DOC = ROOT / "docs" / "tensorboard.md"
# The doc: "`<part>` stands for `policy` and `value`".
PLACEHOLDERS = {"<part>": ("policy", "value")}
RUN_TIMEOUT = 600  # both runs take ~20 s on an idle 2-core machine, several times that on a busy one

RUNS = {
    # 8 envs x 16 steps, 2 epochs x 2 minibatches: 4 optimizer steps per update. --batch auto times 5
    # updates, probes another size, times 5 more and fits its cost model (which prices the cluster
    # clock); the metrics every 3rd batch. cluster_one_node_first off: on, its start on one node would be held
    # until a learning line this short run never reaches, with no second size to fit.
    "ppo": ["cartpole", "--agent", "ppo", "--pool", "serial", "--n-envs", "8", "--set", "vector_size=2",
            "--n-steps", "16", "--n-epochs", "2", "--n-minibatches", "2", "--batch", "auto",
            "--max-envs", "16", "--cluster-nodes", "4", "--set", "cluster_one_node_first=false", "--set", "cooldown=128", "--set", "noise_settle=0", "--set", "noise_parts_every=1",
            "--set", "curvature_every=3", "--set", "noise_clip=5", "--total-frames", "3072", "--log-interval", "1000"],
    # 8 envs x 5 steps (the preset's), 12 updates; critical, but a cool-down that never ends: no resize.
    "a2c": ["cartpole", "--agent", "a2c", "--pool", "serial", "--n-envs", "8", "--set", "vector_size=2",
            "--batch", "critical", "--set", "cooldown=1000000", "--set", "noise_settle=0", "--set", "curvature_every=3",
            "--total-frames", "480", "--log-interval", "1000"],
}


@dataclass
class Run:
    cfg: Config
    run_dir: Path
    events: EventAccumulator

    @property
    def tags(self) -> set[str]:
        return set(self.events.Tags()["scalars"])

    def series(self, tag: str) -> dict[int, float]:
        return {e.step: e.value for e in self.events.Scalars(tag)} if tag in self.tags else {}

    @property
    def resized(self) -> bool:
        return len({*self.series(tags.N_ENVS).values(), self.cfg.env.n_envs}) > 1

    @property
    def batches(self) -> int:
        return len(self.series(tags.SIZE))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    import ray

    out = {}
    try:
        for name, argv in RUNS.items():
            run_dir = tmp_path_factory.mktemp("tensorboard-docs") / name
            assert main([*argv, "--run-dir", str(run_dir)]) == 0
            events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
            events.Reload()
            out[name] = Run(load_saved(run_dir / CONFIG_FILE), run_dir, events)
        assert not ray.is_initialized()  # --serial: no Ray
    finally:
        if ray.is_initialized():
            ray.shutdown()
    # What the conditions below take for granted: the preconditioned metrics need a measured batch
    # after the optimizer's first step, and the cost model two batch sizes of five timings each.
    for run in out.values():
        assert run.batches > run.cfg.noise.curvature_every, run.run_dir
    assert out["ppo"].resized and out["ppo"].batches >= 12
    return out


# ---------------------------------------------------------------------------- the doc's tag table

def table_rows() -> dict[str, tuple[str, ...]]:
    """{tag or pattern: the conditions of its *logged* column} of the doc's "Every tag" table."""
    section = DOC.read_text().split("## Every tag", 1)[1]
    rows = {}
    for line in section.splitlines():
        match = re.fullmatch(r"\| `([^`]+)` \| .* \| ([^|]+) \|", line.strip())
        if match:
            assert match[1] not in rows, f"{match[1]} has two rows"
            rows[match[1]] = tuple(c.strip() for c in match[2].split(","))
    assert len(rows) > 40, "the tag table was not found"
    return rows


def expand(pattern: str) -> list[str]:
    """A table tag, or a pattern's tags (``PLACEHOLDERS``)."""
    for placeholder, values in PLACEHOLDERS.items():
        if placeholder in pattern:
            return [t for v in values for t in expand(pattern.replace(placeholder, v))]
    assert "<" not in pattern, f"{pattern}: a placeholder this test does not know"
    return [pattern]


def documented() -> dict[str, tuple[str, ...]]:
    return {tag: conditions for pattern, conditions in table_rows().items() for tag in expand(pattern)}


def ratio_parts(tag: str) -> tuple[str, str]:
    """The two averages a "where defined" ratio is logged for: both positive at the same update."""
    for part in tags.PARTS:
        if tag == tags.noise("b_simple", part):
            return tags.noise("trace_sigma", part), tags.noise("grad_sq", part)
    for b, quadratic, trace in tags.METRIC_TAGS.values():
        if tag == b:
            return trace, quadratic
    if tag == tags.EPS_MAX:  # |G|^2 / G^T H G
        return tags.noise("grad_sq", "total"), tags.METRIC_TAGS["hessian"][1]
    raise AssertionError(f"{tag} is marked 'where defined', but this test does not know what it divides")


def resolved_fit(run: Run) -> bool:
    """Whether auto's own fit of T(B) was resolved at some logged update, read back from its logged a and r:
    an unresolved one logs a = 0 (no overhead) or r = 10^6 (no slope)."""
    overhead, rate = run.series(tags.OVERHEAD_SECONDS), run.series(tags.EXCHANGE_RATE)
    return any(overhead[step] > 0 and rate[step] < 0.999e6 for step in overhead.keys() & rate.keys())


def defined(run: Run, tag: str) -> bool:
    """Whether a ratio had a value at some logged update: both of its averages positive there."""
    a, b = (run.series(t) for t in ratio_parts(tag))
    return any(a[step] > 0 and b[step] > 0 for step in a.keys() & b.keys())


def measured_metrics(cfg: Config) -> bool:
    n = cfg.noise
    return n.measure_noise and n.measure_curvature and n.curvature_every > 0 and n.noise_groups >= 3 \
        and cfg.learner.learners <= 1


# Each condition of the doc's *logged* column: whether a run logs the tag (given the others hold).
CONDITIONS: dict[str, Callable[[Run, str], bool]] = {
    "every update": lambda run, tag: True,
    "every episode": lambda run, tag: True,  # CartPole's episodes end within a few dozen steps
    "PPO": lambda run, tag: run.cfg.agent.algo == "ppo",
    "A2C": lambda run, tag: run.cfg.agent.algo == "a2c",
    "measured": lambda run, tag: run.cfg.noise.measure_noise,
    "parts": lambda run, tag: (run.cfg.noise.measure_noise and run.cfg.noise.noise_parts_every > 0
                               and run.cfg.learner.learners <= 1),
    "metrics": lambda run, tag: measured_metrics(run.cfg),
    "preconditioned": lambda run, tag: run.cfg.agent.optimizer in PRECONDITIONED_OPTIMIZERS,
    "`noise_clip`": lambda run, tag: run.cfg.noise.noise_clip > 0,
    "batch moves": lambda run, tag: run.cfg.control.batch != "fixed",
    "resize": lambda run, tag: run.resized,
    "`--batch auto`": lambda run, tag: run.cfg.control.batch == "auto",
    "`--cluster-nodes`": lambda run, tag: run.cfg.control.cluster_nodes > 0,
    "once the fit is resolved": lambda run, tag: bool(run.cfg.control.cluster_fit) or resolved_fit(run),
    "where defined": defined,
}


def expected(run: Run, tag: str, conditions: tuple[str, ...]) -> bool:
    unknown = set(conditions) - CONDITIONS.keys()
    assert not unknown, f"{tag}: conditions this test does not know: {unknown}"
    return all(CONDITIONS[c](run, tag) for c in conditions)


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("name", list(RUNS))
def test_every_logged_tag_is_in_the_doc_table(runs, name):
    undocumented = runs[name].tags - documented().keys()
    assert not undocumented, f"logged by the {name} run but not in docs/tensorboard.md: {sorted(undocumented)}"


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("name", list(RUNS))
def test_each_table_tag_is_logged_exactly_where_its_conditions_say(runs, name):
    run = runs[name]
    wrong = {tag: ("missing" if tag not in run.tags else "not expected", conditions)
             for tag, conditions in documented().items() if expected(run, tag, conditions) != (tag in run.tags)}
    assert not wrong, f"the {name} run against docs/tensorboard.md: {wrong}"


def test_the_three_ratios_the_table_missed_are_documented_with_their_conditions():
    rows = documented()
    b, quadratic, trace = tags.METRIC_TAGS["precond_hessian"]
    assert rows[b] == ("metrics", "preconditioned", "where defined")
    assert rows[quadratic] == rows[trace] == ("metrics", "preconditioned")


def test_every_tag_the_code_names_is_documented():
    """Every tag constant of rlscale/tags.py, each part's and each metric's, has its row (legacy ones aside)."""
    named = {v for k, v in vars(tags).items() if k.isupper() and isinstance(v, str) and "/" in v and "{" not in v}
    named -= {tags.LEGACY_SIGNAL}
    named |= {tags.noise(q, p) for q in ("b_simple", "grad_sq", "trace_sigma") for p in tags.PARTS}
    named |= {tags.raw_noise(q, p) for q in ("grad_sq", "trace_sigma") for p in tags.PARTS}
    named |= {t for triple in tags.METRIC_TAGS.values() for t in triple}
    missing = named - documented().keys()
    assert not missing, sorted(missing)


# ---------------------------------------------------------------------------- PPO's tags

@pytest.mark.timeout(RUN_TIMEOUT)
def test_a_short_ppo_run_logs_every_required_tag_and_its_own(runs):
    """tests/test_train.py's REQUIRED_TAGS (checked there on A2C), less the tags the doc marks A2C's only
    (none), and the doc's PPO tags; the raw noise estimates among them, which PPO did not log."""
    rows = documented()
    not_ppo = {tag for tag, conditions in rows.items() if "A2C" in conditions}
    ppo_only = {tag for tag, conditions in rows.items() if "PPO" in conditions}
    assert ppo_only == {"train/approx_kl", "train/clipfrac", "train/explained_variance"}
    required = (REQUIRED_TAGS - not_ppo) | ppo_only
    missing = required - runs["ppo"].tags
    assert not missing, sorted(missing)
    assert {tags.raw_noise(q, p) for q in ("grad_sq", "trace_sigma") for p in tags.PARTS} <= runs["ppo"].tags
    assert not ppo_only & runs["a2c"].tags


# ---------------------------------------------------------------------------- the charts

def doc_charts() -> list[tuple[str, str]]:
    """(chart, lines) rows of the doc's custom-scalars table."""
    section = DOC.read_text().split("## The story of a run", 1)[1].split("\n## ", 1)[0]
    rows = [re.fullmatch(r"\| (.+?) \| (.+) \|", line.strip()) for line in section.splitlines()]
    return [(m[1], m[2]) for m in rows if m and m[1] not in ("chart", "---")]


def same_points(run: Run, a: str, b: str) -> bool:
    """Two logged tags whose lines would lie on each other: the same values at every shared step."""
    sa, sb = run.series(a), run.series(b)
    shared = sa.keys() & sb.keys()
    return len(shared) >= 3 and all(sa[s] == sb[s] for s in shared)


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("name", list(RUNS))
def test_the_written_layout_has_legible_charts_of_documented_tags(runs, name):
    """Read back from the run's events: at most five tags a chart, each pattern one tag, every tag
    documented, and no chart with two tags on the same points (TensorBoard 2.21 draws a run's lines
    in one colour, docs/tensorboard.md)."""
    run = runs[name]
    charts = custom_scalars_charts(run.run_dir)
    written = {t: p for category in custom_scalars_layout(run.cfg.control.signal).values() for t, (_, p) in category.items()}
    assert charts == written
    rows = documented()
    for title, patterns in charts.items():
        assert len(patterns) <= CHART_TAGS, (title, patterns)
        for pattern in patterns:
            assert len(charted([pattern], set(rows))) == 1, (title, pattern)
        on_chart = sorted(charted(patterns, run.tags))
        overlaid = [(a, b) for i, a in enumerate(on_chart) for b in on_chart[i + 1:] if same_points(run, a, b)]
        assert not overlaid, (title, overlaid)
    noise_chart, batch_chart = charted(charts[NOISE_CHART], run.tags), charted(charts[BATCH_CHART], run.tags)
    assert {tags.signal_tag(run.cfg.control.signal), tags.OPTIMIZER_BATCH} <= noise_chart
    assert {tags.OPTIMIZER_BATCH, tags.TARGET} <= batch_chart


@pytest.mark.timeout(RUN_TIMEOUT)
def test_under_batch_critical_the_target_is_the_signal_and_they_share_no_chart(runs):
    """The hazard the layout avoids, in the A2C run: every target point is the signal's noise scale."""
    run = runs["a2c"]
    signal = tags.signal_tag(run.cfg.control.signal)
    assert run.cfg.control.batch == "critical" and run.cfg.control.crit_ratio == 1.0
    assert len(run.series(tags.TARGET)) >= 3 and same_points(run, signal, tags.TARGET)
    for title, patterns in custom_scalars_charts(run.run_dir).items():
        assert not {signal, tags.TARGET} <= charted(patterns, run.tags), title


@pytest.mark.parametrize("signal", tags.SIGNALS)
def test_every_signal_gets_its_noise_scale_charted_beside_the_batch(signal):
    layout = custom_scalars_layout(signal)
    rows = documented()
    for category in layout.values():
        for title, (kind, patterns) in category.items():
            assert kind == "Multiline" and len(patterns) <= CHART_TAGS, (title, patterns)
            assert all(len(charted([p], set(rows))) == 1 for p in patterns), (title, patterns)
    noise_chart = charted(layout["rlscale"][NOISE_CHART][1], set(rows))
    assert {tags.signal_tag(signal), tags.signal_tag("total"), tags.OPTIMIZER_BATCH} <= noise_chart
    assert tags.TARGET not in noise_chart
    metrics_chart = set().union(*(charted(p, set(rows)) for _, p in layout["noise scale of each loss part and metric"].values()))
    assert {tags.signal_tag(s) for s in ("total", *tags.METRICS)} <= metrics_chart


def test_the_doc_describes_each_chart_in_order_with_its_tags():
    """The doc's chart table: the run's first group of charts in order, each row naming the chart's
    tags (the default signal's layout; the signal's own line is described in words)."""
    rows = doc_charts()
    layout = custom_scalars_layout("total")["rlscale"]
    assert len(rows) == len(layout)
    for (doc_title, lines), (title, (_, patterns)) in zip(rows, layout.items(), strict=True):
        assert title.startswith(doc_title), (doc_title, title)
        named = set(re.findall(r"`([^`]+)`", lines))
        for tag in charted(patterns, set(documented())):
            assert tag in named, (title, tag)
