"""Run a simulated A/B test (and the A/A calibration) on a simulated world.

    traffic (test period, users) → each arm's candidates per distinct query (cached) → shared selection →
    ground-truth outcomes → per-user sums → %Δ with delta-method intervals, overall / per segment / per market
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.abtest.arms import Arm
from xc_core.abtest.auction import Outcomes, common_uniforms, outcomes, select
from xc_core.abtest.config import ABConfig
from xc_core.abtest.stats import LOWER_IS_BETTER, METRICS, arm_summary, compare, lifts_json, per_user, rounded
from xc_core.abtest.traffic import Traffic, draw_traffic, treatment_users, validation_days
from xc_core.simulate.events import Sampler
from xc_core.simulate.world import World

SEGMENTS = ("head", "torso", "tail")


class CandidateCache:
    """An arm's candidates per world query row, computed once per row (the cached query embeddings of a test)."""

    def __init__(self, arm: Arm, world: World, k: int) -> None:
        self.arm, self.world, self.k = arm, world, k
        n = len(world.queries)
        self.scores = np.full((n, k), -np.inf, dtype=np.float32)
        self.keywords = np.full((n, k), -1, dtype=np.int64)
        self.ready = np.zeros(n, dtype=bool)
        self.seconds = 0.0

    def load(self, path: Path) -> None:
        """Rows another process already computed for the same arm and K (a saved :meth:`save`)."""
        if path.exists():
            with np.load(path) as saved:
                if saved["scores"].shape == self.scores.shape:
                    self.scores, self.keywords, self.ready = saved["scores"], saved["keywords"], saved["ready"]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, scores=self.scores, keywords=self.keywords, ready=self.ready)
        tmp.replace(path)

    def fill(self, rows: np.ndarray) -> None:
        todo = np.unique(rows[~self.ready[rows]])
        if len(todo):
            started = time.perf_counter()
            self.scores[todo], self.keywords[todo] = self.arm.candidates(self.world, todo, self.k)
            self.ready[todo] = True
            self.seconds += time.perf_counter() - started


class Simulation:
    """A world with its samplers and user ids: everything an A/B test reuses across arms and seeds."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.sampler = Sampler(world)
        self.user_ids: list[str] = self.sampler.user_ids.to_list()
        self._caches: dict[int, CandidateCache] = {}

    def cache(self, arm: Arm, k: int) -> CandidateCache:
        """The arm's candidate cache (one per arm object and K)."""
        key = id(arm)
        if key not in self._caches or self._caches[key].k != k:
            self._caches[key] = CandidateCache(arm, self.world, k)
        return self._caches[key]

    def traffic(self, cfg: ABConfig) -> Traffic:
        days = validation_days(self.world) if cfg.period == "validation" else None
        return draw_traffic(self.world, cfg.queries, cfg.seed, self.sampler, days=days)

    def serve(self, arm: Arm, traffic: Traffic, cfg: ABConfig, uniforms: tuple[np.ndarray, np.ndarray]) -> Outcomes:
        cache = self.cache(arm, cfg.selection.candidates)
        cache.fill(traffic.query)
        shown = select(self.world, traffic, traffic.query, cache.scores, cache.keywords, cfg.selection)
        return outcomes(self.world, traffic, shown, uniforms[0], uniforms[1], cfg.outcomes)


Served = dict[str, tuple[Traffic, Outcomes]]  # arm → (the events it served, their outcomes)


def _compare(sim: Simulation, served: Served, keep: Callable[[Traffic], np.ndarray], paired: bool,
             cfg: ABConfig) -> dict[str, Any]:
    """Arms' summaries and lifts over the events ``keep`` selects (a segment, a market, or all)."""
    sums = {}
    for name, (traffic, out) in served.items():
        rows = np.flatnonzero(keep(traffic))
        sums[name] = per_user(out.take(rows), traffic.user[rows], len(sim.user_ids))
    lifts = compare(sums["treatment"], sums["control"], paired=paired, alpha=cfg.alpha)
    return {"arms": {name: {k: rounded(v) for k, v in arm_summary(s).items()} for name, s in sums.items()},
            **lifts_json(lifts)}


def run_abtest(sim: Simulation, control: Arm, treatment: Arm, cfg: ABConfig) -> dict[str, Any]:
    """One A/B test; the JSON the CLI prints and the report renders."""
    started = time.perf_counter()
    traffic = sim.traffic(cfg)
    uniforms = common_uniforms(len(traffic), cfg.selection.slots, cfg.seed)
    if cfg.paired:
        parts = {"control": traffic, "treatment": traffic}
        draws = {"control": uniforms, "treatment": uniforms}
    else:
        treated = treatment_users(sim.user_ids, cfg.salt, cfg.treatment_share)[traffic.user]
        parts = {"control": traffic.take(np.flatnonzero(~treated)), "treatment": traffic.take(np.flatnonzero(treated))}
        draws = {"control": (uniforms[0][~treated], uniforms[1][~treated]),
                 "treatment": (uniforms[0][treated], uniforms[1][treated])}
    arms = {"control": control, "treatment": treatment}
    served: Served = {name: (parts[name], sim.serve(arms[name], parts[name], cfg, draws[name])) for name in arms}
    result = {"design": "paired (same events, common random numbers)" if cfg.paired else
              f"split users by salted hash ({cfg.treatment_share:.0%} treatment)",
              "control_arm": control.describe(), "treatment_arm": treatment.describe(),
              **_compare(sim, served, lambda t: np.ones(len(t), dtype=bool), cfg.paired, cfg)}
    result["segments"] = {s: _compare(sim, served, _where("segment", s), cfg.paired, cfg) for s in SEGMENTS}
    names = sim.world.config.market_names
    result["markets"] = {names[m]: _compare(sim, served, _where("market", m), cfg.paired, cfg)
                         for m in range(len(names))}
    result["config"] = cfg.model_dump()
    result["lower_is_better"] = list(LOWER_IS_BETTER)
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def _where(field: str, value: object) -> Callable[[Traffic], np.ndarray]:
    return lambda traffic: np.asarray(getattr(traffic, field) == value)


def aa_calibration(sim: Simulation, arm: Arm, cfg: ABConfig, runs: int) -> dict[str, Any]:
    """Run ``arm`` against itself with split users over ``runs`` seeds: the share of significant results per
    metric should be about ``alpha`` (a test that cries wolf more often is not to be trusted)."""
    hits = {name: 0 for name in METRICS}
    tested = {name: 0 for name in METRICS}
    for seed in range(runs):
        run_cfg = cfg.model_copy(update={"seed": cfg.seed + seed, "salt": f"{cfg.salt}-aa{seed}", "paired": False})
        result = run_abtest(sim, arm, arm, run_cfg)
        for name, p in result["p_value"].items():
            if p is not None:
                tested[name] += 1
                hits[name] += p < cfg.alpha
    rates = {name: hits[name] / tested[name] if tested[name] else None for name in METRICS}
    pooled = sum(hits.values()) / max(1, sum(tested.values()))
    return {"runs": runs, "alpha": cfg.alpha, "queries": cfg.queries, "false_positive_rate": rates,
            "pooled_false_positive_rate": round(pooled, 4)}
