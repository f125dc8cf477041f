"""The intent catalogue: products, optionally narrowed by a modifier ("cheap running shoes").

An intent carries canonical phrases, *aliases* that share no word with them (so lexical matching
cannot find them) and *confusers*: intents of other products sharing a surface word (so lexical
matching, and sometimes a pretrained encoder, finds the wrong thing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from xc_core.simulate.vocabulary import Product, Vocabulary, tokens

INTENT_SCHEMA: dict[str, pl.DataType] = {
    "intent_id": pl.String(),
    "name": pl.String(),
    "product": pl.String(),
    "category": pl.String(),
    "modifier": pl.String(),
    "local": pl.Boolean(),
    "cpc": pl.Float64(),
    "canonical_terms": pl.List(pl.String()),
    "aliases": pl.List(pl.String()),
    "regional_aliases": pl.List(pl.Struct({"market": pl.String(), "text": pl.String()})),
    "partial_aliases": pl.List(pl.String()),
    "confusers": pl.List(pl.String()),
}
_MAX_ALIASES = 6


@dataclass(frozen=True)
class _Spec:
    product: Product
    modifier: str | None


def build_intents(vocab: Vocabulary, n_intents: int, rng: np.random.Generator) -> pl.DataFrame:
    """Pick ``n_intents`` (product, modifier) pairs and describe each; ids follow vocabulary order."""
    specs = _choose(vocab, n_intents, rng)
    order = {p.name: i for i, p in enumerate(vocab.products)}
    specs.sort(key=lambda s: (order[s.product.name],
                              -1 if s.modifier is None else s.product.modifiers.index(s.modifier)))
    rows = [_describe(vocab, s, f"I{i:04d}") for i, s in enumerate(specs)]
    frame = pl.DataFrame(rows, schema={k: v for k, v in INTENT_SCHEMA.items() if k != "confusers"})
    return frame.with_columns(confusers=pl.Series(_confusers(specs, frame["intent_id"].to_list()),
                                                  dtype=pl.List(pl.String())))


def _choose(vocab: Vocabulary, n_intents: int, rng: np.random.Generator) -> list[_Spec]:
    """Products first (every product intent is also an intent), then modifier intents among them.

    Some curated confuser pairs are always taken, so even a tiny world has confusable intents.
    """
    products = list(vocab.products)
    n_products = min(len(products), max(2, round(n_intents / 2.5)))
    chosen: list[Product] = []
    pairs = [vocab.confusers[i] for i in rng.permutation(len(vocab.confusers))]
    for a, b in pairs[: max(1, n_products // 5)]:
        for name in (a, b):
            if vocab.product(name) not in chosen and len(chosen) < n_products:
                chosen.append(vocab.product(name))
    for i in rng.permutation(len(products)):
        if len(chosen) >= n_products:
            break
        if products[i] not in chosen:
            chosen.append(products[i])
    extra = [_Spec(p, m) for p in chosen for m in p.modifiers]
    take = rng.permutation(len(extra))[: max(0, n_intents - len(chosen))]
    return [_Spec(p, None) for p in chosen] + [extra[i] for i in sorted(take)]


def _describe(vocab: Vocabulary, spec: _Spec, intent_id: str) -> dict[str, object]:
    product, mod = spec.product, spec.modifier
    canonical = [product.name] if mod is None else [f"{mod} {product.name}", f"{product.name} {mod}"]
    banned = {w for phrase in canonical for w in tokens(phrase)}
    mod_aliases = vocab.modifiers[mod] if mod else ("",)
    aliases = _clean([f"{m} {a}".strip() for a in product.aliases for m in mod_aliases], banned)
    regional = [{"market": market, "text": text}
                for market, names in sorted(product.market_aliases.items())
                for text in _clean([f"{m} {a}".strip() for a in names for m in mod_aliases], banned)]
    partial: list[str] = []
    if mod:
        partial = [f"{mod} {a}" for a in product.aliases] + [f"{m} {product.name}" for m in vocab.modifiers[mod]]
    return {
        "intent_id": intent_id, "name": canonical[0], "product": product.name, "category": product.category,
        "modifier": mod, "local": product.local, "cpc": product.cpc, "canonical_terms": canonical,
        "aliases": aliases[:_MAX_ALIASES], "regional_aliases": regional, "partial_aliases": partial[:_MAX_ALIASES],
    }


def _clean(phrases: list[str], banned: set[str]) -> list[str]:
    """Drop phrases sharing a word with the canonical terms (the alias guarantee), keep order, dedupe."""
    seen: list[str] = []
    for phrase in phrases:
        if phrase not in seen and not set(tokens(phrase)) & banned:
            seen.append(phrase)
    return seen


def _confusers(specs: list[_Spec], ids: list[str]) -> list[list[str]]:
    """Intents of *other* products whose product words (canonical or alias) overlap."""
    surface = [s.product.surface_tokens() for s in specs]
    out: list[list[str]] = []
    for i, spec in enumerate(specs):
        out.append([ids[j] for j, other in enumerate(specs)
                    if other.product.name != spec.product.name and surface[i] & surface[j]])
    return out
