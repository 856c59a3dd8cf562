"""Test helpers for capsule layers, losses and models."""

from keras_caps.testing.affnist_files import write_affnist_file
from keras_caps.testing.affnist_files import write_affnist_test_set
from keras_caps.testing.idx_files import synthetic_digits
from keras_caps.testing.idx_files import write_idx_dataset
from keras_caps.testing.image_folders import class_image
from keras_caps.testing.image_folders import write_image_folder
from keras_caps.testing.image_folders import write_non_image
from keras_caps.testing.image_folders import write_truncated_image
from keras_caps.testing.test_case import TestCase
from keras_caps.testing.test_case import function_gradients
from keras_caps.testing.test_case import value_and_gradients
