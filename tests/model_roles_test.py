"""Every application builder exposes its layers under the role names."""

import keras
from absl.testing import parameterized

from keras_caps import applications
from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.applications.capsule_classifier import ROUTERS
from keras_caps.testing import TestCase

_SHAPE = (16, 16, 1)
_DECODER_ROLES = (roles.LABEL, roles.MASK, roles.DECODER)
_CAPSULE_ROLES = (roles.IMAGE, roles.INPUT_SCALING, roles.CLASS_CAPSULES,
                  roles.LENGTH)
# Routers whose outputs the classifier squashes with a separate layer.
_UNSQUASHED = tuple(name for name, spec in ROUTERS.items()
                    if spec.outputs != "squashed")


def _vector_routing_head():
    """A VectorRoutingHead on a tiny convolutional backbone."""
    images = keras.Input((6, 6, 3), name="pixels")
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same")(images)
    backbone = keras.Model(images, x, name="backbone")
    return applications.VectorRoutingHead(backbone, 5,
                                          num_hidden_capsules=4)


# name -> (builder, router name, class-score name).
_NON_CAPSULE_MODELS = {
    "vector_routing_capsnet": (
        lambda: applications.VectorRoutingCapsNet(
            "mnist", input_shape=_SHAPE, compile=False),
        roles.CLASS_ROUTING, roles.LOGITS),
    "inverted_attention_capsnet": (
        lambda: applications.InvertedAttentionCapsNet(
            backbone="simple", input_shape=(16, 16, 3), compile=False),
        roles.CAPSULE_ROUTING, roles.LOGITS),
    "vector_routing_head": (_vector_routing_head, roles.CLASS_ROUTING,
                            roles.LOGITS),
}


def _layer_names(model):
    return {layer.name for layer in model.layers}


class CapsuleModelRolesTest(TestCase):
    def assertCapsuleRoles(self, model, reconstruction=True):
        needed = _CAPSULE_ROLES + (_DECODER_ROLES if reconstruction else ())
        roles.require_roles(model, needed, "The test")
        capsules = roles.role_layer(model, roles.CLASS_CAPSULES)
        self.assertEqual(capsules.output.shape, (None, 10, 16))
        self.assertIs(roles.class_scores_layer(model),
                      roles.role_layer(model, roles.LENGTH))
        self.assertEqual(roles.class_scores_layer(model).output.shape,
                         (None, 10))
        self.assertIs(roles.image_input(model),
                      roles.role_layer(model, roles.IMAGE).output)
        if reconstruction:
            self.assertEqual(set(model.output), {roles.LENGTH,
                                                 roles.RECONSTRUCTION})
            decoded = roles.role_layer(model, roles.DECODER).output
            self.assertEqual(decoded.shape,
                             roles.image_input(model).shape)
        else:
            self.assertFalse(_layer_names(model) & set(_DECODER_ROLES))

    @parameterized.named_parameters(("reconstruction", True),
                                    ("classifier", False))
    def test_efficient_capsnet(self, reconstruction):
        model = applications.EfficientCapsNet(
            "mnist", input_shape=_SHAPE, reconstruction=reconstruction,
            compile=False)
        self.assertCapsuleRoles(model, reconstruction)
        self.assertIsInstance(roles.router_layer(model), layers.FCCaps)
        self.assertIs(roles.router_layer(model),
                      roles.role_layer(model, roles.CLASS_CAPSULES))

    def test_capsnet(self):
        model = applications.CapsNet("mnist", input_shape=(20, 20, 1),
                                     compile=False)  # 9x9 valid convs
        self.assertCapsuleRoles(model)
        self.assertIsInstance(roles.router_layer(model),
                              layers.DynamicRouting)

    @parameterized.named_parameters(*((router, router) for router in ROUTERS))
    def test_capsule_classifier(self, router):
        model = applications.CapsuleClassifier(
            "mnist", router=router, input_shape=_SHAPE, compile=False)
        self.assertCapsuleRoles(model)
        router_layer = roles.router_layer(model)
        self.assertIsInstance(router_layer, ROUTERS[router].layer_class)
        capsules = roles.role_layer(model, roles.CLASS_CAPSULES)
        if router in _UNSQUASHED:
            self.assertEqual(router_layer.name, roles.ROUTING)
            # The pose-score head scales each output's direction to its
            # score with a `Multiply`; the others squash.
            self.assertIsInstance(
                capsules, keras.layers.Multiply
                if ROUTERS[router].outputs == "pose_score"
                else layers.Squash)
        else:
            self.assertIs(router_layer, capsules)
            self.assertNotIn(roles.ROUTING, _layer_names(model))


