import keras
import numpy as np

from keras_caps import visualization
from keras_caps.testing import TestCase
from tests.visualization import tiny_models


def _credit_by_hand(model, images):
    """The two routings' own credit assignments, composed with NumPy."""
    positions = keras.Model(model.input,
                            model.get_layer("routing_1").input)(images)
    hidden, phi_1 = model.get_layer("routing_1")(
        positions, return_credit=True)
    logits, phi_2 = model.get_layer("routing_2")(
        hidden, return_credit=True)
    phi_1, phi_2 = np.asarray(phi_1), np.asarray(phi_2)

    def unit_std(x):
        return x / (x.std(axis=(1, 2), keepdims=True) + 1e-5)

    credit = unit_std(unit_std(phi_1) @ phi_2)  # (batch, positions, classes)
    return np.asarray(logits)[..., 0], credit


class CreditOverlaysTest(TestCase):
    def test_overlay_is_the_credit_of_the_predicted_class(self):
        model = tiny_models.tiny_vector_routing_model()
        images = tiny_models.random_images(3, (8, 12, 1))
        figure = visualization.plot_credit_overlays(model, images)
        tiny_models.check_png(self, figure, self.get_temp_dir() + "/c.png")

        logits, credit = _credit_by_hand(model, images)
        predicted = np.argmax(logits, axis=-1)
        for index in range(3):
            axes = figure.axes[index]
            shown_image, shown_credit = axes.images
            self.assertAllClose(shown_image.get_array(),
                                images[index, ..., 0] / 255.0)
            # 24 positions of the 8 x 12 image: a 4 x 6 map, row by row.
            self.assertAllClose(
                shown_credit.get_array(),
                credit[index, :, predicted[index]].reshape(4, 6),
                atol=1e-4)
            self.assertEqual(shown_credit.get_extent(),
                             [-0.5, 11.5, 7.5, -0.5])
            self.assertEqual(axes.get_title(),
                             f"credit for {predicted[index]}")

    def test_chosen_class_and_grid(self):
        model = tiny_models.tiny_vector_routing_model()
        images = tiny_models.random_images(2, (8, 12, 1))
        maps, classes = visualization.credit_maps(model, images,
                                                  class_index=1,
                                                  grid_shape=(6, 4))
        _, credit = _credit_by_hand(model, images)
        self.assertEqual(classes.tolist(), [1, 1])
        self.assertAllClose(maps, credit[:, :, 1].reshape(2, 6, 4),
                            atol=1e-4)

    def test_clear_errors(self):
        model = tiny_models.tiny_vector_routing_model()
        images = np.zeros((1, 8, 12, 1))
        with self.assertRaisesRegex(ValueError, "24 positions"):
            visualization.credit_maps(model, images, grid_shape=(5, 5))
        with self.assertRaisesRegex(ValueError, "class_index=3"):
            visualization.credit_maps(model, images, class_index=3)
        with self.assertRaisesRegex(ValueError, "VectorRouting"):
            visualization.credit_maps(tiny_models.tiny_capsnet(),
                                      np.zeros((1, 12, 12, 1)))
