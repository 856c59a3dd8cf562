"""Diagnostic: the MNIST MatrixCapsNet preset with the paper's 3 EM
iterations instead of 2, same budget and recipe as the preset run."""
import sys

from keras_caps.applications.matrix_capsnet import matrix_capsnet_presets
from keras_caps.training.fit import train

matrix_capsnet_presets.MATRIX_CAPSNET_PRESETS["mnist"]["num_iterations"] = 3
train("matrix_capsnet", "mnist", output_dir=sys.argv[1],
      data_dir="/work/shared/data/mnist", epochs=3, steps_per_epoch=1000,
      batch_size=32, seed=0)
