"""Simulated A/B tests: serve the simulator's test-period traffic with two arms through one ad-selection step
and score CTR, impression yield, bad-match rates, quick-backs and revenue from the ground truth, with
delta-method intervals per query segment and market (RAMEN Tables 1–3), an A/A calibration, and a replay
estimate for logs without ground truth."""

from xc_core.abtest.arms import Arm, Bm25Arm, ModelArm, OracleArm, RandomArm, resolve_arm
from xc_core.abtest.config import ABConfig, OutcomeConfig, SelectionConfig
from xc_core.abtest.run import Simulation, aa_calibration, run_abtest

__all__ = ["ABConfig", "Arm", "Bm25Arm", "ModelArm", "OracleArm", "OutcomeConfig", "RandomArm", "SelectionConfig",
           "Simulation", "aa_calibration", "resolve_arm", "run_abtest"]
