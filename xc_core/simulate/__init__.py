"""A seeded sponsored-search world simulator: the project's embedded default data set.

It generates commercial intents from a curated English vocabulary (with aliases that share no word
with the canonical terms, and confusable intents), advertisers' keywords (some arriving late),
Zipf-like queries in four markets, sessions of reformulations, a lexical BM25 control policy and
position-biased clicks; and it keeps the ground truth (relevance grades, intents, deciles, click
probabilities) in a saved :class:`World` that later stages query instead of regenerating.

    from xc_core.simulate import simulate
    summary = simulate("tiny", seed=0, out_dir="/tmp/sim")   # world/ and events/ under out_dir

Everything is a pure function of the config and its seed: the same seed gives byte-identical files.
"""

from xc_core.simulate.calibration import calibration_report
from xc_core.simulate.config import DEFAULT_MARKETS, WINDOW_END, WINDOW_START, MarketConfig, SimConfig, scale_config
from xc_core.simulate.events import write_events
from xc_core.simulate.run import TAIL_CLICKS, SimulationSummary, simulate
from xc_core.simulate.vocabulary import load_vocabulary, tokens
from xc_core.simulate.world import World

__all__ = [
    "DEFAULT_MARKETS",
    "TAIL_CLICKS",
    "WINDOW_END",
    "WINDOW_START",
    "MarketConfig",
    "SimConfig",
    "SimulationSummary",
    "World",
    "calibration_report",
    "load_vocabulary",
    "scale_config",
    "simulate",
    "tokens",
    "write_events",
]
