"""The day files: canonical schema, serving rules, novel keywords, sessions, calendar and markets."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import numpy as np
import polars as pl

from xc_core.logs.schema import INPUT_SCHEMA
from xc_core.simulate import WINDOW_END, WINDOW_START, SimulationSummary, World, scale_config
from xc_core.simulate.vocabulary import tokens

QUERY_EVENT = ["ts", "user_id", "market", "query_text"]


def test_every_day_file_has_exactly_the_input_schema(tiny_run: SimulationSummary) -> None:
    assert len(tiny_run.files) == 7
    for path in tiny_run.files:
        frame = pl.read_parquet(path)
        assert dict(frame.schema) == INPUT_SCHEMA
        assert frame.height > 0


def test_one_file_per_day_and_every_event_inside_its_day(tiny_run: SimulationSummary) -> None:
    cfg = scale_config("tiny")
    for day, path in enumerate(tiny_run.files):
        assert path.name == f"events-{cfg.day_date(day).isoformat()}.parquet"
        ts = pl.read_parquet(path, columns=["ts"])["ts"]
        start = cfg.start + timedelta(days=day)
        assert ts.min() >= start and ts.max() < start + timedelta(days=1)


def test_shown_rows_have_positions_one_to_k_and_empty_events_one_null_row(tiny_events: pl.DataFrame) -> None:
    shown = tiny_events.filter(pl.col("impressed"))
    assert shown["item_id"].null_count() == 0 and shown["bid"].null_count() == 0
    per_event = shown.group_by(QUERY_EVENT).agg(pos=pl.col("position").sort(), n=pl.len())
    assert all(p == list(range(1, n + 1)) for p, n in per_event.select("pos", "n").iter_rows())
    assert per_event["n"].max() <= 5
    empty = tiny_events.filter(~pl.col("impressed"))
    assert empty.height > 0, "some query events must show no ad (aliases, typos)"
    assert empty["item_id"].null_count() == empty.height and empty["position"].null_count() == empty.height
    assert not empty["clicked"].any()
    assert empty.group_by(QUERY_EVENT).len()["len"].max() == 1
    mixed = empty.join(shown, on=QUERY_EVENT, how="semi")
    assert mixed.height == 0, "an event with ads has no empty row"


def test_served_ads_are_the_bm25_top_k_among_started_keywords_of_the_market(tiny_world: World,
                                                                           tiny_events: pl.DataFrame) -> None:
    """Brute force: score every keyword of the market, drop unstarted ones and those below the floor."""
    cfg, server = tiny_world.config, tiny_world.server
    sample = tiny_events.select(*QUERY_EVENT, "item_id", "position").with_columns(day=pl.col("ts").dt.date())
    events = sample.group_by(QUERY_EVENT + ["day"]).agg(pl.col("item_id").sort_by("position")).sort("ts").head(300)
    for _, _, market, text, day, shown in events.iter_rows():
        q = tiny_world.query_index(text, market)
        m = cfg.market_names.index(market)
        members = server.market_keywords(m)
        scores = server.scores(np.array([q]), m).toarray().ravel()
        floor = cfg.bm25_min_match * server.query_mass(np.array([q]), m)[0]
        started = tiny_world.kw_start_day[members] <= (day - cfg.start.date()).days
        ok = (scores > 0) & (scores >= floor) & started
        order = np.lexsort((np.arange(len(members)), -np.round(scores * 1e5)))
        expected = [tiny_world.keywords["keyword_id"][int(members[i])] for i in order if ok[i]][: cfg.ads_per_query]
        assert [s for s in shown if s is not None] == expected, text


def test_novel_keywords_are_never_shown_before_their_start_date(tiny_world: World, tiny_events: pl.DataFrame) -> None:
    starts = tiny_world.keywords.select(pl.col("keyword_id").alias("item_id"), "start_date")
    shown = tiny_events.filter(pl.col("impressed")).join(starts, on="item_id")
    assert shown.filter(pl.col("ts").dt.date() < pl.col("start_date")).height == 0
    cfg = tiny_world.config
    novel_start = cfg.start.date() + timedelta(days=cfg.train_days)
    novel = starts.filter(pl.col("start_date") >= novel_start)
    assert 0.08 <= novel.height / starts.height <= 0.12
    assert shown.filter(pl.col("start_date") >= novel_start).height > 0, "novel keywords do get served later"
    clicks = tiny_events.filter("clicked").group_by("item_id").len()
    counts = novel.join(clicks, on="item_id", how="left")["len"].fill_null(0)
    assert (counts == 0).any() and (counts == 1).any(), "zero-shot and one-shot keywords exist"


def test_sessions_are_seconds_to_minutes_apart_and_users_sessions_more_than_30_minutes(
        tiny_run: SimulationSummary, tiny_world: World, tiny_events: pl.DataFrame) -> None:
    """Sessionising as ingestion does (30-minute gap) recovers exactly the generated sessions."""
    events = tiny_events.select(QUERY_EVENT).unique().sort("user_id", "ts")
    gap = (pl.col("ts") - pl.col("ts").shift(1)).over("user_id")
    events = events.with_columns(gap=gap).with_columns(
        new=pl.col("gap").is_null() | (pl.col("gap") > timedelta(minutes=30)))
    assert events.filter(pl.col("new")).height == tiny_run.sessions
    within = events.filter(~pl.col("new"))["gap"]
    assert within.min() >= timedelta(seconds=2) and within.max() <= timedelta(minutes=20)
    intent = tiny_world.queries.select(pl.col("text").alias("query_text"), "market", "intent_id")
    pairs = events.join(intent, on=["query_text", "market"], how="left").with_columns(
        same=pl.col("intent_id") == pl.col("intent_id").shift(1).over("user_id")).filter(~pl.col("new"))
    same = cast(float, pairs["same"].mean())  # the mean of a boolean column
    assert 0.75 < same < 1.0, f"co-session queries share the intent, with noise (got {same})"


def test_four_markets_differ_in_traffic_and_vocabulary_mix(tiny_world: World, tiny_events: pl.DataFrame) -> None:
    kinds = tiny_world.queries.select(pl.col("text").alias("query_text"), "market", "kind")
    events = tiny_events.select(QUERY_EVENT).unique().join(kinds, on=["query_text", "market"])
    by_market = events.group_by("market").agg(n=pl.len(), alias=(pl.col("kind") == "alias").mean()).sort("market")
    assert by_market["market"].to_list() == ["MC-1", "MC-2", "MC-3", "MC-4"]
    n = by_market["n"].to_numpy()
    assert n[0] > n[1] > n[3], "traffic differs by market"
    assert by_market["alias"].max() - by_market["alias"].min() > 0.03, "alias use differs by market"
    places = tiny_world.queries.drop_nulls("location").group_by("market").agg(pl.col("location").unique())
    sets = {m: set(p) for m, p in places.iter_rows()}
    assert all(not (sets[a] & sets[b]) for a in sets for b in sets if a < b), "each market has its own places"


def test_every_scale_stays_inside_the_aol_window() -> None:
    for scale in ("tiny", "demo", "large"):
        cfg = scale_config(scale)
        assert WINDOW_START <= cfg.start and cfg.end <= WINDOW_END, scale


def test_query_texts_are_built_from_vocabulary_words(tiny_world: World, tiny_events: pl.DataFrame) -> None:
    """Every query word is a vocabulary word or a one-letter slip of one (typos)."""
    from xc_core.simulate import load_vocabulary

    vocab = load_vocabulary()
    known = {w for p in vocab.products for w in p.surface_tokens()} | {w for m in vocab.modifiers for w in tokens(m)}
    for group in (*vocab.modifiers.values(), *vocab.brands.values(), *vocab.locations.values(),
                  vocab.prefixes, vocab.suffixes, vocab.local_suffixes):
        known |= {w for text in group for w in tokens(text)}
    queries = tiny_world.queries
    unknown = [w for text, kind in queries.select("text", "kind").iter_rows() for w in tokens(text)
               if w not in known and kind != "typo"]
    assert unknown == []
    assert set(tiny_events["query_text"].unique()) <= set(queries["text"])
