"""Ads: advertisers bid on keywords for intents, optionally branded or local, and some arrive late.

Popular intents attract more advertisers (keyword count ~ popularity^0.5), but the serving policy
shows only k ads per query, so clicks concentrate on few keywords: the skew the issue asks for.
About ``novel_share`` of keywords start in the last ``novel_days`` (zero- and one-shot keywords).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from statistics import NormalDist

import numpy as np
import polars as pl

from xc_core.simulate.config import SimConfig
from xc_core.simulate.vocabulary import Vocabulary

KEYWORD_SCHEMA: dict[str, pl.DataType] = {
    "keyword_id": pl.String(),
    "text": pl.String(),
    "intent_id": pl.String(),
    "market": pl.String(),
    "kind": pl.String(),  # canonical | product | alias | partial_alias
    "brand": pl.String(),
    "location": pl.String(),
    "bid": pl.Float64(),
    "start_date": pl.Date(),
}
_RETRIES = 6
_STD_NORMAL = NormalDist()


def build_keywords(vocab: Vocabulary, intents: pl.DataFrame, popularity: np.ndarray, cfg: SimConfig,
                   rng: np.random.Generator) -> pl.DataFrame:
    """About ``cfg.keywords`` keywords, unique by (market, text), ids in generation order."""
    cells = popularity ** 0.5
    expected = cfg.keywords * cells / cells.sum()
    counts = np.floor(expected).astype(int) + (rng.random(expected.shape) < expected % 1)
    rows: list[dict[str, object]] = []
    intent_rows = intents.to_dicts()
    for m, market in enumerate(cfg.market_names):
        taken: set[str] = set()
        for i, intent in enumerate(intent_rows):
            if counts[m, i] == 0:
                continue
            aliases = intent["aliases"] + [r["text"] for r in intent["regional_aliases"] if r["market"] == market]
            draws = iter(rng.random((int(counts[m, i]) * _RETRIES, 10)).tolist())
            for _ in range(int(counts[m, i])):
                row = _keyword(vocab, intent, market, aliases, taken, draws)
                if row is not None:
                    rows.append(row)
    generated = {k: v for k, v in KEYWORD_SCHEMA.items() if k not in ("keyword_id", "start_date")}
    frame = pl.DataFrame(rows, schema=generated)
    ids = [f"K{i:07d}" for i in range(len(frame))]
    start_days = start_offsets(len(frame), cfg, rng)
    dates = [cfg.start.date() + timedelta(days=int(d)) for d in start_days]
    return frame.with_columns(keyword_id=pl.Series(ids), start_date=pl.Series(dates, dtype=pl.Date)).select(
        list(KEYWORD_SCHEMA))


def start_offsets(n: int, cfg: SimConfig, rng: np.random.Generator) -> np.ndarray:
    """First day (relative to the period start) each keyword may be served.

    Most keywords predate the period; ``novel_share`` start inside the last ``novel_days`` days and
    ``ramp_share`` somewhere in the training period after its first day.
    """
    offsets = -rng.integers(0, 366, n)
    order = rng.permutation(n)
    n_novel = int(round(cfg.novel_share * n))
    n_ramp = int(round(cfg.ramp_share * n)) if cfg.train_days > 1 else 0
    novel, ramp = order[:n_novel], order[n_novel:n_novel + n_ramp]
    offsets[novel] = cfg.train_days + rng.integers(0, cfg.novel_days, n_novel)
    offsets[ramp] = rng.integers(1, max(2, cfg.train_days), n_ramp)
    return offsets


def _keyword(vocab: Vocabulary, intent: dict, market: str, aliases: list[str], taken: set[str],
             draws: Iterator[list[float]]) -> dict[str, object] | None:
    """One advertiser keyword; retried a few times when its text already exists in the market."""
    brands, places = vocab.brands[intent["category"]], vocab.locations[market]
    for _ in range(_RETRIES):
        u = next(draws)
        kind, base = _base(intent, aliases, u)
        brand = brands[int(u[3] * len(brands))] if u[2] < 0.3 else None
        place = places[int(u[5] * len(places))] if intent["local"] and u[4] < 0.45 else None
        words = [w for w in (brand, base, place) if w]
        if u[6] < 0.35:
            if u[8] < 0.4:
                words = [vocab.ad_prefixes[int(u[7] * len(vocab.ad_prefixes))], *words]
            else:
                words = [*words, vocab.ad_suffixes[int(u[7] * len(vocab.ad_suffixes))]]
        text = " ".join(words)
        if text in taken:
            continue
        taken.add(text)
        bid = intent["cpc"] * np.exp(0.45 * _normal(u[9])) * (1.25 if brand else 1.0) * (1.15 if place else 1.0)
        return {"text": text, "intent_id": intent["intent_id"], "market": market, "kind": kind, "brand": brand,
                "location": place, "bid": round(max(0.05, float(bid)), 2)}
    return None


def _base(intent: dict, aliases: list[str], u: list[float]) -> tuple[str, str]:
    """The keyword's core words: the intent's canonical phrase mostly, sometimes an alias."""
    canonical: list[str] = intent["canonical_terms"]
    if u[0] < 0.62 or (u[0] >= 0.75 and not aliases):
        return "canonical", canonical[0] if u[1] < 0.8 else canonical[-1]
    if u[0] < 0.75:
        return ("product", intent["product"]) if intent["modifier"] else ("canonical", canonical[0])
    if u[0] < 0.9 or not intent["partial_aliases"]:
        return "alias", aliases[int(u[1] * len(aliases))]
    return "partial_alias", intent["partial_aliases"][int(u[1] * len(intent["partial_aliases"]))]


def _normal(u: float) -> float:
    """A standard normal quantile from a uniform (keeps one draw per field, so retries stay aligned)."""
    return _STD_NORMAL.inv_cdf(min(max(u, 1e-9), 1 - 1e-9))
