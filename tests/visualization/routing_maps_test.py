import inspect

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps import layers
from keras_caps import visualization
from keras_caps.testing import TestCase
from tests.visualization import tiny_models

# A tiny model for each routing layer (`Router`) of the package, with the
# shape of one example; `test_every_routing_layer_is_covered` fails when a
# new one is added without an entry here.
_VECTORS = (6, 4)  # 6 child capsules of dimension 4
_WITH_ACTIVATIONS = (6, 5)  # 6 child capsules: 4-D pose, activation
_MATRICES = (6, 17)  # 6 matrix capsules: 4x4 pose, activation
_MATRIX_MAP = (5, 5, 2, 17)  # 5x5 map of 2 matrix capsule types
_ACTIVATION_MAP = (5, 5, 2, 5)  # 5x5 map of 2 types: 4-D pose, activation


def _routing_model(input_shape, make_layer):
    def build():
        keras.utils.set_random_seed(1)
        children = keras.Input(input_shape, name="capsules")
        return keras.Model(children, make_layer()(children))
    return build, input_shape


_ROUTING_MODELS = {
    "FCCaps": _routing_model(
        _VECTORS, lambda: layers.FCCaps(3, 4, name="routing")),
    "DynamicRouting": _routing_model(
        _VECTORS, lambda: layers.DynamicRouting(3, 4, name="routing")),
    "InvertedAttentionRouting": _routing_model(
        _VECTORS,
        lambda: layers.InvertedAttentionRouting(3, 4, name="routing")),
    "HybridRouting": _routing_model(
        _VECTORS,
        lambda: layers.HybridRouting(3, 4, attention="concat",
                                     attention_weight=0.5, name="routing")),
    "VectorRouting": _routing_model(
        _VECTORS, lambda: layers.VectorRouting(3, 4, name="routing")),
    "AttentionRouting": _routing_model(
        _VECTORS,
        lambda: layers.AttentionRouting(3, 4, num_heads=2, key_dim=2,
                                        name="routing")),
    "EMRouting": _routing_model(
        _MATRICES, lambda: layers.EMRouting(3, name="routing")),
    "SelfRouting": _routing_model(
        _WITH_ACTIVATIONS,
        lambda: layers.SelfRouting(3, 4, name="routing")),
    "ConvMatrixCaps": _routing_model(
        _MATRIX_MAP,
        lambda: layers.ConvMatrixCaps(3, kernel_size=3, name="routing")),
    "ConvSelfRouting": _routing_model(
        _ACTIVATION_MAP,
        lambda: layers.ConvSelfRouting(3, 4, kernel_size=3,
                                       padding="valid", name="routing")),
}


def _example(input_shape):
    """Children with positive activations in the last entry."""
    example = np.random.default_rng(0).normal(size=input_shape)
    example[..., -1] = np.abs(example[..., -1]) / 3.0 + 0.1
    return example.astype("float32")


def _parents_by_children(couplings):
    """The `Router` layout `(batch, heads, children, parents)` as
    `(batch, parents, children)`, averaged over the heads."""
    return np.transpose(np.mean(np.asarray(couplings), axis=1), (0, 2, 1))


def _routing_classes():
    """Every concrete `Router` of the package."""
    return sorted(
        name for name, value in vars(layers).items()
        if inspect.isclass(value) and issubclass(value, layers.Router)
        and value is not layers.Router)


