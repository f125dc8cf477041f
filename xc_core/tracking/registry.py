"""The MLflow model registry: every evaluated method's model becomes a version of ``xc-encoder-<dataset>`` with the
``challenger`` alias; promotion to ``champion`` is gated and atomic (one alias move after every check).

Aliases only — registry stages are deprecated in MLflow 3. Decision rule (:func:`decide`): promote when
there is no champion yet, or when the challenger's primary metric is strictly better, that lead holds at
the policy's confidence on the same queries (paired bootstrap, :func:`paired_lead`), the lead is at
least the policy's ``min_lead``, and no guard metric (PSP@5, the tail bin's P@5) is *significantly* worse than the
champion's: each guard is a paired test on the same queries, and a difference whose interval holds 0 is a
tie band, reported with its interval — not a fixed margin on two point estimates. The decision, both
metric sets, the paired intervals and the reason are written as version tags.

The gate decides on the **promotion split** (``PROMOTION_SPLIT``: each model's validation rows, scored with the
test protocol), never on the test split: the winner among versions, scored on the rows that chose it, would be a
biased figure. A version carries its test scores as ``test_metric.*`` tags, shown beside the decision
(:meth:`Decision.test_view`, which says when the test disagrees) and read by no rule.

Metrics are fractions in [0, 1] (reports print them ×100 as points), and so are ``min_lead`` and the
guard tolerances: ``min_lead=0.005`` asks for half a point of P@1.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

CHAMPION, CHALLENGER = "champion", "challenger"

#: the split the gate decides on: each model's validation rows (an event log's last days before the test period, a
#: held-out slice of an XC folder's training documents), scored with the test protocol. The test split is only shown
#: beside a decision (``test_metric.*`` tags), never read by it
PROMOTION_SPLIT = "validation"
SPLIT_TAG, TEST_PREFIX = "promotion.split", "test_"


def model_name(dataset: str) -> str:
    return f"xc-encoder-{Path(dataset).name if '/' in dataset else dataset}"


class PromotionPolicy(BaseModel):
    primary: str = Field(default="P@1", description="must improve strictly")
    guards: dict[str, float] = Field(default_factory=lambda: {"PSP@5": 0.0, "tail_P@5": 0.0}, description=(
        "metric → allowed drop (absolute): with a paired comparison the guard fails when the challenger − champion "
        "interval lies wholly below −drop (significantly worse by more than it), and an interval holding 0 is a tie"))
    unpaired_tolerance: float = Field(default=0.01, ge=0, description=(
        "without a paired comparison (the champion scored on another test split), the drop a guard's point "
        "estimate may show on top of its allowed drop"))
    confidence: float = Field(default=0.95, ge=0, lt=1,
                              description="the primary metric's lead must hold at this confidence: the paired "
                                          "bootstrap interval over the same test queries lies above 0 "
                                          "(0: point estimates only)")
    # Significance says a lead is real, not that it is worth a deployment: on 55k paired queries a
    # +0.07-point P@1 lead clears the 95% rule. The threshold is on the point estimate (the smallest
    # effect worth shipping, as in a power analysis), not on the interval's lower bound, so it does not
    # tighten as the test split grows nor double-count the noise the confidence rule already handles.
    min_lead: float = Field(default=0.0, ge=0,
                            description="smallest primary-metric lead (challenger − champion point estimate, "
                                        "same units as the metric: a fraction, 0.005 = half a P@1 point) "
                                        "worth promoting; 0: any strict lead")
    ab_guards: tuple[str, ...] = Field(default=("brand_bmr", "location_bmr"),
                                       description="A/B metrics (lower is better) that must not be significantly "
                                                   "worse than the champion's in the gate's simulated A/B test")
    ab_alpha: float = Field(default=0.05, gt=0, lt=1, description="significance level of the A/B guards")


@dataclass(frozen=True)
class PairedLead:
    """Challenger − champion on the primary metric over the same test queries (paired bootstrap)."""

    diff: float
    low: float
    high: float
    p: float
    rows: int
    confidence: float
    split: str = "test"  # the split whose queries were paired

    def describe(self, metric: str) -> str:
        return (f"{metric} lead {self.diff:+.4f}, {self.confidence:.0%} CI [{self.low:+.4f}, {self.high:+.4f}] "
                f"over {self.rows} paired {self.split} queries (p = {self.p:.3f})")


    def band(self) -> str:
        """``better`` / ``worse`` when the interval excludes 0, else ``tie`` (the difference is within noise)."""
        return "better" if self.low > 0 else "worse" if self.high < 0 else "tie"


@dataclass(frozen=True)
class GuardCheck:
    """One guard metric, challenger − champion: the paired test when both sides were scored on the same test
    queries (``paired``), else the point estimates alone."""

    metric: str
    challenger: float
    champion: float
    allowed_drop: float
    paired: PairedLead | None = None

    @property
    def held(self) -> bool:
        if self.paired is not None:
            return self.paired.high >= -self.allowed_drop
        return self.challenger >= self.champion - self.allowed_drop

    def describe(self) -> str:
        if self.paired is None:
            return (f"{self.metric} {self.challenger:.4f} vs the champion's {self.champion:.4f} (point estimates, "
                    f"allowed drop {self.allowed_drop:.4f})")
        band = {"tie": "tie band", "better": "better", "worse": "worse"}[self.paired.band()]
        return f"{self.metric} {band}: {self.paired.describe(self.metric).removeprefix(self.metric + ' lead ')}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "held": self.held, "band": self.paired.band() if self.paired else "unpaired"}


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str
    challenger: dict[str, float]
    champion: dict[str, float] | None
    paired: PairedLead | None = None
    guards: tuple[GuardCheck, ...] = ()
    split: str = PROMOTION_SPLIT  # what the metrics above were scored on
    #: the test split's figures of both sides, shown beside the decision and never read by it
    test: dict[str, dict[str, float]] = field(default_factory=dict)

    def test_view(self, metric: str = "P@1") -> str:
        """The test figure beside the decision, and whether the test agrees with it: a challenger that wins on the
        promotion split and loses on test (or the reverse) is said, not hidden."""
        challenger, champion = (self.test.get(side, {}).get(metric) for side in ("challenger", "champion"))
        if challenger is None:
            return f"decided on the {self.split} split; no test figure recorded"
        shown = f"decided on the {self.split} split; test {metric} {challenger:.4f}"
        if champion is None:
            return shown
        agrees = (challenger > champion) == self.promote
        verdict = "the test agrees" if agrees else (
            "the test disagrees: it scores the challenger below the champion" if self.promote else
            "the test disagrees: it scores the challenger above the champion")
        return f"{shown} vs the champion's {champion:.4f} ({verdict})"

    def as_tags(self) -> dict[str, str]:
        return {"promotion.decision": "promoted" if self.promote else "rejected", "promotion.reason": self.reason,
                "promotion.decided_on": self.split, "promotion.test_view": self.test_view(),
                "promotion.challenger_metrics": json.dumps(self.challenger),
                "promotion.champion_metrics": json.dumps(self.champion),
                "promotion.paired": json.dumps(asdict(self.paired) if self.paired else None),
                "promotion.guards": json.dumps([g.as_dict() for g in self.guards])}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(challenger: dict[str, float], champion: dict[str, float] | None, policy: PromotionPolicy,
           paired: PairedLead | None = None, ab: dict[str, Any] | None = None,
           paired_guards: dict[str, PairedLead] | None = None) -> Decision:
    """The gate's rules on two versions' metrics. When the policy asks for confidence but no paired comparison
    exists (the champion was evaluated on other rows, or its per-query results were overwritten by a retraining),
    point estimates decide and the reason says so.

    Rules, in order; the first that fails names itself in the reason: the primary metric strictly better;
    its paired interval above 0 (when ``confidence`` > 0 and ``paired`` exists; else a tie band); its lead (point
    estimate, challenger − champion) at least ``min_lead``, with or without a paired comparison; every guard held
    (:class:`GuardCheck`: not significantly worse); and, when ``ab`` (the gate's A/B test of challenger vs champion,
    ``xc_core.abtest``'s JSON) is given, no A/B guard (Brand/Location BMR) significantly worse. A promoted
    decision's reason lists each guard's band and interval.

    Args:
        challenger: the challenger's metrics on the deciding split (:func:`challenger_metrics`).
        champion: the champion's on the same split; None when there is no champion yet (the challenger wins).
        policy: the primary metric, its confidence and minimum lead, the guards and the A/B guards.
        paired: the primary metric's paired lead on the same rows (None: no paired comparison).
        ab: the gate's A/B test of challenger vs champion, or None.
        paired_guards: each guard metric's paired lead on the same rows.

    Returns:
        The decision: promote or not, the reason (the first failing rule, or every guard's band when promoted),
        both metric sets, the paired lead and the guard checks.
    """
    if champion is None:
        return Decision(True, "no champion yet: the first model becomes champion", challenger, None, paired)
    p = policy.primary
    checks = guard_checks(challenger, champion, policy, paired_guards or {})

    def decision(promote: bool, reason: str) -> Decision:
        return Decision(promote, reason, challenger, champion, paired, checks)

    if challenger.get(p, float("-inf")) <= champion.get(p, float("-inf")):
        return decision(False, f"{p} {challenger.get(p, float('nan')):.4f} does not beat the champion's "
                               f"{champion.get(p, float('nan')):.4f}")
    if policy.confidence > 0 and paired is not None and paired.low <= 0:
        return decision(False, f"{p} {challenger[p]:.4f} > {champion[p]:.4f} is within noise (a tie band): "
                               f"{paired.describe(p)}")
    lead = challenger[p] - champion[p]
    # a lead equal to min_lead up to float rounding (0.405 - 0.4 < 0.005) meets it
    if lead < policy.min_lead and not math.isclose(lead, policy.min_lead, abs_tol=1e-12):
        evidence = (f"; {paired.describe(p)}" if paired else
                    "; no paired comparison on the same split" if policy.confidence > 0 else "")
        return decision(False, f"{p} lead {lead:+.4f} is below the minimum lead min_lead = {policy.min_lead:.4f} "
                               f"({challenger[p]:.4f} vs the champion's {champion[p]:.4f}){evidence}")
    for check in checks:
        if not check.held:
            return decision(False, f"guard {check.metric} regresses: {check.describe()}")
    worse = _ab_regression(ab, policy)
    if worse:
        return decision(False, f"A/B guard: {worse} in the simulated A/B test against the champion")
    minimum = f", lead {lead:+.4f} ≥ min_lead {policy.min_lead:.4f}" if policy.min_lead > 0 else ""
    evidence = (f"; {paired.describe(p)}" if paired else
                "; no paired comparison on the same split, point estimates decided" if policy.confidence > 0
                else "")
    held = f"; guards held: {'; '.join(c.describe() for c in checks)}" if checks else ""
    checked = f"; A/B guards {', '.join(policy.ab_guards)} held" if ab and "delta_pct" in ab else ""
    return decision(True, f"{p} {challenger[p]:.4f} > {champion[p]:.4f}{minimum} and no guard is significantly "
                          f"worse{evidence}{held}{checked}")


def guard_checks(challenger: dict[str, float], champion: dict[str, float], policy: PromotionPolicy,
                 paired: dict[str, PairedLead]) -> tuple[GuardCheck, ...]:
    """Each guard metric both sides hold: paired when ``paired`` has it, else on point estimates with the policy's
    ``unpaired_tolerance`` added to its allowed drop."""
    return tuple(GuardCheck(metric, challenger[metric], champion[metric],
                            drop if metric in paired else drop + policy.unpaired_tolerance, paired.get(metric))
                 for metric, drop in policy.guards.items() if metric in challenger and metric in champion)


def _ab_regression(ab: dict[str, Any] | None, policy: PromotionPolicy) -> str:
    """The first A/B guard metric that rose significantly (its %Δ, interval and p-value), or ''."""
    if not ab or "delta_pct" not in ab:
        return ""
    for metric in policy.ab_guards:
        pct, p = ab["delta_pct"].get(metric), ab["p_value"].get(metric)
        if pct is not None and p is not None and pct > 0 and p < policy.ab_alpha:
            low, high = ab["ci95"][metric]
            shown = f"p = {p:.3g}" if p > 0 else "p < 1e-6"
            return f"{metric} {pct:+.2f}% [{low:+.2f}, {high:+.2f}] ({shown}) is significantly worse"
    return ""


def _record(home: Path | None, tags: dict[str, str], split: str) -> Any | None:
    """The evaluation on ``split`` that belongs to this version's run (None: none, or a later training of the same
    method overwrote it)."""
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import eval_dir

    if home is None or not {"dataset", "method", "profile"} <= set(tags):
        return None
    record = EvaluationRecord.load(eval_dir(home, tags["dataset"], tags["method"], tags["profile"], split))
    return record if record is not None and record.mlflow_run_id == tags.get("mlflow_run_id") else None


def _metrics_on(home: Path | None, tags: dict[str, str], split: str) -> dict[str, float] | None:
    """A version's gate metrics on ``split`` from its run's evaluation there, or None."""
    record = _record(home, tags, split)
    return challenger_metrics(record.summary, record.quantiles()) if record is not None else None


def _eval_rows(home: Path, tags: dict[str, str], split: str) -> tuple[str, dict[str, Any]] | None:
    """(split fingerprint, per-query arrays) of the version's run's evaluation on ``split``."""
    record = _record(home, tags, split)
    rows = record.per_row() if record is not None else None
    if record is None or rows is None or not record.test_split:
        return None  # a later training of the same method overwrote it, or it predates split fingerprints
    return record.test_split, rows


def paired_lead(home: Path, challenger_tags: dict[str, str], champion_tags: dict[str, str], metric: str,
                confidence: float = 0.95) -> PairedLead | None:
    """Challenger − champion on ``metric`` over the same rows of the challenger's deciding split, or None when the
    two evaluations are not on the same rows (or one is missing): a paired interval is then meaningless."""
    return paired_leads(home, challenger_tags, champion_tags, {metric: confidence}).get(metric)


def paired_leads(home: Path, challenger_tags: dict[str, str], champion_tags: dict[str, str],
                 metrics: dict[str, float]) -> dict[str, PairedLead]:
    """:func:`paired_lead` for each metric (→ its confidence) the two evaluations both hold, each evaluation's
    per-query results read once."""
    from xc_core.evaluation import paired_metric_diff

    split = challenger_tags.get(SPLIT_TAG, "test")  # the champion is paired on the challenger's split
    a, b = _eval_rows(home, challenger_tags, split), _eval_rows(home, champion_tags, split)
    if a is None or b is None or a[0] != b[0]:
        return {}
    rows = len(next(iter(a[1].values())))
    found = {}
    for metric, confidence in metrics.items():
        result = paired_metric_diff(a[1], b[1], metric, alpha=1 - confidence)
        if result is not None:
            found[metric] = PairedLead(*result, rows, confidence, split)
    return found


def gate(home: Path | None, challenger: Any, champion: Any | None, policy: PromotionPolicy) -> Decision:
    """The decision for two registered versions, on the split the challenger was registered to be decided on
    (:data:`PROMOTION_SPLIT`: its validation rows). The champion is re-scored from its run's evaluation on that split
    when it was gated on another. The primary metric and every guard are paired on the same rows where both
    evaluations' per-query results exist; the gate's A/B test of the two (``paths.gate_abtest_path``, written by the
    Dagster ``ab_test`` asset) is read when there is one. The test figures ride along in the decision; no rule
    reads them.

    Args:
        home: the data root holding the evaluations (None: point estimates from the tags, no A/B test).
        challenger: the challenger's registered model version (an MLflow ``ModelVersion``).
        champion: the champion's, or None when there is none yet.
        policy: the promotion policy.

    Returns:
        The decision, with the deciding split and both versions' test metrics beside it. A champion without an
        evaluation on the deciding split gives a refusal whose reason names the ``xc eval`` that fixes it.
    """
    test = {"challenger": test_metrics_of(challenger), **({"champion": test_metrics_of(champion)} if champion else {})}
    champion_metrics = metrics_of(champion) if champion else None
    if champion is not None and split_of(champion) != split_of(challenger):
        champion_metrics = _metrics_on(home, dict(champion.tags), split_of(challenger))
        if champion_metrics is None:
            return Decision(False, f"the champion (v{champion.version}) was gated on the {split_of(champion)} split "
                                   f"and has no {split_of(challenger)} evaluation of its run: score it there "
                                   f"(`xc eval --split {split_of(challenger)} --method {champion.tags.get('method')}`)"
                                   " and run `xc promote` again", metrics_of(challenger), metrics_of(champion),
                            split=split_of(challenger), test=test)
    paired, guards = None, {}
    if home is not None and champion is not None:
        level = policy.confidence if policy.confidence > 0 else 0.95  # the guards are paired tests either way
        asked = {metric: level for metric in policy.guards}
        if policy.confidence > 0:
            asked[policy.primary] = policy.confidence
        found = paired_leads(home, dict(challenger.tags), dict(champion.tags), asked)
        paired = found.get(policy.primary) if policy.confidence > 0 else None
        guards = {metric: found[metric] for metric in policy.guards if metric in found}
    decision = decide(metrics_of(challenger), champion_metrics, policy, paired,
                      gate_abtest(home, challenger, champion), guards)
    return replace(decision, split=split_of(challenger), test=test)


def gate_abtest(home: Path | None, challenger: Any, champion: Any | None) -> dict[str, Any] | None:
    """The saved A/B test of ``challenger`` vs ``champion`` (versions), or None."""
    from xc_core.paths import gate_abtest_path

    if home is None or champion is None:
        return None
    tags = dict(challenger.tags)
    path = gate_abtest_path(home, tags.get("dataset", ""), tags.get("profile", ""), str(challenger.version),
                            str(champion.version))
    return json.loads(path.read_text()) if path.exists() else None


def register(model_uri: str, dataset: str, tags: dict[str, str], tracking_uri: str) -> str:
    """Register ``model_uri`` as a new version with ``tags`` and point ``challenger`` at it; returns the version."""
    import mlflow

    from xc_core.tracking.store import activate

    client = mlflow.MlflowClient(tracking_uri)
    activate(tracking_uri)
    version = mlflow.register_model(model_uri, model_name(dataset), tags=tags).version
    client.set_registered_model_alias(model_name(dataset), CHALLENGER, version)
    return str(version)


def champion_version(dataset: str, tracking_uri: str) -> Any | None:
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        return mlflow.MlflowClient(tracking_uri).get_model_version_by_alias(model_name(dataset), CHAMPION)
    except MlflowException:
        return None


def metric_tags(metrics: dict[str, float]) -> dict[str, str]:
    """Version tags holding metrics (tag keys may not contain '@': ``P@1`` is stored as ``metric.P_at_1``)."""
    return {f"metric.{k.replace('@', '_at_')}": str(float(v)) for k, v in metrics.items()}


def metrics_of(version: Any) -> dict[str, float]:
    """The metrics the gate compares: the version's scores on its promotion split (:func:`split_of`)."""
    return {k.removeprefix("metric.").replace("_at_", "@"): float(v) for k, v in version.tags.items()
            if k.startswith("metric.")}


def test_metrics_of(version: Any) -> dict[str, float]:
    """The version's test-split scores: shown beside the decision, never read by it."""
    return {k.removeprefix(TEST_PREFIX + "metric.").replace("_at_", "@"): float(v) for k, v in version.tags.items()
            if k.startswith(TEST_PREFIX + "metric.")}


def split_of(version: Any) -> str:
    """The split a version's gate metrics were scored on (versions registered before promotion splits: the test)."""
    return str(dict(version.tags).get(SPLIT_TAG, "test"))


def promote_if_better(dataset: str, version: str, tracking_uri: str, policy: PromotionPolicy | None = None,
                      home: Path | None = None) -> Decision:
    """Compare the version with the champion, tag the decision, and move ``champion`` only if it wins.

    Args:
        dataset: the data set whose registered model (``xc-encoder-<data set>``) holds the version.
        version: the challenger's version number.
        tracking_uri: the MLflow store holding the registry.
        policy: the promotion policy (None: the default).
        home: the data root with the evaluations' per-query results for the paired comparison (None: point
            estimates decide).

    Returns:
        The decision, also written as the version's ``promotion.*`` tags.
    """
    import mlflow

    client = mlflow.MlflowClient(tracking_uri)
    name = model_name(dataset)
    challenger = client.get_model_version(name, version)
    current = champion_version(dataset, tracking_uri)
    decision = gate(home, challenger, current, policy or PromotionPolicy())
    for key, value in decision.as_tags().items():
        client.set_model_version_tag(name, version, key, value)
    if decision.promote:
        client.set_registered_model_alias(name, CHAMPION, version)  # the one atomic step
    return decision


def challenger_metrics(eval_summary: dict[str, Any], quantiles: Any | None = None) -> dict[str, float]:
    """The metrics a promotion compares: the evaluation's P/PSP/R plus ``tail_P@5`` (the P@5 earned on the
    tail label quantile, bin 0), so a model cannot win on head labels while losing the tail."""
    keys = ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5", "R@10", "R@100", "nDCG@5")
    out = {k: float(eval_summary[k]) for k in keys if k in eval_summary}
    if quantiles is not None and "P@5" in getattr(quantiles, "columns", []):
        out["tail_P@5"] = float(quantiles.filter(quantiles["bin"] == 0)["P@5"][0])
    return out


def register_evaluated(home: Path, dataset: str, method: str, profile: str) -> dict[str, Any]:
    """Register the evaluated model of (dataset, method, profile) as the new challenger version; its ``method``
    tag is how serving finds the method that scores it.

    Args:
        home: the data root holding the trained model and its evaluations.
        dataset: the data set's name.
        method: the trained method.
        profile: the profile it was trained at.

    Returns:
        The registered model's name and version, its metrics on the promotion split and on the test, the split's
        name, the tracking URI and the served model's URI.

    Raises:
        FileNotFoundError: the run has no evaluation on the promotion split or on the test (or one of another run);
            the message names the ``xc eval`` to run.
    """
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import eval_dir
    from xc_core.tracking.store import git_commit, tracking_uri
    from xc_core.training.record import TrainedModel

    trained = TrainedModel.of(home, dataset, method, profile)
    records = {}
    for split in (PROMOTION_SPLIT, "test"):
        folder = eval_dir(home, dataset, method, profile, split)
        record = EvaluationRecord.load(folder)
        if record is None or record.mlflow_run_id != trained.mlflow_run_id:
            state = "no evaluation" if record is None else f"an evaluation of another run ({record.mlflow_run_id})"
            raise FileNotFoundError(f"{folder}: {state} of {method}'s run {trained.mlflow_run_id}; evaluate it first "
                                    f"(`xc eval --dataset {dataset} --method {method} --profile {profile} --split "
                                    f"{split}`)")
        records[split] = record
    metrics = challenger_metrics(records[PROMOTION_SPLIT].summary, records[PROMOTION_SPLIT].quantiles())
    test = challenger_metrics(records["test"].summary, records["test"].quantiles())
    commit = git_commit()
    tags = {"method": method, "dataset": dataset, "profile": profile, "git_commit": commit,
            "mlflow_run_id": trained.mlflow_run_id, "trained_model_uri": trained.model_uri, **metric_tags(metrics),
            SPLIT_TAG: PROMOTION_SPLIT, "promotion.rows": str(records[PROMOTION_SPLIT].summary["test_documents"]),
            **{TEST_PREFIX + key: value for key, value in metric_tags(test).items()}}
    if trained.summary.get("depends_on_run_id"):  # a model built on another run's (e.g. IRENE on its encoder)
        tags["depends_on_run_id"] = str(trained.summary["depends_on_run_id"])
    uri = tracking_uri(home)
    served = served_model(home, dataset, method, profile, trained, commit)
    version = register(served.model_uri, dataset, tags, uri)
    return {"model": model_name(dataset), "version": version, "metrics": metrics, "split": PROMOTION_SPLIT,
            "test_metrics": test, "tracking_uri": uri, "model_uri": served.model_uri}


def served_model(home: Path, dataset: str, method: str, profile: str, trained: Any, commit: str) -> Any:
    """Log the self-contained served model (``served.py``: the method's model + its evaluated index + the
    labels) into the training run; what the registry registers, so a version answers ads on any machine."""
    from xc_core.datasets.container import XCDataset
    from xc_core.encoders.onnx_runtime import ExportCache
    from xc_core.paths import dataset_dir, index_dir
    from xc_core.tracking.served import log_served
    from xc_core.tracking.store import activate, tracking_uri

    activate(tracking_uri(home))
    data = XCDataset.load(dataset_dir(home, dataset))
    info = {"method": method, "dataset": dataset, "profile": profile, "trained_model_uri": trained.model_uri,
            "git_commit": commit}
    return log_served(trained.model_uri, trained.mlflow_run_id, index_dir(home, dataset, method, profile),
                      list(data.label_ids or []), list(data.label_texts), info, ExportCache.for_home(home))
