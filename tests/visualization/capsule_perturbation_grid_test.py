import keras
import numpy as np

from keras_caps import applications
from keras_caps import visualization
from keras_caps.testing import TestCase
from tests.visualization import tiny_models


class CapsulePerturbationGridTest(TestCase):
    def test_grid_decodes_exactly_the_perturbed_capsule(self):
        model = tiny_models.tiny_capsnet()
        image = tiny_models.random_images(1, (12, 12, 1))[0]
        figure = visualization.plot_capsule_perturbations(model, image)
        tiny_models.check_png(self, figure,
                              self.get_temp_dir() + "/perturbation.png")

        # By hand: the class capsule, one entry shifted, masked by hand,
        # through the decoder.
        capsules = np.asarray(keras.Model(
            model.input["image"], model.get_layer("digit_caps").output)(
                image[None]))
        lengths = np.linalg.norm(capsules[0], axis=-1)
        predicted = int(np.argmax(lengths))
        offsets = visualization.PAPER_OFFSETS
        self.assertAllClose(offsets, np.arange(-0.25, 0.26, 0.05))
        decoder = model.get_layer("decoder")
        self.assertLen(figure.axes, 4 * len(offsets))
        for dimension in range(4):
            for column, offset in enumerate(offsets):
                perturbed = capsules.copy()
                perturbed[0, predicted, dimension] += offset
                masked = np.zeros_like(perturbed)
                masked[0, predicted] = perturbed[0, predicted]
                expected = np.asarray(decoder(masked.reshape(1, -1)))
                shown = figure.axes[dimension * len(offsets)
                                    + column].images[0].get_array()
                self.assertAllClose(shown, expected[0, ..., 0], atol=1e-6)
        # Offset 0 is the plain reconstruction of the predicted capsule.
        reconstruction = applications.inference_model(
            model, reconstruction=True)(image[None])["reconstruction"]
        self.assertAllClose(
            figure.axes[len(offsets) // 2].images[0].get_array(),
            np.asarray(reconstruction)[0, ..., 0], atol=1e-6)

    def test_chosen_class_dimensions_and_offsets(self):
        model = tiny_models.tiny_capsnet()
        image = tiny_models.random_images(1, (12, 12, 1))[0]
        decoded, class_index = visualization.capsule_perturbations(
            model, image, class_index=2, offsets=[-0.5, 0.5],
            dimensions=[3, 1])
        self.assertEqual(class_index, 2)
        self.assertEqual(decoded.shape, (2, 2, 12, 12, 1))
        capsules = np.array(keras.Model(
            model.input["image"], model.get_layer("digit_caps").output)(
                image[None]))
        capsules[0, 2, 1] += 0.5
        masked = np.zeros_like(capsules)
        masked[0, 2] = capsules[0, 2]
        expected = model.get_layer("decoder")(masked.reshape(1, -1))
        self.assertAllClose(decoded[1, 1], np.asarray(expected)[0],
                            atol=1e-6)

    def test_bad_arguments_are_clear_errors(self):
        model = tiny_models.tiny_capsnet()
        image = np.zeros((12, 12, 1))
        with self.assertRaisesRegex(ValueError, "class_index.*Received: "
                                    "class_index=3"):
            visualization.capsule_perturbations(model, image, class_index=3)
        with self.assertRaisesRegex(ValueError, "dimensions=4"):
            visualization.capsule_perturbations(model, image,
                                                dimensions=[4])
        with self.assertRaisesRegex(ValueError, "one image"):
            visualization.capsule_perturbations(model,
                                                np.zeros((2, 12, 12, 1)))
        no_decoder = tiny_models.tiny_vector_routing_model()
        with self.assertRaisesRegex(ValueError, r"Missing: \['decoder', "):
            visualization.capsule_perturbations(no_decoder,
                                                np.zeros((8, 12, 1)))
