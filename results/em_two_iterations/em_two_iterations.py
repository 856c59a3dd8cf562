"""Diagnostic: compare's `em` router (CapsuleClassifier on Efficient-CapsNet's
stem) with 2 EM iterations instead of 3, at the comparison's budget."""
import dataclasses
import sys

from keras_caps.applications.capsule_classifier import routers
from keras_caps.training.fit import train

choice = routers.ROUTERS["em"]
three = choice.factory


def two_iterations(num_capsules, capsule_dim, num_inputs, options, name):
    return three(num_capsules, capsule_dim, num_inputs,
                 {"num_iterations": 2, **options}, name)


routers.ROUTERS["em"] = dataclasses.replace(choice, factory=two_iterations)
train("capsule_classifier_em", "mnist", output_dir=sys.argv[1],
      data_dir="/work/shared/data/mnist", epochs=2, steps_per_epoch=500,
      seed=int(sys.argv[2]))
