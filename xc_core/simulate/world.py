"""The simulated world: intents, keywords and queries, with the ground truth later stages ask about.

Ground truth is a pure function of the tables, so a saved world (Parquet + JSON) answers exactly as
the one that generated the logs: relevance grades, intents, deciles and click probabilities for any
(query text, keyword) pair, including pairs the logs never showed.

Relevance grade (0-3): the intent level (3 same intent, 2 same product, 1 same category, 0 else),
minus 1 when query and keyword name different brands, minus 2 when they name different places,
floored at 0. P(click) = examination(position) x attractiveness(grade), examination = pos^-eta.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import date
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl

from xc_core.simulate.bm25 import Bm25Server
from xc_core.simulate.config import SimConfig, scale_config

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
TABLES = ("intents", "keywords", "queries", "intent_markets")


def write_table(frame: pl.DataFrame, path: Path) -> Path:
    """Parquet with fixed settings, so the same frame always gives the same bytes."""
    frame.write_parquet(path, compression="zstd", compression_level=3, statistics=True,
                        row_group_size=1_000_000)
    return path


class World:
    """Tables of a simulated sponsored-search world and its ground-truth API."""

    def __init__(self, config: SimConfig, intents: pl.DataFrame, keywords: pl.DataFrame, queries: pl.DataFrame,
                 intent_markets: pl.DataFrame) -> None:
        self.config = config
        self.intents = intents
        self.keywords = keywords
        self.queries = queries
        self.intent_markets = intent_markets
        self._derive()

    # ------------------------------------------------------------------ construction and persistence
    @classmethod
    def build(cls, config: SimConfig | str = "tiny", seed: int | None = None) -> World:
        """Generate the world of ``config`` (a SimConfig, or a scale name with ``seed``)."""
        from xc_core.simulate.intents import build_intents
        from xc_core.simulate.keywords import build_keywords
        from xc_core.simulate.queries import build_queries, intent_popularity
        from xc_core.simulate.vocabulary import load_vocabulary

        cfg = config if isinstance(config, SimConfig) else scale_config(config, seed=seed or 0)
        vocab = load_vocabulary()
        root = np.random.SeedSequence([cfg.seed, 0])
        rngs = [np.random.default_rng(s) for s in root.spawn(4)]
        intents = build_intents(vocab, cfg.intents, rngs[0])
        popularity = intent_popularity(intents, cfg, rngs[1])
        queries = build_queries(vocab, intents, popularity, cfg, rngs[2])
        keywords = build_keywords(vocab, intents, popularity, cfg, rngs[3])
        intent_markets = pl.DataFrame({
            "intent_id": np.tile(intents["intent_id"].to_numpy(), len(cfg.markets)),
            "market": np.repeat(np.array(cfg.market_names), len(intents)),
            "popularity": popularity.ravel(),
        })
        log.info("world built: %d intents, %d keywords, %d queries", len(intents), len(keywords), len(queries))
        return cls(cfg, intents, keywords, queries, intent_markets)

    def save(self, directory: str | Path) -> Path:
        """Write the tables as Parquet and the config as JSON; returns the directory."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        for name in TABLES:
            write_table(getattr(self, name), out / f"{name}.parquet")
        manifest = {"format_version": FORMAT_VERSION, "config": self.config.model_dump(mode="json"),
                    "counts": {name: len(getattr(self, name)) for name in TABLES}}
        (out / "world.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", "utf-8")
        return out

    @classmethod
    def load(cls, directory: str | Path) -> World:
        """Read a world written by :meth:`save` (no regeneration)."""
        src = Path(directory)
        manifest = json.loads((src / "world.json").read_text("utf-8"))
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{src}: world format {manifest.get('format_version')}, expected {FORMAT_VERSION}")
        tables = {name: pl.read_parquet(src / f"{name}.parquet") for name in TABLES}
        return cls(SimConfig(**manifest["config"]), **tables)

    # ------------------------------------------------------------------ derived arrays
    def _derive(self) -> None:
        """Integer-coded columns for vectorised ground truth and sampling."""
        cfg = self.config
        self._intent_ids: list[str] = self.intents["intent_id"].to_list()
        intent_pos = {v: i for i, v in enumerate(self._intent_ids)}
        self.intent_product = _codes(self.intents["product"])
        self.intent_category = _codes(self.intents["category"])
        markets = {m: i for i, m in enumerate(cfg.market_names)}
        names = sorted(set(self.keywords["brand"].drop_nulls()) | set(self.queries["brand"].drop_nulls()))
        places = sorted(set(self.keywords["location"].drop_nulls()) | set(self.queries["location"].drop_nulls()))
        brand_code = {b: i for i, b in enumerate(names)}
        place_code = {p: i for i, p in enumerate(places)}
        q, k = self.queries, self.keywords
        self.q_intent = _mapped(q["intent_id"], intent_pos)
        self.q_market = _mapped(q["market"], markets)
        self.q_brand = _mapped(q["brand"], brand_code)
        self.q_location = _mapped(q["location"], place_code)
        self.kw_intent = _mapped(k["intent_id"], intent_pos)
        self.kw_market = _mapped(k["market"], markets)
        self.kw_brand = _mapped(k["brand"], brand_code)
        self.kw_location = _mapped(k["location"], place_code)
        self.kw_bid = k["bid"].to_numpy()
        start = np.datetime64(cfg.start.date(), "D")
        self.kw_start_day = (k["start_date"].to_numpy().astype("datetime64[D]") - start).astype(np.int64)
        self._query_rows: dict[str, list[int]] = {}
        for i, text in enumerate(q["text"].to_list()):
            self._query_rows.setdefault(text, []).append(i)
        self._keyword_pos = {v: i for i, v in enumerate(k["keyword_id"].to_list())}
        self._intent_pos = intent_pos

    @cached_property
    def server(self) -> Bm25Server:
        """The control policy's index (built on first use: ground-truth users never pay for it)."""
        cfg = self.config
        return Bm25Server(self.keywords["text"].to_list(), self.kw_market, self.kw_bid, self.queries["text"].to_list(),
                          self.q_market, len(cfg.markets), cfg.bm25_k1, cfg.bm25_b, cfg.bm25_min_match)

    # ------------------------------------------------------------------ lookups
    def query_index(self, query: str, market: str | None = None) -> int:
        """Row of a world-generated query text; without ``market``, its busiest market."""
        rows = self._query_rows.get(query)
        if rows is None:
            raise KeyError(f"query '{query}' was not generated by this world")
        if market is not None:
            for r in rows:
                if self.config.market_names[self.q_market[r]] == market:
                    return r
            raise KeyError(f"query '{query}' does not occur in market {market}")
        traffic = self.queries["traffic"]
        return max(rows, key=lambda r: (traffic[r], -r))

    def query_indices(self, queries: Sequence[str], markets: Sequence[str] | None = None) -> np.ndarray:
        """Vectorised :meth:`query_index` (joins on text and market)."""
        probe = pl.DataFrame({"text": list(queries), "_order": np.arange(len(queries))})
        table = self.queries.select("text", "market", "traffic").with_row_index("_row")
        if markets is not None:
            probe = probe.with_columns(market=pl.Series(list(markets), dtype=pl.String))
            hit = probe.join(table, on=["text", "market"], how="left")
        else:
            best = table.sort(["traffic", "_row"], descending=[True, False]).unique("text", keep="first")
            hit = probe.join(best, on="text", how="left")
        rows = hit.sort("_order")["_row"]
        if rows.null_count():
            missing = hit.filter(pl.col("_row").is_null())["text"].head(3).to_list()
            raise KeyError(f"queries not generated by this world (market-specific?): {missing}")
        return rows.to_numpy().astype(np.int64)

    def keyword_index(self, keyword: str) -> int:
        try:
            return self._keyword_pos[keyword]
        except KeyError:
            raise KeyError(f"unknown keyword id '{keyword}'") from None

    def keyword_indices(self, keywords: Sequence[str]) -> np.ndarray:
        return np.array([self.keyword_index(k) for k in keywords], dtype=np.int64)

    # ------------------------------------------------------------------ ground truth (scalar)
    def query_intent(self, query: str) -> str:
        """The intent id a query text expresses (one per text by construction)."""
        return self._intent_ids[self.q_intent[self.query_index(query)]]

    def query_attributes(self, query: str, market: str | None = None) -> dict[str, object]:
        """The query's row: intent, kind (canonical/alias/partial_alias/typo), brand, location, decile..."""
        row = self.queries.row(self.query_index(query, market), named=True)
        row["markets"] = [self.config.market_names[self.q_market[r]] for r in self._query_rows[query]]
        return row

    def query_decile(self, query: str, market: str | None = None) -> int:
        """1 (head) .. 10 (tail): deciles of queries by frequency, each a tenth of all traffic."""
        return int(self.queries["decile"][self.query_index(query, market)])

    def query_market(self, query: str) -> str:
        """The market where the query is most frequent (``query_attributes`` lists all of them)."""
        return self.config.market_names[self.q_market[self.query_index(query)]]

    def keyword_attributes(self, keyword: str) -> dict[str, object]:
        """The keyword's row (text, intent, market, brand, location, bid, start date) plus its intent name."""
        row = self.keywords.row(self.keyword_index(keyword), named=True)
        row["intent_name"] = self.intents["name"][self._intent_pos[row["intent_id"]]]
        return row

    def intent(self, intent_id: str) -> dict[str, object]:
        """An intent's canonical terms, aliases, partial aliases and confusers."""
        return self.intents.row(self._intent_pos[intent_id], named=True)

    def relevance(self, query: str, keyword: str) -> int:
        return int(self.grades(np.array([self.query_index(query)]), np.array([self.keyword_index(keyword)]))[0])

    def click_probability(self, query: str, keyword: str, position: int) -> float:
        """P(click) if the keyword were shown to the query at ``position`` (1-based)."""
        q, k = np.array([self.query_index(query)]), np.array([self.keyword_index(keyword)])
        return float(self.click_probabilities(q, k, np.array([position]))[0])

    # ------------------------------------------------------------------ ground truth (vectorised)
    def grades(self, q_idx: np.ndarray, kw_idx: np.ndarray) -> np.ndarray:
        """Relevance grades 0-3 for aligned arrays of query rows and keyword rows."""
        qi, ki = self.q_intent[q_idx], self.kw_intent[kw_idx]
        level = np.where(qi == ki, 3, np.where(self.intent_product[qi] == self.intent_product[ki], 2,
                                               np.where(self.intent_category[qi] == self.intent_category[ki], 1, 0)))
        qb, kb, ql, kl = self.q_brand[q_idx], self.kw_brand[kw_idx], self.q_location[q_idx], self.kw_location[kw_idx]
        brand_conflict = (qb >= 0) & (kb >= 0) & (qb != kb)
        place_conflict = (ql >= 0) & (kl >= 0) & (ql != kl)
        return np.clip(level - brand_conflict - 2 * place_conflict, 0, 3).astype(np.int8)

    def relevance_many(self, queries: Sequence[str], keywords: Sequence[str]) -> np.ndarray:
        """Grades for aligned lists of query texts and keyword ids."""
        return self.grades(self.query_indices(queries), self.keyword_indices(keywords))

    def examination(self, positions: np.ndarray) -> np.ndarray:
        return np.asarray(positions, dtype=np.float64) ** -self.config.position_decay

    def click_probabilities(self, q_idx: np.ndarray, kw_idx: np.ndarray, positions: np.ndarray) -> np.ndarray:
        if np.any(np.asarray(positions) < 1):
            raise ValueError("positions are 1-based")
        attractiveness = np.asarray(self.config.attractiveness)
        return self.examination(positions) * attractiveness[self.grades(q_idx, kw_idx)]

    def relevant_keywords(self, query: str, min_grade: int = 1, market: str | None = None,
                          on: date | None = None) -> pl.DataFrame:
        """Keywords of the query's market with grade >= ``min_grade`` (started by ``on`` if given), best first."""
        q = self.query_index(query, market)
        members = np.flatnonzero(self.kw_market == self.q_market[q])
        if on is not None:
            members = members[self.kw_start_day[members] <= (on - self.config.start.date()).days]
        grade = self.grades(np.full(len(members), q), members)
        keep = grade >= min_grade
        return (self.keywords[members[keep]].with_columns(grade=pl.Series(grade[keep], dtype=pl.Int8))
                .sort(["grade", "keyword_id"], descending=[True, False]))


def _codes(column: pl.Series) -> np.ndarray:
    values = column.to_list()
    mapping = {v: i for i, v in enumerate(sorted(set(values)))}
    return np.array([mapping[v] for v in values], dtype=np.int32)


def _mapped(column: pl.Series, mapping: dict[str, int]) -> np.ndarray:
    """Integer codes of a string column; null -> -1."""
    return np.array([-1 if v is None else mapping[v] for v in column.to_list()], dtype=np.int32)