class RoutingMapsTest(TestCase):
    def test_every_routing_layer_is_covered(self):
        self.assertContainsSubset(["DynamicRouting", "FCCaps",
                                   "VectorRouting", "HybridRouting"],
                                  _routing_classes())
        self.assertContainsSubset(_routing_classes(), _ROUTING_MODELS)

    @parameterized.named_parameters(
        (name, name) for name in _routing_classes())
    def test_heatmap_is_the_layers_couplings(self, name):
        build, input_shape = _ROUTING_MODELS[name]
        model = build()
        inputs = _example(input_shape)
        self.assertEqual(visualization.routing_layer_names(model),
                         ["routing"])
        figure = visualization.plot_routing_maps(model, inputs)
        tiny_models.check_png(self, figure,
                              self.get_temp_dir() + f"/{name}.png")

        # By hand: the layer on the input, asking for its couplings.
        layer = model.get_layer("routing")
        _, couplings = layer(inputs[None], return_couplings=True)
        expected = _parents_by_children(couplings)[0]
        grid = layer.couplings_grid((1, *input_shape))
        if grid is not None:  # the middle output position's window
            rows, columns = grid
            middle = (rows // 2) * columns + columns // 2
            expected = expected.reshape(3, rows * columns, -1)[:, middle]
        shown = figure.axes[0].images[0].get_array()
        self.assertEqual(shown.shape, expected.shape)
        self.assertEqual(shown.shape[0], 3)  # parents down
        self.assertAllClose(shown, expected, atol=1e-6)
        # Each child splits at most its whole vote (ConvMatrixCaps splits
        # it over every window it lies in), all of it when fully connected.
        column_sums = shown.sum(axis=0)
        self.assertTrue(np.all(column_sums <= 1.0 + 1e-5), column_sums)
        if grid is None:
            self.assertAllClose(column_sums, np.ones(6), atol=1e-5)

    def test_efficient_capsnet_style_model(self):
        for routing in ("fc_caps", "dynamic_routing", "attention_routing"):
            model = tiny_models.tiny_capsnet(routing=routing)
            image = tiny_models.random_images(1, (12, 12, 1))
            couplings = visualization.routing_couplings(model, image)
            children = keras.Model(model.input["image"],
                                   model.get_layer("primary_caps").output)(
                image)
            layer = model.get_layer("digit_caps")
            _, expected = layer(children, return_couplings=True)
            self.assertAllClose(
                couplings, _parents_by_children(expected)[0],
                atol=1e-6)
            self.assertEqual(couplings.shape, (3, 4))

    def test_one_panel_per_routing_layer(self):
        keras.utils.set_random_seed(2)
        children = keras.Input((6, 4))
        hidden = layers.DynamicRouting(5, 4, name="first")(children)
        parents = layers.FCCaps(3, 4, name="second")(hidden)
        model = keras.Model(children, parents)
        inputs = np.random.default_rng(1).normal(size=(6, 4))
        figure = visualization.plot_routing_maps(model, inputs)
        heatmaps = [axes for axes in figure.axes if axes.images
                    and axes.get_title()]
        self.assertEqual([axes.get_title() for axes in heatmaps],
                         ["first: 6 children -> 5 parents",
                          "second: 5 children -> 3 parents"])
        self.assertAllClose(
            heatmaps[1].images[0].get_array(),
            visualization.routing_couplings(model, inputs, "second"))
        only = visualization.plot_routing_maps(model, inputs,
                                               layer_names="first")
        self.assertEqual(only.axes[0].get_title(),
                         "first: 6 children -> 5 parents")

    def test_convolutional_routing_shows_one_window(self):
        if not hasattr(layers, "InvertedAttentionRouting"):
            self.skipTest("no convolutional routing layer")
        keras.utils.set_random_seed(3)
        capsule_map = keras.Input((5, 5, 2, 4))
        layer = layers.InvertedAttentionRouting(3, 4, kernel_size=3,
                                                name="routing")
        model = keras.Model(capsule_map, layer(capsule_map))
        inputs = np.random.default_rng(2).normal(size=(1, 5, 5, 2, 4))
        _, couplings = layer(inputs.astype("float32"), return_couplings=True)
        # (1, 1, positions * window children, parents): one block of
        # 3 * 3 * 2 window children per position of the 3 x 3 output map.
        couplings = np.asarray(couplings)[0, 0].reshape(3, 3, 18, 3)
        couplings = np.transpose(couplings, (0, 1, 3, 2))
        middle = visualization.routing_couplings(model, inputs)
        self.assertAllClose(middle, couplings[1, 1].reshape(3, 18),
                            atol=1e-6)
        corner = visualization.routing_couplings(model, inputs,
                                                 position=(0, 2))
        self.assertAllClose(corner, couplings[0, 2].reshape(3, 18),
                            atol=1e-6)
        self.assertAllClose(corner.sum(axis=0), np.ones(18), atol=1e-5)
        with self.assertRaisesRegex(ValueError, "inside the 3x3 output"):
            visualization.routing_couplings(model, inputs, position=(3, 0))

    def test_clear_errors(self):
        images = keras.Input((8, 12, 1), name="image")
        model = keras.Model(images, keras.layers.Dense(2)(
            keras.layers.Flatten()(images)))  # no router
        with self.assertRaisesRegex(ValueError, "no routing layer"):
            visualization.plot_routing_maps(model, np.zeros((8, 12, 1)))
        # VectorRouting's couplings are its shares, drawn like the others.
        self.assertEqual(visualization.routing_layer_names(
            tiny_models.tiny_vector_routing_model()),
            ["routing_1", "routing_2"])
        capsnet = tiny_models.tiny_capsnet()
        with self.assertRaisesRegex(ValueError, r"Expected one of "
                                    r"\['digit_caps'\]"):
            visualization.routing_couplings(capsnet, np.zeros((12, 12, 1)),
                                            layer_name="length")
