"""Checks of a layer's `*_regularizer` and `*_constraint` arguments."""

import functools

import keras
import numpy as np

# A distinct L2 factor per weight group, so that a regularizer applied to
# the wrong group changes the total.
_FACTORS = (0.01, 0.03, 0.07)


def check_regularizers_and_constraints(test, layer_cls, init_kwargs,
                                       input_data, weights):
    """Checks the regularizers and constraints of the groups in `weights`.

    `weights` maps each argument prefix (e.g. `"kernel"`) to the paths of
    the variables it governs (e.g. `["kernel"]`, `["conv.kernel"]`).

    - Each variable gets one L2 loss in `layer.losses`, equal to
      `factor * sum(w ** 2)` computed with NumPy.
    - After one SGD step with `NonNeg` constraints, every governed
      variable, set beforehand to values of both signs, is non-negative.
    - The config round trip keeps both; the defaults serialize as `None`
      and a config without the keys (saved before they existed) loads.
    - Bad values raise a `ValueError` naming the argument.
    """
    factors = dict(zip(weights, _FACTORS))
    regularized = layer_cls(**init_kwargs, **{
        f"{prefix}_regularizer": keras.regularizers.L2(factor)
        for prefix, factor in factors.items()})
    regularized(input_data)
    expected = [
        factors[prefix] * np.sum(np.square(
            keras.ops.convert_to_numpy(_variable(regularized, path))
            .astype("float64")))
        for prefix, paths in weights.items() for path in paths]
    losses = [float(keras.ops.convert_to_numpy(loss))
              for loss in regularized.losses]
    test.assertAllClose(sorted(losses), sorted(expected), rtol=1e-5)

    constrained = layer_cls(**init_kwargs, **{
        f"{prefix}_constraint": keras.constraints.NonNeg()
        for prefix in weights})
    inputs = keras.Input(input_data.shape[1:])
    model = keras.Model(inputs, constrained(inputs))
    rng = np.random.default_rng(0)
    paths = [path for group in weights.values() for path in group]
    for path in paths:
        variable = _variable(constrained, path)
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    targets = rng.normal(size=model.output.shape[1:])
    model.train_on_batch(input_data, np.broadcast_to(
        targets, (len(input_data),) + targets.shape))
    for path in paths:
        values = keras.ops.convert_to_numpy(_variable(constrained, path))
        test.assertGreaterEqual(values.min(), 0.0, path)

    config = regularized.get_config()
    revived = layer_cls.from_config(config)
    for prefix, factor in factors.items():
        regularizer = getattr(revived, f"{prefix}_regularizer")
        test.assertIsInstance(regularizer, keras.regularizers.L2)
        test.assertAllClose(regularizer.l2, factor)
    revived = layer_cls.from_config(constrained.get_config())
    for prefix in weights:
        test.assertIsInstance(getattr(revived, f"{prefix}_constraint"),
                              keras.constraints.NonNeg)

    default = layer_cls(**init_kwargs)
    config = default.get_config()
    for prefix in weights:
        for kind in ("regularizer", "constraint"):
            test.assertIsNone(config.pop(f"{prefix}_{kind}"))
    old = layer_cls.from_config(config)
    old(input_data)
    test.assertEqual(old.losses, [])

    for prefix in weights:
        for kind, bad in (("regularizer", "not_a_regularizer"),
                          ("constraint", 3)):
            argument = f"{prefix}_{kind}"
            with test.assertRaisesRegex(
                    ValueError, f"`{argument}`.*Received: {argument}="):
                layer_cls(**init_kwargs, **{argument: bad})


def _variable(layer, path):
    return functools.reduce(getattr, path.split("."), layer)
