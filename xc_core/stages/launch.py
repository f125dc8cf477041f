"""Distributed entry point: ``torchrun --nproc_per_node N -m xc_core.stages.launch ...``.

Every rank trains on its shard of each global batch (DistributedDataParallel: NCCL on GPUs, gloo on CPU);
rank 0 owns the MLflow run and the checkpoints. ``--digest-dir`` makes each rank write a hash of its final
parameters, which is how the tests prove the ranks stayed in sync.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def parameter_digest(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main() -> None:
    from xc_core.methods import default_method

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", required=True, help="an XC data-set folder with anchor sets")
    parser.add_argument("--method", default=default_method(), help="a dual-encoder method (this drives its trainer)")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--home", required=True)
    parser.add_argument("--digest-dir", default="")
    parser.add_argument("--no-mlflow", action="store_true", help="train without tracking (tests)")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="also checkpoint every N steps")
    parser.add_argument("--out", default="", help="model folder (default: <home>/models/...)")
    parser.add_argument("--last-epoch", action="store_true", help="serve the last epoch, no selection (tests that "
                        "compare trained parameters: a selected start would make every run's digest the same)")
    args = parser.parse_args()

    from xc_core.datasets.container import XCDataset
    from xc_core.methods.encoder import encoder_method
    from xc_core.methods.encoder.training import train_config
    from xc_core.paths import model_dir
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.stages.train import train_method
    from xc_core.training.trainer import Trainer, dist_info

    home = Path(args.home)
    dataset = XCDataset.load(Path(args.anchors))
    rank, world = dist_info()
    profile = get_profile(args.profile)
    overrides: dict[str, object] = {"checkpoint_every_steps": args.checkpoint_every} if args.checkpoint_every else {}
    if args.last_epoch:
        overrides["select_best"] = False
    if rank == 0 and not args.no_mlflow:
        print(json.dumps(train_method(dataset, args.method, profile, home, resume=args.resume, overrides=overrides),
                         default=str), flush=True)
        return
    method = encoder_method(args.method)
    cfg = train_config(method, profile, overrides, dataset)
    out = Path(args.out) if args.out else model_dir(home, dataset.name, method.name, profile.name) / f"rank{rank}"
    trainer = Trainer(method.prepare(dataset, cfg), encoder_config(profile, home), cfg, out, val_truth=dataset.y_train)
    trainer.fit(resume=args.resume)
    if args.digest_dir:
        Path(args.digest_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.digest_dir) / f"rank{rank}.txt").write_text(parameter_digest(trainer.encoder.model))


if __name__ == "__main__":
    main()
