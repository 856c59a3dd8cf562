#!/usr/bin/env bash
# Matrix capsules with EM routing on smallNORB (Hinton, Sabour & Frosst,
# ICLR 2018, Section 5).
# Paper: 1.8 % test error; "310K" parameters (316,394 trainable here,
#   derived from the layer shapes in MatrixCapsNet's docstring).
# Ours:  not run yet (needs the TFDS smallnorb data and a machine that
#   trains 316K-parameter EM routing in reasonable time).
# One view resized to 48x48, random 32x32 crops with brightness and contrast
# jitter for training, the centre crop for test, each image standardised in
# the model; ReLU conv 5x5 (A = 32, stride 2), primary capsules B = 32,
# ConvCaps K = 3 stride 2 (C = 32) and stride 1 (D = 32), class capsules
# with coordinate addition, 3 EM iterations; spread loss with the margin
# rising linearly from 0.2 to 0.9 over the epochs. The paper gives no
# optimizer, learning rate or batch size: ours are Adam 3e-3 decaying by
# 0.96 per epoch to 1e-5, batch 32, 100 epochs.
#
# smallNORB comes from TFDS: DATA_DIR is a TFDS data directory; the
# `smallnorb` dataset is downloaded and prepared there on first use.
#
# Usage: applications/matrix_capsnet_smallnorb.sh [DATA_DIR] [extra args]
set -euo pipefail
data_dir=${1:-${KERAS_CAPS_DATA_DIR:-$HOME/tensorflow_datasets}}
shift || true
exec keras-caps train --model matrix_capsnet --dataset smallnorb \
  --data-dir "$data_dir" --epochs 100 --batch-size 32 \
  --output-dir runs/matrix_capsnet_smallnorb "$@"
