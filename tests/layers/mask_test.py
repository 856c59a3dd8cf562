import keras
import numpy as np

from keras_caps.layers import Mask
from keras_caps.testing import TestCase


def _capsules():
    capsules = np.zeros((2, 4, 3), dtype="float32")
    capsules[0, :, 0] = [0.1, 0.9, 0.5, 0.2]
    capsules[1, :, 2] = [0.7, 0.1, 0.2, 0.8]
    return capsules


class MaskTest(TestCase):
    def test_layer_inference_mask(self):
        capsules = _capsules()
        expected = np.zeros_like(capsules)
        expected[0, 1] = capsules[0, 1]
        expected[1, 3] = capsules[1, 3]
        self.run_layer_test(
            Mask, {}, input_data=capsules, expected_output_shape=(2, 12),
            expected_output=expected.reshape(2, 12),
            expected_num_trainable_weights=0)

    def test_layer_with_labels(self):
        labels = np.eye(4, dtype="float32")[[2, 0]]
        self.run_layer_test(
            Mask, {}, input_data=[_capsules(), labels],
            expected_output_shape=(2, 12))

    def test_integer_capsules_and_labels(self):
        capsules = np.arange(2 * 4 * 3).reshape(2, 4, 3) - 10  # int64
        labels = np.eye(4, dtype="int32")[[2, 0]]
        expected = capsules * labels[:, :, None]  # hand-made label mask
        masked = Mask()([capsules, labels], training=True)
        self.assertAllClose(masked, expected.reshape(2, 12))
        # Without labels the longest capsule is kept: (-10, -9, -8) in the
        # first example, (11, 12, 13) in the second.
        longest = np.eye(4)[np.argmax(np.linalg.norm(capsules, axis=-1), -1)]
        self.assertEqual(longest.argmax(-1).tolist(), [0, 3])
        masked = Mask()(capsules)
        self.assertAllClose(masked,
                            (capsules * longest[:, :, None]).reshape(2, 12))

    def test_label_mask_while_training_length_mask_otherwise(self):
        capsules = _capsules()
        labels = np.eye(4, dtype="float32")[[2, 0]]
        layer = Mask()
        training = keras.ops.convert_to_numpy(
            layer([capsules, labels], training=True)).reshape(2, 4, 3)
        expected = np.zeros_like(capsules)
        expected[0, 2] = capsules[0, 2]
        expected[1, 0] = capsules[1, 0]
        self.assertAllClose(training, expected)
        inference = keras.ops.convert_to_numpy(
            layer([capsules, labels], training=False)).reshape(2, 4, 3)
        expected = np.zeros_like(capsules)
        expected[0, 1] = capsules[0, 1]
        expected[1, 3] = capsules[1, 3]
        self.assertAllClose(inference, expected)

    def test_top_k_masks(self):
        capsules = _capsules()
        layer = Mask(num_masks=2)
        masked = keras.ops.convert_to_numpy(layer(capsules))
        self.assertEqual(masked.shape, (2, 2, 12))
        norms = np.linalg.norm(masked.reshape(2, 2, 4, 3), axis=-1)
        self.assertAllClose(norms, [[[0, 0.9, 0, 0], [0, 0, 0.5, 0]],
                                    [[0, 0, 0, 0.8], [0.7, 0, 0, 0]]])
        # While training, each mask follows its own label, in order.
        labels = np.eye(4, dtype="float32")[[[3, 0], [1, 2]]]
        masked = keras.ops.convert_to_numpy(
            layer([capsules, labels], training=True)).reshape(2, 2, 4, 3)
        self.assertAllClose(masked[0, 0, 3], capsules[0, 3])
        self.assertAllClose(masked[0, 1, 0], capsules[0, 0])
        self.assertAllClose(masked[1, 1, 2], capsules[1, 2])
        self.assertAllClose(np.count_nonzero(masked.sum(-1)), 4)

    def test_top_k_layer(self):
        labels = np.eye(4, dtype="float32")[[[3, 0], [1, 2]]]
        self.run_layer_test(
            Mask, {"num_masks": 2}, input_data=[_capsules(), labels],
            expected_output_shape=(2, 2, 12))

    def test_bad_arguments_and_shapes(self):
        with self.assertRaisesRegex(ValueError, "`num_masks`.*num_masks=0"):
            Mask(num_masks=0)
        with self.assertRaisesRegex(TypeError, "`num_masks`"):
            Mask(num_masks="2")
        with self.assertRaisesRegex(ValueError, "num_masks=5.*only 4"):
            Mask(num_masks=5)(keras.KerasTensor((None, 4, 3)))
        with self.assertRaisesRegex(ValueError, "capsules of shape"):
            Mask()(keras.KerasTensor((None, 12)))
        with self.assertRaisesRegex(
                ValueError, "one-hot labels of shape \\(None, 4\\).*"
                "\\(None, 5\\)"):
            Mask()([keras.KerasTensor((None, 4, 3)),
                    keras.KerasTensor((None, 5))])
