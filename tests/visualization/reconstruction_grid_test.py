import numpy as np

from keras_caps import applications
from keras_caps import visualization
from keras_caps.testing import TestCase
from tests.visualization import tiny_models


class ReconstructionGridTest(TestCase):
    def test_figure_shows_inputs_and_their_reconstructions(self):
        model = tiny_models.tiny_capsnet()
        images = tiny_models.random_images(5, (12, 12, 1))
        figure = visualization.plot_reconstructions(
            model, images, labels=np.eye(3)[[0, 1, 2, 0, 1]],
            images_per_row=3)
        tiny_models.check_png(self, figure,
                              self.get_temp_dir() + "/reconstructions.png")

        outputs = applications.inference_model(model, reconstruction=True)(
            images)
        expected = np.asarray(outputs["reconstruction"])
        predicted = np.argmax(np.asarray(outputs["length"]), axis=-1)
        self.assertLen(figure.axes, 10)
        for index in range(5):
            shown_input = figure.axes[2 * index].images[0].get_array()
            shown_output = figure.axes[2 * index + 1].images[0].get_array()
            self.assertAllClose(shown_input, images[index, ..., 0] / 255.0)
            self.assertAllClose(shown_output, expected[index, ..., 0],
                                atol=1e-6)
            self.assertTrue(figure.axes[2 * index].get_title().startswith(
                str(predicted[index])))

    def test_wrong_predictions_name_the_true_class(self):
        model = tiny_models.tiny_capsnet()
        images = tiny_models.random_images(2, (12, 12, 1))
        predicted, _ = visualization.reconstructions(model, images)
        wrong = (predicted + 1) % 3
        figure = visualization.plot_reconstructions(model, images,
                                                    labels=wrong)
        self.assertEqual(figure.axes[0].get_title(),
                         f"{predicted[0]} (true {wrong[0]})")

    def test_bad_inputs_are_clear_errors(self):
        model = tiny_models.tiny_capsnet()
        with self.assertRaisesRegex(ValueError, r"input of shape"):
            visualization.plot_reconstructions(model, np.zeros((2, 8, 8, 1)))
        with self.assertRaisesRegex(ValueError, "one class .* per image"):
            visualization.plot_reconstructions(
                model, np.zeros((2, 12, 12, 1)), labels=[1, 2, 0])
