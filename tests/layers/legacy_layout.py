"""A router as loaded from a file saved before the unified couplings."""

import keras
import numpy as np


def legacy_twin(test, layer, inputs):
    """`layer`'s legacy copy, and the couplings of both on `inputs`.

    The copy comes from `layer`'s config without `couplings_layout` (as in
    a file saved before it), with the same weights; its outputs must equal
    `layer`'s and its call must warn. Returns `(legacy_layer, couplings,
    legacy_couplings)`, the couplings as NumPy arrays.
    """
    outputs, couplings = layer(inputs, return_couplings=True)
    config = layer.get_config()
    test.assertEqual(config.pop("couplings_layout"), "unified")
    legacy = type(layer).from_config(config)
    test.assertEqual(legacy.couplings_layout, "legacy")
    legacy.build(inputs.shape)
    legacy.set_weights(layer.get_weights())
    with test.assertWarnsRegex(DeprecationWarning, "old layout"):
        legacy_outputs, legacy_couplings = legacy(inputs,
                                                  return_couplings=True)
    to_numpy = keras.ops.convert_to_numpy
    np.testing.assert_array_equal(to_numpy(legacy_outputs),
                                  to_numpy(outputs))
    return legacy, to_numpy(couplings), to_numpy(legacy_couplings)