class OtherModelRolesTest(TestCase):
    @parameterized.named_parameters(*((name, name)
                                      for name in _NON_CAPSULE_MODELS))
    def test_router_and_scores(self, name):
        build, router_name, scores_name = _NON_CAPSULE_MODELS[name]
        model = build()
        self.assertEqual(roles.router_layer(model).name, router_name)
        self.assertEqual(roles.class_scores_layer(model).name, scores_name)
        self.assertEqual(roles.class_scores_layer(model).output.shape[-1],
                         model.output_shape[-1])
        capsule_only = {roles.CLASS_CAPSULES, roles.LENGTH,
                        *_DECODER_ROLES}
        self.assertFalse(_layer_names(model) & capsule_only)

    def test_cnn_baseline(self):
        model = applications.CNNBaseline("mnist", input_shape=_SHAPE,
                                         compile=False)
        roles.require_roles(model, (roles.IMAGE, roles.INPUT_SCALING),
                            "The test")
        self.assertEqual(roles.class_scores_layer(model).name,
                         roles.PROBABILITIES)
        with self.assertRaisesRegex(
                ValueError, r"no layer for the router role.*'routing'.*"
                r"Received: a model named 'cnn_baseline' with layers "
                r"\['image', "):
            roles.router_layer(model)


class RoleErrorsTest(TestCase):
    def setUp(self):
        super().setUp()
        self.model = applications.EfficientCapsNet(
            "mnist", input_shape=_SHAPE, reconstruction=False,
            compile=False)

    def test_missing_role_names_role_model_and_layers(self):
        with self.assertRaisesRegex(
                ValueError, r"no layer for the 'decoder' role\. Received: a "
                r"model named 'efficient_capsnet' with layers \['image', "
                r"'input_scaling', .*'digit_caps', 'length'\]"):
            roles.role_layer(self.model, roles.DECODER)

    def test_require_roles_lists_what_is_missing(self):
        with self.assertRaisesRegex(
                ValueError, r"^Plotting needs a model with layers named "
                r"\['decoder', 'length', 'mask'\]\. Missing: \['decoder', "
                r"'mask'\]\. Received: a model named 'efficient_capsnet' "
                r"with layers \['image', "):
            roles.require_roles(
                self.model, (roles.LENGTH, roles.MASK, roles.DECODER),
                "Plotting")

    def test_unknown_role(self):
        with self.assertRaisesRegex(ValueError,
                                    r"Unknown `role`.*role='conv_1'"):
            roles.role_layer(self.model, "conv_1")
        with self.assertRaisesRegex(ValueError,
                                    r"Unknown role.*roles=\['caps'\]"):
            roles.require_roles(self.model, ("caps", roles.LENGTH), "A")

    def test_not_a_model(self):
        for helper in (roles.router_layer, roles.class_scores_layer,
                       roles.image_input):
            with self.assertRaisesRegex(TypeError, "`model`.*keras.Model"):
                helper("efficient_capsnet")
        with self.assertRaisesRegex(TypeError, "`model`"):
            roles.role_layer(None, roles.LENGTH)

    def test_class_scores_missing(self):
        inputs = keras.Input((4,), name="image")
        model = keras.Model(inputs, keras.layers.Dense(2)(inputs),
                            name="plain")
        with self.assertRaisesRegex(
                ValueError, r"no layer for the class-scores role: expected "
                r"a layer named one of \['length', 'logits', "
                r"'probabilities'\]\. Received: a model named 'plain'"):
            roles.class_scores_layer(model)

    def test_role_names_are_the_saved_layer_names(self):
        # Saved .keras files, exports and the official weights use these.
        self.assertEqual(
            (roles.IMAGE, roles.LABEL, roles.INPUT_SCALING,
             roles.CLASS_CAPSULES, roles.ROUTING, roles.CAPSULE_ROUTING,
             roles.CLASS_ROUTING, roles.LENGTH, roles.LOGITS,
             roles.PROBABILITIES, roles.MASK, roles.DECODER,
             roles.RECONSTRUCTION),
            ("image", "label", "input_scaling", "digit_caps", "routing",
             "capsule_routing", "class_routing", "length", "logits",
             "probabilities", "mask", "decoder", "reconstruction"))
