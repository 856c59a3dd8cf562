"""Test helpers for capsule layers, losses and models."""

from keras_caps.testing.test_case import TestCase
from keras_caps.testing.test_case import function_gradients
from keras_caps.testing.test_case import value_and_gradients
