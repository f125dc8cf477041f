"""A method partition's steps on a dask cluster, through Dagster's own distributed executor (``dagster-dask``).

``xc run --executor dask --dask-address tcp://HOST:PORT`` runs each method partition (encoder → label_index →
offline_eval → ab_vs_control) as one Dagster run whose steps are dask tasks: a worker rebuilds the job from its
pointer (:func:`method_job` with the data set, its kind, the home and the method), opens the run's instance from its
ref and writes the step's events there. So workers need what the steps read and write at the same paths
(the home, the instance's storage, the MLflow store inside the home) and the same installed code; the process that
launched the run only orchestrates.

Importing this module is cheap (the CLI's parser reads its names); dagster-dask, the optional extra ``scale``, is
imported only when a run goes to a cluster.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import dagster as dg

#: where a method partition's steps run (``xc run --executor``, else ``$XC_EXECUTOR``)
EXECUTORS = ("in_process", "dask")
#: where ``dask scheduler`` listens unless told otherwise
DEFAULT_DASK_ADDRESS = "tcp://127.0.0.1:8786"


def dask_address(executor: str | None = None, address: str | None = None) -> str | None:
    """The scheduler a method partition's steps go to, or None to run them in process: ``executor`` else
    ``$XC_EXECUTOR`` (default in_process) chooses, ``address`` else ``$XC_DASK_ADDRESS`` else the default port."""
    chosen = executor or os.environ.get("XC_EXECUTOR") or "in_process"
    if chosen not in EXECUTORS:
        raise ValueError(f"executor {chosen!r}: choose one of {', '.join(EXECUTORS)} (--executor or $XC_EXECUTOR)")
    if chosen != "dask":
        return None
    return address or os.environ.get("XC_DASK_ADDRESS") or DEFAULT_DASK_ADDRESS


def check_cluster(address: str, timeout: float = 10.0) -> int:
    """The number of workers at ``address``; raises (RuntimeError, one line) before any run when the executor
    cannot work: dagster-dask not installed, no scheduler answering, or no worker (a step would wait forever)."""
    try:
        import dagster_dask  # noqa: F401  (only whether it is there: the runs import it)
        from distributed import Client
    except ImportError as err:
        raise RuntimeError(f"--executor dask needs the extra scale: pip install -e '.[scale]' ({err})") from err
    try:
        with Client(address, timeout=timeout) as client:
            workers = len(client.nthreads())
    except OSError as err:  # distributed's connect timeout is an OSError
        raise RuntimeError(f"no dask scheduler answers at {address}: start `dask scheduler`, or pass "
                           f"--dask-address ({err})") from err
    if not workers:
        raise RuntimeError(f"the dask scheduler at {address} has no worker: start `dask worker {address} "
                           "--nthreads 1` where the home is")
    return workers


def job_name(dataset: str, method: str, home: str) -> str:
    """Unique per data set, method and home: dagster-dask names each task ``<job>.<step>``, and the scheduler hands a
    second submission of a key it still holds (another run of the same job at once) the first one's result. This is
    also why the code location's ``train_eval_job`` (one job, every method partition, two runs at once in the nightly
    chain) stays on its own executor."""
    from xc_assets.defs.constants import prefix
    from xc_core.provenance import home_key

    digest = hashlib.sha1(f"{home_key(Path(home))}\0{method}".encode()).hexdigest()[:10]
    ident = re.sub(r"\W", "_", method)  # Dagster names: letters, digits, underscores
    return f"{prefix(dataset)}__{ident}__steps_{digest}"


def method_job(dataset: str, events: bool, home: str, method: str) -> dg.JobDefinition:
    """The method steps of ``dataset``'s family as a job on the dask executor, with the home bound; module level
    and built from plain arguments so that every worker can rebuild it (Dagster's reconstructable pointer)."""
    import dagster as dg
    from dagster_dask import dask_executor

    from xc_assets.defs.family import family
    from xc_assets.defs.resources import XcHome

    name = job_name(dataset, method, home)
    defs = dg.Definitions(assets=family(dataset, events).method_steps,
                          jobs=[dg.define_asset_job(name, executor_def=dask_executor)],
                          resources={"xc_home": XcHome(home=home)})
    return defs.resolve_job_def(name)


def materialize_on_dask(address: str, dataset: str, events: bool, home: Path, method: str,
                        instance: dg.DagsterInstance, run_config: dict[str, Any],
                        tags: dict[str, str]) -> dg.JobExecutionResult:
    """``dg.materialize`` of one method partition, with its steps sent to the scheduler at ``address``."""
    import dagster as dg

    pointer = dg.build_reconstructable_job(
        __name__, method_job.__name__,
        reconstructable_kwargs={"dataset": dataset, "events": events, "home": str(home), "method": method})
    execution = {"config": {"cluster": {"existing": {"address": address}}}}
    return dg.execute_job(pointer, instance, run_config={**run_config, "execution": execution},
                          tags={**tags, "dagster/partition": method, "xc/executor": "dask"})
