#!/usr/bin/env bash
# VectorRoutingCapsNet on MNIST: a small convolutional stem whose 7 x 7
# positions are routed with Heinsen's algorithm (arXiv 2211.11754) to 32
# hidden vectors, to 32 hidden vectors again and to 10 logits, as in the
# paper's classification heads (the paper itself reports no MNIST result).
# 201,435 trainable parameters. Settings (ours): batch 32, 30 epochs, Adam
# 1e-3 decaying by 0.9 per epoch to 1e-5, categorical cross-entropy on the
# logits, the loader's default augmentation, no decoder.
#
# Usage: applications/vector_routing_mnist.sh [DATA_DIR] [extra keras-caps
# train arguments, e.g. --epochs 1 --steps-per-epoch 200 for a smoke run]
set -euo pipefail
data_dir=${1:-${KERAS_CAPS_DATA_DIR:-../shared/data/mnist}}
shift || true
exec keras-caps train --model vector_routing_capsnet --dataset mnist \
  --data-dir "$data_dir" --no-reconstruction --epochs 30 --batch-size 32 \
  --output-dir runs/vector_routing_mnist "$@"
