"""Metrics Keras lacks: scoring of multi-digit images (MultiMNIST)."""

from keras_caps.metrics.exact_match_accuracy import ExactMatchAccuracy
from keras_caps.metrics.exact_match_accuracy import exact_match_accuracy
from keras_caps.metrics.multi_digit_accuracy import MultiDigitAccuracy
from keras_caps.metrics.multi_digit_accuracy import multi_digit_accuracy
