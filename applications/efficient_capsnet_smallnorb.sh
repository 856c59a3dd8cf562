#!/usr/bin/env bash
# Efficient-CapsNet on smallNORB (Mazzia et al. 2021, Table 4).
# Paper: 2.54 % test error for a single model (unverified cell; checkpoint
# selected on the test set); 151,664 trainable parameters.
# Both stereo images as 2 channels, resized to 64x64, random 48x48 crops with
# brightness/contrast jitter; standardised with training statistics (our
# decision D5: the official code used each split's own statistics); batch 16,
# 150 epochs, Adam 5e-4 decaying by 0.97 per epoch to 5e-5.
#
# smallNORB comes from TFDS: DATA_DIR is a TFDS data directory; the
# `smallnorb` dataset is downloaded and prepared there on first use.
#
# Usage: applications/efficient_capsnet_smallnorb.sh [DATA_DIR] [extra args]
set -euo pipefail
data_dir=${1:-${KERAS_CAPS_DATA_DIR:-$HOME/tensorflow_datasets}}
shift || true
exec keras-caps train --model efficient_capsnet --dataset smallnorb \
  --data-dir "$data_dir" --epochs 150 --batch-size 16 \
  --output-dir runs/efficient_capsnet_smallnorb "$@"
