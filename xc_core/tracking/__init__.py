"""MLflow tracking: the tracking URI from one place, experiments with explicit artifact folders."""

from xc_core.tracking.store import ensure_experiment, git_commit, tracking_uri

__all__ = ["ensure_experiment", "git_commit", "tracking_uri"]
