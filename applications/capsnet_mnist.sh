#!/usr/bin/env bash
# The original CapsNet on MNIST (Sabour, Frosst & Hinton 2017).
# Paper: 0.25 +- 0.005 % test error with 3 routing iterations and the
# reconstruction loss (0.29 % with 1 iteration; 0.35 % with 3 iterations and
# no reconstruction); 8.2M parameters (8,215,728 here, 6,804,384 without the
# decoder). Settings as in the official code: batch 128, Adam 1e-3 decayed
# by 0.96 every 2,000 steps (per epoch: 0.96^(468/2000)) to 1e-6, 640 epochs
# (~300k steps), margin loss + 0.0005 x reconstruction SSE (0.392 x MSE),
# random shifts of up to 2 pixels as the only augmentation, 3 iterations.
#
# Usage: applications/capsnet_mnist.sh [DATA_DIR] [extra keras-caps train
# arguments, e.g. --validation test to mirror the paper's protocol]
set -euo pipefail
data_dir=${1:-${KERAS_CAPS_DATA_DIR:-../shared/data/mnist}}
shift || true
exec keras-caps train --model capsnet --dataset mnist \
  --data-dir "$data_dir" --epochs 640 --batch-size 128 \
  --output-dir runs/capsnet_mnist "$@"
