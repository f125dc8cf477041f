#!/usr/bin/env bash
# One seed home of the experiment: train and evaluate (test and validation) the four methods with the xc of the
# checkout this is run from, on the data set and anchor stage of a home `xc run` built (copied, with its vector cache,
# so every seed trains on the same data).
#   cd CHECKOUT && [XC_SET="--set stage_cutoff=true"] bash /path/to/seed_home.sh SOURCE_HOME NEW_HOME SEED [DATASET] [PROFILE]
# XC_SET: training overrides given to every trained method (a -clf reuses its base's encoder only with the same ones)
set -euo pipefail
source_home=$1 home=$2 seed=$3 dataset=${4:-synthetic} profile=${5:-demo}
# the checkout's own xc (python -m puts the working directory first on the path), in the venv of $XC_VENV
xc=("${XC_VENV:-.venv}/bin/python" -m xc_assets.cli)
mkdir -p "$home"
for part in datasets anchor_sets cache; do [ -e "$home/$part" ] || cp -r "$source_home/$part" "$home/"; done
for method in pretrained dual_encoder pretrained-clf dual_encoder-clf; do
  "${xc[@]}" train --dataset "$dataset" --method "$method" --profile "$profile" --seed "$seed" --home "$home" --quiet \
    ${XC_SET:-}
  for split in test validation; do
    "${xc[@]}" eval --dataset "$dataset" --method "$method" --profile "$profile" --split "$split" --home "$home" --quiet
  done
done
