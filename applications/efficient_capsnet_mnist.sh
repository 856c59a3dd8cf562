#!/usr/bin/env bash
# Efficient-CapsNet on MNIST (Mazzia et al. 2021, Table 2).
# Paper: 0.26 % test error for a single model (checkpoint selected on the
# test set), 0.16 % for an ensemble (Table 3); 161,824 trainable parameters.
# Settings as in the paper's code: batch 16, 150 epochs, Adam 5e-4 decaying
# by 0.97 per epoch to 5e-5, margin loss + 0.392 x reconstruction MSE, the
# official rotate/shift/squish/erase augmentation.
#
# Usage: applications/efficient_capsnet_mnist.sh [DATA_DIR] [extra keras-caps
# train arguments, e.g. --validation test to mirror the paper's protocol]
set -euo pipefail
data_dir=${1:-${KERAS_CAPS_DATA_DIR:-../shared/data/mnist}}
shift || true
exec keras-caps train --model efficient_capsnet --dataset mnist \
  --data-dir "$data_dir" --epochs 150 --batch-size 16 \
  --output-dir runs/efficient_capsnet_mnist "$@"
