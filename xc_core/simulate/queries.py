"""Queries: how each market's users phrase each intent, and how often.

Every (market, intent) gets a set of phrasings (canonical words, aliases, partial aliases, typos,
brand, place and refinement words); their frequencies are Zipf-like within the intent, and intents
are Zipf-like within the market, so the whole query table has a head, a torso and a long tail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from xc_core.simulate.config import MarketConfig, SimConfig
from xc_core.simulate.vocabulary import Vocabulary, tokens

QUERY_SCHEMA: dict[str, pl.DataType] = {
    "query_id": pl.String(),
    "market": pl.String(),
    "text": pl.String(),
    "intent_id": pl.String(),
    "kind": pl.String(),  # canonical | alias | partial_alias | typo
    "brand": pl.String(),
    "location": pl.String(),
    "refinement": pl.String(),
    "weight": pl.Float64(),  # P(query | market) for a session's first query
    "traffic": pl.Float64(),  # expected share of all query events (first queries and reformulations)
    "decile": pl.Int8(),  # 1 = head ... 10 = tail; each decile holds a tenth of the traffic
    "segment": pl.String(),  # head (deciles 1-3) | torso (4-7) | tail (8-10)
}
_KIND_WEIGHT = {"canonical": 1.0, "alias": 0.6, "partial_alias": 0.45, "typo": 0.15}
_QWERTY = {c: n for c, n in zip("qwertyuiopasdfghjklzxcvbnm",
                                ["wa", "qes", "wrd", "etf", "ryg", "tuh", "yij", "uok", "ipl", "ol", "qsz", "awdx",
                                 "sefc", "drgv", "fthb", "gyjn", "hukm", "jil", "kol", "asx", "zsdc", "xdfv",
                                 "cfgb", "vghn", "bhjm", "njk"], strict=True)}


@dataclass
class _Variant:
    text: str
    kind: str
    brand: str | None
    location: str | None
    refinement: str | None


def intent_popularity(intents: pl.DataFrame, cfg: SimConfig, rng: np.random.Generator) -> np.ndarray:
    """P(intent | market), shape (markets, intents): one global Zipf ranking, perturbed per market.

    Each market also weights categories differently (a Dirichlet draw), which is most of what makes
    the markets' vocabulary mixes differ.
    """
    n = len(intents)
    base = -cfg.intent_zipf * np.log(rng.permutation(n) + 1.0)
    _, codes = np.unique(intents["category"].to_numpy(), return_inverse=True)
    rows = []
    for _ in cfg.markets:
        cat_w = rng.dirichlet(np.full(codes.max() + 1, 4.0)) * (codes.max() + 1)
        logp = base + rng.normal(0.0, 0.6, n) + np.log(cat_w[codes])
        p = np.exp(logp - logp.max())
        rows.append(p / p.sum())
    return np.vstack(rows)


def build_queries(vocab: Vocabulary, intents: pl.DataFrame, popularity: np.ndarray, cfg: SimConfig,
                  rng: np.random.Generator) -> pl.DataFrame:
    """All (market, query text) rows with their intent, attributes, frequency, decile and segment.

    A text means one intent everywhere (a text another intent already produced is skipped), so the
    ground truth can be asked by text alone.
    """
    owner: dict[str, int] = {}
    records: list[dict[str, object]] = []
    cells = popularity ** 0.35
    n_var = np.maximum(2, np.rint(cfg.queries * cells / cells.sum()).astype(int))
    intent_rows = intents.to_dicts()
    for m, market in enumerate(cfg.markets):
        for i, intent in enumerate(intent_rows):
            book = _Phrasebook.of(vocab, intent, market)
            variants = _variants(book, int(n_var[m, i]), owner, i, rng)
            weights = _variant_weights(variants, cfg.variant_zipf, rng) * popularity[m, i]
            records += [{"market": market.name, "text": v.text, "intent_id": intent["intent_id"], "kind": v.kind,
                         "brand": v.brand, "location": v.location, "refinement": v.refinement,
                         "weight": float(w)} for v, w in zip(variants, weights, strict=True)]
    frame = pl.DataFrame(records, schema={k: v for k, v in QUERY_SCHEMA.items()
                                          if k not in ("query_id", "traffic", "decile", "segment")})
    return _with_deciles(_with_traffic(frame, cfg))


def _with_traffic(frame: pl.DataFrame, cfg: SimConfig) -> pl.DataFrame:
    """Expected share of query events, as the session model draws them.

    A query event is a session's first query (share f = 1 / mean session length) or a later one;
    a later one is off-intent (drawn like a first query) with probability u, else a reformulation of
    the session intent drawn with flattened weights. So per market
    traffic = f w + (1 - f) (u w + (1 - u) P(intent) rw), rw = w^g / sum of w^g over the intent's phrasings.
    """
    f, u, g = 1.0 / cfg.mean_session_length, cfg.unrelated_rate, cfg.reformulation_flattening
    shares = {m.name: m.traffic_share / sum(x.traffic_share for x in cfg.markets) for m in cfg.markets}
    group = ["market", "intent_id"]
    rw = pl.col("weight") ** g / (pl.col("weight") ** g).sum().over(group)
    per_market = (f + (1 - f) * u) * pl.col("weight") + (1 - f) * (1 - u) * pl.col("weight").sum().over(group) * rw
    return frame.with_columns(traffic=per_market * pl.col("market").replace_strict(shares, return_dtype=pl.Float64))


@dataclass(frozen=True)
class _Phrasebook:
    """The words one market may use for one intent, prepared once for many draws."""

    intent_id: str
    market: MarketConfig
    canonical: tuple[str, ...]
    aliases: tuple[str, ...]
    regional: tuple[str, ...]
    partial: tuple[str, ...]
    banned: frozenset[str]  # canonical words: an alias query may not contain any
    brands: tuple[str, ...]
    places: tuple[str, ...]  # empty for intents that are not local
    refinements: tuple[str, ...]
    local_refinements: tuple[str, ...]
    prefixes: frozenset[str]

    @classmethod
    def of(cls, vocab: Vocabulary, intent: dict, market: MarketConfig) -> _Phrasebook:
        canonical = tuple(intent["canonical_terms"])
        refinements = (*vocab.prefixes, *vocab.suffixes)
        return cls(
            intent_id=intent["intent_id"], market=market, canonical=canonical, aliases=tuple(intent["aliases"]),
            regional=tuple(r["text"] for r in intent["regional_aliases"] if r["market"] == market.name),
            partial=tuple(intent["partial_aliases"]), banned=frozenset(w for c in canonical for w in tokens(c)),
            brands=vocab.brands[intent["category"]],
            places=vocab.locations[market.name] if intent["local"] else (),
            refinements=refinements,
            local_refinements=(*refinements, *vocab.local_suffixes) if intent["local"] else refinements,
            prefixes=frozenset(vocab.prefixes))

    def allowed(self, words: str | None, kind: str) -> str | None:
        """Extra words are dropped from an alias query when they repeat a canonical word."""
        if words is None or kind != "alias" or not set(tokens(words)) & self.banned:
            return words
        return None


def _with_deciles(frame: pl.DataFrame) -> pl.DataFrame:
    """Deciles of queries by frequency: sorted by traffic, each decile a tenth of the total traffic."""
    traffic = frame["traffic"].to_numpy()
    order = np.lexsort((np.arange(len(traffic)), -traffic))
    before = np.cumsum(traffic[order]) - traffic[order]
    decile = np.empty(len(traffic), dtype=np.int8)
    decile[order] = np.minimum(10, np.floor(before / traffic.sum() * 10).astype(np.int8) + 1)
    segment = np.where(decile <= 3, "head", np.where(decile <= 7, "torso", "tail"))
    ids = [f"Q{i:07d}" for i in range(len(frame))]
    return frame.with_columns(query_id=pl.Series(ids), decile=pl.Series(decile, dtype=pl.Int8),
                              segment=pl.Series(segment)).select(list(QUERY_SCHEMA))


def _variant_weights(variants: list[_Variant], zipf: float, rng: np.random.Generator) -> np.ndarray:
    """P(phrasing | market, intent): Zipf over a noisy rank; the first (canonical) phrasing ranks first."""
    score = np.array([_KIND_WEIGHT[v.kind] * (0.5 if v.brand else 1) * (0.6 if v.location else 1)
                      * (0.5 if v.refinement else 1) for v in variants])
    score = score * rng.lognormal(0.0, 0.5, len(variants))
    score[0] = np.inf
    rank = np.empty(len(variants))
    rank[np.lexsort((np.arange(len(variants)), -score))] = np.arange(1, len(variants) + 1)
    w = rank ** -zipf
    return w / w.sum()


def _variants(book: _Phrasebook, n: int, owner: dict[str, int], intent_idx: int,
              rng: np.random.Generator) -> list[_Variant]:
    """Up to ``n`` distinct phrasings; the canonical phrase always comes first.

    Gives up after ``2n + 8`` rejected draws: small intents run out of distinct phrasings.
    """
    first = book.canonical[0]
    out: list[_Variant] = []
    seen: set[str] = set()
    if owner.setdefault(first, intent_idx) == intent_idx:
        out.append(_Variant(first, "canonical", None, None, None))
        seen.add(first)
    rejected, budget = 0, 2 * n + 8
    for u in rng.random((4 * n + 8, 12)).tolist():
        if len(out) >= n or rejected > budget:
            break
        v = _variant(book, u)
        if v is None or v.text in seen or owner.setdefault(v.text, intent_idx) != intent_idx:
            rejected += 1
            continue
        seen.add(v.text)
        out.append(v)
    if not out:  # every phrasing taken by another intent: keep a unique, explicit one
        out.append(_Variant(f"{first} {book.intent_id.lower()}", "canonical", None, None, None))
    return out


def _pick(options: tuple[str, ...], u: float) -> str:
    return options[min(len(options) - 1, int(u * len(options)))]


def _variant(book: _Phrasebook, u: list[float]) -> _Variant | None:
    """One phrasing from 12 uniforms: base words, then optional brand, place, refinement, typo."""
    market = book.market
    aliases = book.regional if book.regional and u[1] < 0.6 else book.aliases
    if u[0] < market.alias_rate and aliases:
        kind, base = "alias", _pick(aliases, u[1] * 7 % 1)
    elif u[0] < market.alias_rate + market.partial_alias_rate and book.partial:
        kind, base = "partial_alias", _pick(book.partial, u[1])
    else:
        kind, base = "canonical", book.canonical[0] if u[1] < 0.75 or len(book.canonical) == 1 else book.canonical[1]
    brand = _pick(book.brands, u[3]) if u[2] < market.brand_rate else None
    place = _pick(book.places, u[5]) if book.places and u[4] < market.location_rate else None
    refinement = None
    if u[6] < market.refine_rate:
        refinement = _pick(book.local_refinements if place is None else book.refinements, u[7])
    brand, place, refinement = (book.allowed(x, kind) for x in (brand, place, refinement))
    if kind == "canonical" and u[8] < market.typo_rate:
        typo = _typo(base, u[9], u[10])
        if typo is None:
            return None
        base = typo
        kind = "typo"
    words = [base]
    if brand:
        words.insert(0, brand)
    if refinement:
        words = [refinement, *words] if refinement in book.prefixes else [*words, refinement]
    if place:
        words = [*words, place] if u[11] < 0.6 else [place, *words]
    return _Variant(" ".join(words), kind, brand, place, refinement)


def _typo(text: str, u_word: float, u_op: float) -> str | None:
    """A single-character slip (drop, swap, double, neighbouring key) in one word of 4+ letters."""
    words = text.split()
    long = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
    if not long:
        return None
    i = long[min(len(long) - 1, int(u_word * len(long)))]
    w = words[i]
    op, frac = int(u_op * 4), u_op * 4 % 1
    pos = 1 + min(len(w) - 3, int(frac * (len(w) - 2)))  # keep the first letter, as people do
    if op == 0:
        new = w[:pos] + w[pos + 1:]
    elif op == 1:
        new = w[:pos] + w[pos + 1] + w[pos] + w[pos + 2:]
    elif op == 2:
        new = w[:pos] + w[pos] + w[pos:]
    else:
        near = _QWERTY.get(w[pos], "")
        new = w[:pos] + (near[int(frac * 97) % len(near)] if near else w[pos]) + w[pos + 1:]
    if new == w:
        return None
    words[i] = new
    return " ".join(words)
