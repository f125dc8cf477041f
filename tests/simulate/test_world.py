"""The world's catalogue and ground truth: aliases, confusers, relevance grades, lookups, persistence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from xc_core.simulate import World, load_vocabulary, scale_config, tokens
from xc_core.simulate.vocabulary import vocabulary_problems


def _canonical_words(world: World) -> dict[str, set[str]]:
    return {i: {w for t in terms for w in tokens(t)}
            for i, terms in world.intents.select("intent_id", "canonical_terms").iter_rows()}


def test_alias_queries_share_no_word_with_their_intents_canonical_terms(tiny_world: World) -> None:
    canonical = _canonical_words(tiny_world)
    aliases = tiny_world.queries.filter(pl.col("kind") == "alias")
    assert aliases.height > 0.1 * tiny_world.queries.height
    for text, intent in aliases.select("text", "intent_id").iter_rows():
        assert not set(tokens(text)) & canonical[intent], (text, intent)
    for intent, names in tiny_world.intents.select("intent_id", "aliases").iter_rows():
        assert names and all(not set(tokens(a)) & canonical[intent] for a in names)


def test_alias_queries_in_the_logs_share_no_word_with_canonical_terms(tiny_world: World,
                                                                       tiny_events: pl.DataFrame) -> None:
    canonical = _canonical_words(tiny_world)
    texts = tiny_events.select(pl.col("query_text").alias("text"), "market").unique()
    logged = texts.join(tiny_world.queries, on=["text", "market"]).filter(pl.col("kind") == "alias")
    assert logged.height > 0
    assert all(not set(tokens(t)) & canonical[i] for t, i in logged.select("text", "intent_id").iter_rows())


def test_confusers_share_a_surface_word_but_are_other_products(tiny_world: World) -> None:
    vocab = load_vocabulary()
    product = dict(tiny_world.intents.select("intent_id", "product").iter_rows())
    with_confusers = tiny_world.intents.filter(pl.col("confusers").list.len() > 0)
    assert with_confusers.height >= 4
    for intent, confusers in with_confusers.select("intent_id", "confusers").iter_rows():
        words = vocab.product(product[intent]).surface_tokens()
        for other in confusers:
            assert product[other] != product[intent]
            assert words & vocab.product(product[other]).surface_tokens()


def test_shipped_vocabulary_is_valid_and_a_few_hundred_words() -> None:
    vocab = load_vocabulary()
    assert vocabulary_problems(vocab) == []
    assert vocab.word_count() >= 300
    assert set(vocab.locations) >= {"MC-1", "MC-2", "MC-3", "MC-4"}


def test_relevance_grades_follow_intent_brand_and_location(tiny_world: World) -> None:
    """Recompute every grade of 20k random pairs from the table attributes alone."""
    rng = np.random.default_rng(7)
    q = rng.integers(0, tiny_world.queries.height, 20_000)
    k = rng.integers(0, tiny_world.keywords.height, 20_000)
    intents = tiny_world.intents.select("intent_id", "product", "category")
    qa = tiny_world.queries[q].select("intent_id", "brand", "location").join(intents, on="intent_id", how="left",
                                                                            maintain_order="left")
    ka = tiny_world.keywords[k].select("intent_id", "brand", "location").join(intents, on="intent_id", how="left",
                                                                             maintain_order="left")
    grades = tiny_world.grades(q, k)
    for (qi, qb, ql, qp, qc), (ki, kb, kl, kp, kc), g in zip(qa.iter_rows(), ka.iter_rows(), grades, strict=True):
        level = 3 if qi == ki else 2 if qp == kp else 1 if qc == kc else 0
        level -= int(qb is not None and kb is not None and qb != kb)
        level -= 2 * int(ql is not None and kl is not None and ql != kl)
        assert g == max(0, level)
    assert set(np.unique(grades)) == {0, 1, 2, 3}


def test_same_intent_without_conflicts_is_grade_3_and_a_rival_brand_lowers_it(tiny_world: World) -> None:
    q = tiny_world.queries.filter(pl.col("brand").is_not_null() & pl.col("location").is_null()).row(0, named=True)
    same = tiny_world.keywords.filter((pl.col("intent_id") == q["intent_id"]) & pl.col("location").is_null())
    for kw, brand in same.select("keyword_id", "brand").iter_rows():
        expected = 3 if brand in (None, q["brand"]) else 2
        assert tiny_world.relevance(q["text"], kw) == expected


def test_click_probability_is_examination_times_attractiveness(tiny_world: World) -> None:
    cfg = tiny_world.config
    text = tiny_world.queries["text"][0]
    for kw in tiny_world.keywords["keyword_id"].head(50):
        grade = tiny_world.relevance(text, kw)
        probs = [tiny_world.click_probability(text, kw, pos) for pos in range(1, 6)]
        assert probs == pytest.approx([cfg.attractiveness[grade] * pos ** -cfg.position_decay for pos in range(1, 6)])
        assert all(a > b for a, b in zip(probs, probs[1:], strict=False))


def test_ground_truth_answers_pairs_the_logs_never_showed(tiny_world: World, tiny_events: pl.DataFrame) -> None:
    shown = set(tiny_events.drop_nulls("item_id").select("query_text", "item_id").iter_rows())
    unshown = next((t, k) for t in tiny_world.queries["text"] for k in tiny_world.keywords["keyword_id"]
                   if (t, k) not in shown)
    assert tiny_world.relevance(*unshown) in (0, 1, 2, 3)
    assert 0.0 < tiny_world.click_probability(*unshown, position=3) < 1.0
    with pytest.raises(KeyError):
        tiny_world.query_intent("a query this world never generated")
    with pytest.raises(KeyError):
        tiny_world.keyword_attributes("K9999999")


def test_query_lookups_return_intent_decile_market_and_attributes(tiny_world: World) -> None:
    row = tiny_world.queries.row(3, named=True)
    assert tiny_world.query_intent(row["text"]) == row["intent_id"]
    assert tiny_world.query_decile(row["text"], row["market"]) == row["decile"]
    attrs = tiny_world.query_attributes(row["text"], row["market"])
    assert attrs["kind"] == row["kind"] and row["market"] in attrs["markets"]
    assert tiny_world.query_market(row["text"]) in attrs["markets"]
    kw = tiny_world.keyword_attributes(tiny_world.keywords["keyword_id"][0])
    assert {"text", "intent_id", "brand", "location", "market", "bid", "start_date", "intent_name"} <= set(kw)
    batch = tiny_world.relevance_many(tiny_world.queries["text"].head(5).to_list(),
                                      tiny_world.keywords["keyword_id"].head(5).to_list())
    assert batch.tolist() == [tiny_world.relevance(t, k) for t, k in
                              zip(tiny_world.queries["text"].head(5), tiny_world.keywords["keyword_id"].head(5),
                                  strict=True)]


def test_every_query_text_means_one_intent(tiny_world: World) -> None:
    per_text = tiny_world.queries.group_by("text").agg(pl.col("intent_id").n_unique())
    assert per_text["intent_id"].max() == 1


def test_deciles_split_query_traffic_into_tenths_from_head_to_tail(tiny_world: World,
                                                                  tiny_events: pl.DataFrame) -> None:
    events = tiny_events.select("ts", "user_id", "market", "query_text").unique()
    deciles = events.join(tiny_world.queries.select(pl.col("text").alias("query_text"), "market", "decile"),
                          on=["query_text", "market"]).group_by("decile").len().sort("decile")
    share = deciles["len"].to_numpy() / events.height
    assert len(share) == 10 and np.all(np.abs(share - 0.1) < 0.04), share
    distinct = tiny_world.queries.group_by("decile").len().sort("decile")["len"].to_numpy()
    assert distinct[0] * 10 < distinct[-1], "head deciles hold few frequent queries, tail deciles many rare ones"


def test_keywords_have_all_fields_and_unique_text_per_market(tiny_world: World) -> None:
    kw = tiny_world.keywords
    required = kw.select("keyword_id", "text", "intent_id", "market", "bid", "start_date")
    assert required.null_count().sum_horizontal()[0] == 0
    assert kw["keyword_id"].n_unique() == kw.height and kw.select("market", "text").is_unique().all()
    assert kw["bid"].min() > 0
    assert 0 < kw["brand"].null_count() < kw.height and 0 < kw["location"].null_count() < kw.height


def test_world_saves_and_loads_as_parquet_and_json(tiny_world: World, tmp_path: Path) -> None:
    out = tiny_world.save(tmp_path / "w")
    assert {p.name for p in out.iterdir()} == {"world.json", "intents.parquet", "keywords.parquet",
                                               "queries.parquet", "intent_markets.parquet"}
    back = World.load(out)
    assert back.config == tiny_world.config
    for name in ("intents", "keywords", "queries", "intent_markets"):
        assert getattr(back, name).equals(getattr(tiny_world, name))


def test_world_build_is_a_function_of_the_seed() -> None:
    a, b, c = (World.build(scale_config("tiny", seed=s)) for s in (3, 3, 4))
    assert a.keywords.equals(b.keywords) and a.queries.equals(b.queries)
    assert not a.keywords.equals(c.keywords)
