#!/usr/bin/env bash
# Efficient-CapsNet on MultiMNIST (Mazzia et al. 2021).
# Paper: 5.1 % test error single model, 3.8 % ensemble (unverified), per-digit
# accuracy; 154,656 trainable parameters.
# Pairs of digits of different classes, each shifted by up to 6 px in 36x36,
# 10 x 60,000 fresh training pairs per epoch, a fixed seeded test set of
# 1,000 partners per test digit (10M images; lower --partners-per-digit for a
# quicker test). Both the per-digit accuracy (official) and the exact-match
# accuracy (both digits right) are reported.
#
# Usage: applications/efficient_capsnet_multi_mnist.sh [DATA_DIR] [extra args]
set -euo pipefail
data_dir=${1:-${KERAS_CAPS_DATA_DIR:-../shared/data/mnist}}
shift || true
exec keras-caps train --model efficient_capsnet --dataset multi_mnist \
  --data-dir "$data_dir" --epochs 150 --batch-size 16 \
  --output-dir runs/efficient_capsnet_multi_mnist "$@"
