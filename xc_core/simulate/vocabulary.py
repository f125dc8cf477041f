"""The curated vocabulary shipped with the package, loaded into typed records and checked.

Every word the simulator emits comes from ``vocabulary/vocabulary.json``: real English product and
service names, aliases that share no word with them, advertiser brands and the places of each market.
The checks here are what make the alias and confuser properties true by construction.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

_TOKEN = re.compile(r"[a-z0-9]+")
#: Words too common to make two products confusable.
STOP_WORDS = frozenset({"a", "an", "and", "the", "of", "for", "to", "in", "on", "me"})


def tokens(text: str) -> list[str]:
    """Lower-case alphanumeric words: the one tokenisation used by serving, checks and tests."""
    return _TOKEN.findall(text.lower())


@dataclass(frozen=True)
class Product:
    """A product or service; intents are products, optionally narrowed by a modifier."""

    name: str
    category: str
    aliases: tuple[str, ...]
    market_aliases: dict[str, tuple[str, ...]]
    local: bool
    modifiers: tuple[str, ...]
    cpc: float

    def surface_tokens(self) -> set[str]:
        """All words that can stand for this product (canonical, aliases, regional aliases)."""
        words = set(tokens(self.name))
        for alias in (*self.aliases, *(a for v in self.market_aliases.values() for a in v)):
            words.update(tokens(alias))
        return words - STOP_WORDS


@dataclass(frozen=True)
class Vocabulary:
    """The whole curated vocabulary."""

    products: tuple[Product, ...]
    categories: tuple[str, ...]
    brands: dict[str, tuple[str, ...]]
    modifiers: dict[str, tuple[str, ...]]
    prefixes: tuple[str, ...]
    suffixes: tuple[str, ...]
    local_suffixes: tuple[str, ...]
    ad_prefixes: tuple[str, ...]
    ad_suffixes: tuple[str, ...]
    confusers: tuple[tuple[str, str], ...]
    locations: dict[str, tuple[str, ...]]
    _by_name: dict[str, Product] = field(default_factory=dict, repr=False, compare=False)

    def product(self, name: str) -> Product:
        if not self._by_name:
            self._by_name.update({p.name: p for p in self.products})
        return self._by_name[name]

    def word_count(self) -> int:
        """Distinct words in the vocabulary (the issue asks for a few hundred)."""
        words: set[str] = set()
        for product in self.products:
            words |= product.surface_tokens()
        for group in (*self.brands.values(), *self.modifiers.values(), *self.locations.values()):
            for text in group:
                words.update(tokens(text))
        words.update(w for m in self.modifiers for w in tokens(m))
        return len(words)


def _parse(raw: dict) -> Vocabulary:
    products: list[Product] = []
    brands: dict[str, tuple[str, ...]] = {}
    for cat in raw["categories"]:
        brands[cat["name"]] = tuple(cat["brands"])
        for item in cat["products"]:
            products.append(Product(
                name=item["name"], category=cat["name"], aliases=tuple(item["aliases"]),
                market_aliases={m: tuple(v) for m, v in item.get("market_aliases", {}).items()},
                local=bool(item.get("local", cat["local"])),
                modifiers=tuple(item.get("modifiers", cat["modifiers"])), cpc=float(cat["cpc"]),
            ))
    ref = raw["refinements"]
    return Vocabulary(
        products=tuple(products), categories=tuple(c["name"] for c in raw["categories"]), brands=brands,
        modifiers={k: tuple(v) for k, v in raw["modifiers"].items()},
        prefixes=tuple(ref["prefix"]), suffixes=tuple(ref["suffix"]), local_suffixes=tuple(ref["local_suffix"]),
        ad_prefixes=tuple(raw["ad_words"]["prefix"]), ad_suffixes=tuple(raw["ad_words"]["suffix"]),
        confusers=tuple((a, b) for a, b in raw["confusers"]),
        locations={m: tuple(v) for m, v in raw["markets"].items()},
    )


@lru_cache(maxsize=4)
def load_vocabulary(path: str | None = None) -> Vocabulary:
    """The shipped vocabulary (or another file of the same shape), validated."""
    if path is None:
        text = resources.files("xc_core.simulate").joinpath("vocabulary/vocabulary.json").read_text("utf-8")
    else:
        text = Path(path).read_text("utf-8")
    vocab = _parse(json.loads(text))
    problems = vocabulary_problems(vocab)
    if problems:
        raise ValueError("invalid simulator vocabulary: " + "; ".join(problems[:10]))
    return vocab


def vocabulary_problems(vocab: Vocabulary) -> list[str]:
    """Everything that would break a simulator guarantee; empty for a usable vocabulary."""
    problems: list[str] = []
    canonical: set[str] = set()
    for product in vocab.products:
        canonical.update(tokens(product.name))
    for words in vocab.modifiers:
        canonical.update(tokens(words))
    problems += _alias_problems(vocab)
    for cat, names in vocab.brands.items():
        problems += [f"brand '{b}' ({cat}) uses a canonical word" for b in names if set(tokens(b)) & canonical]
    for market, places in vocab.locations.items():
        problems += [f"location '{p}' ({market}) uses a canonical word" for p in places if set(tokens(p)) & canonical]
    by_name = {p.name: p for p in vocab.products}
    for a, b in vocab.confusers:
        if a not in by_name or b not in by_name:
            problems.append(f"confuser pair ({a}, {b}) names an unknown product")
        elif not by_name[a].surface_tokens() & by_name[b].surface_tokens():
            problems.append(f"confuser pair ({a}, {b}) shares no word")
    if len(by_name) != len(vocab.products):
        problems.append("duplicate product names")
    return problems


def _alias_problems(vocab: Vocabulary) -> list[str]:
    """Aliases must share no word with their product's name, modifier aliases none with the modifier."""
    problems: list[str] = []
    for product in vocab.products:
        name = set(tokens(product.name))
        for alias in (*product.aliases, *(a for v in product.market_aliases.values() for a in v)):
            if set(tokens(alias)) & name:
                problems.append(f"alias '{alias}' shares a word with '{product.name}'")
        problems += [f"product '{product.name}' has unknown modifier '{m}'"
                     for m in product.modifiers if m not in vocab.modifiers]
        if not product.aliases:
            problems.append(f"product '{product.name}' has no alias")
    for modifier, aliases in vocab.modifiers.items():
        problems += [f"modifier alias '{a}' shares a word with '{modifier}'"
                     for a in aliases if set(tokens(a)) & set(tokens(modifier))]
    return problems
