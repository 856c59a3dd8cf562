"""Shared test helpers, in the spirit of Keras' own `run_layer_test`.

Written in this repository (it never imports `keras.src`) and shipped with
the package, so users can test layers of their own the same way:

```python
from keras_caps.testing import TestCase

class MyLayerTest(TestCase):
    def test_layer(self):
        self.run_layer_test(MyLayer, {"units": 3}, input_shape=(2, 4),
                            expected_output_shape=(2, 3),
                            expected_num_trainable_weights=2)
```
"""

import inspect
import json
import os
import tempfile

import keras
import numpy as np
from absl.testing import parameterized
from keras import ops

_MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")


class TestCase(parameterized.TestCase):
    """`absltest`/`pytest` test case with capsule-layer test helpers.

    Each test ends with `keras.backend.clear_session`; every
    `FULL_COLLECTION_EVERY`-th one also runs Python's full garbage
    collection, which costs about 0.2 s with TensorFlow loaded: run after
    every test it was most of a small test's time.
    """

    #: Tests between two full garbage collections (memory stays bounded).
    FULL_COLLECTION_EVERY = 25
    _tests_since_collection = 0

    def setUp(self):
        super().setUp()
        keras.config.set_dtype_policy("float32")
        keras.utils.set_random_seed(1337)

    def tearDown(self):
        keras.config.set_dtype_policy("float32")
        TestCase._tests_since_collection += 1
        collect = (TestCase._tests_since_collection
                   >= self.FULL_COLLECTION_EVERY)
        if collect:
            TestCase._tests_since_collection = 0
        keras.backend.clear_session(free_memory=collect)
        super().tearDown()

    def get_temp_dir(self):
        temp_dir = tempfile.mkdtemp()
        self.addCleanup(lambda: _remove_tree(temp_dir))
        return temp_dir

    def assertAllClose(self, actual, expected, atol=1e-6, rtol=1e-6,
                       msg=None):
        np.testing.assert_allclose(
            _to_numpy(actual), _to_numpy(expected), atol=atol, rtol=rtol,
            err_msg=msg or "")

    def assertAllFinite(self, values, msg=None):
        for value in keras.tree.flatten(values):
            array = _to_numpy(value).astype("float32")
            self.assertTrue(np.all(np.isfinite(array)),
                            msg or f"non-finite values: {array}")

    # --- Serialization ---------------------------------------------------

    def run_serialization_test(self, instance):
        """Config and registry round trips, without `custom_objects`."""
        cls = instance.__class__
        config = instance.get_config()
        missing = [name for name in _init_argument_names(cls)
                   if name not in config]
        self.assertEqual(missing, [], "__init__ arguments missing from "
                         f"{cls.__name__}.get_config()")
        config_json = json.dumps(_jsonable(config), sort_keys=True)
        revived = cls.from_config(config)
        self.assertEqual(
            config_json,
            json.dumps(_jsonable(revived.get_config()), sort_keys=True))

        serialized = keras.saving.serialize_keras_object(instance)
        json.dumps(serialized)  # must be plain JSON
        revived = keras.saving.deserialize_keras_object(
            json.loads(json.dumps(serialized)))
        self.assertIs(type(revived), cls)
        self.assertEqual(
            config_json,
            json.dumps(_jsonable(revived.get_config()), sort_keys=True))
        self.assertEqual(
            keras.saving.get_registered_name(cls),
            f"keras_caps>{cls.__name__}")
        self.assertEqual(_public_attributes(instance),
                         _public_attributes(revived))
        return revived

    # --- Layers ----------------------------------------------------------

    def run_layer_test(self, layer_cls, init_kwargs, input_shape=None,
                       input_data=None, expected_output_shape=None,
                       expected_output=None,
                       expected_num_trainable_weights=None,
                       expected_num_non_trainable_weights=None,
                       expected_num_parameters=None, call_kwargs=None,
                       run_training_check=True, run_mixed_precision_check=True,
                       run_saving_check=True, run_zero_input_check=True,
                       atol=1e-6, rtol=1e-6):
        """Checks a layer end to end.

        In order: serialization; `build` and weight counts; a symbolic call
        with an unknown batch size agreeing with `compute_output_shape`; an
        eager call (optionally against `expected_output`) and a call at
        batch size 1; finite outputs and gradients for all-zero inputs; one
        `fit` step; `mixed_float16` and `mixed_bfloat16` passes with finite
        outputs and gradients (for the data and for all-zero inputs) and
        float32 weights; a `.keras` save and load
        of a functional wrapper with equal outputs.

        Args:
            layer_cls: The layer class.
            init_kwargs: dict of constructor arguments.
            input_shape: Shape (or list of shapes) including the batch size.
                Random data of this shape is used when `input_data` is not
                given.
            input_data: Array or list of arrays.
            expected_output_shape: Output shape for `input_data`.
            expected_output: Optional expected output values.
            expected_num_trainable_weights: int.
            expected_num_non_trainable_weights: int.
            expected_num_parameters: int. Number of scalars in the trainable
                weights (a routing temperature is not counted).
            call_kwargs: dict of extra keyword arguments for `call`.
            run_training_check: bool. Run one `fit` step.
            run_mixed_precision_check: bool. Run the mixed-precision passes.
            run_saving_check: bool. Run the `.keras` round trip.
            run_zero_input_check: bool. Check all-zero inputs.
            atol, rtol: Tolerances for `expected_output`.
        """
        if (input_shape is None) == (input_data is None):
            raise ValueError(
                "Pass exactly one of `input_shape` and `input_data`. Received: "
                f"input_shape={input_shape}, input_data={input_data}")
        if input_data is None:
            input_data = _random_data(input_shape)
        input_data = _map_inputs(
            lambda x: np.asarray(_to_numpy(x), dtype="float32"), input_data)
        call_kwargs = call_kwargs or {}

        self.run_serialization_test(layer_cls(**init_kwargs))
        self._run_build_check(
            layer_cls(**init_kwargs), input_data,
            expected_num_trainable_weights,
            expected_num_non_trainable_weights, expected_num_parameters)
        self._run_symbolic_call_check(layer_cls(**init_kwargs), input_data,
                                      call_kwargs, expected_output_shape)
        layer = layer_cls(**init_kwargs)
        self._run_eager_call_check(layer, input_data, call_kwargs,
                                   expected_output_shape, expected_output,
                                   atol, rtol)
        if run_zero_input_check:
            self._run_zero_input_check(layer, input_data, call_kwargs)
        if run_training_check:
            self._run_training_step(layer_cls, init_kwargs, input_data,
                                    call_kwargs)
        if run_mixed_precision_check:
            for policy in _MIXED_POLICIES:
                self._run_mixed_precision_pass(layer_cls, init_kwargs,
                                               input_data, call_kwargs,
                                               policy)
        if run_saving_check:
            model = _functional_wrapper(layer_cls(**init_kwargs), input_data,
                                        call_kwargs)
            self.run_model_saving_test(model, input_data)

    def _run_build_check(self, layer, input_data,
                         expected_num_trainable_weights,
                         expected_num_non_trainable_weights,
                         expected_num_parameters):
        """`build` at the data's shape and the expected weight counts."""
        layer.build(_map_inputs(lambda x: tuple(x.shape), input_data))
        self.assertTrue(layer.built)
        if expected_num_trainable_weights is not None:
            self.assertLen(layer.trainable_weights,
                           expected_num_trainable_weights)
        if expected_num_non_trainable_weights is not None:
            self.assertLen(layer.non_trainable_weights,
                           expected_num_non_trainable_weights)
        if expected_num_parameters is not None:
            num_parameters = sum(int(np.prod(weight.shape))
                                 for weight in layer.trainable_weights)
            self.assertEqual(num_parameters, expected_num_parameters)

    def _run_symbolic_call_check(self, layer, input_data, call_kwargs,
                                 expected_output_shape):
        """A symbolic call with an unknown batch size."""
        unknown_batch_shape = _map_inputs(
            lambda x: (None,) + tuple(x.shape[1:]), input_data)
        symbolic_inputs = _map_inputs(
            lambda x: keras.KerasTensor((None,) + tuple(x.shape[1:])),
            input_data)
        symbolic_outputs = layer(symbolic_inputs, **call_kwargs)
        self.assertEqual(tuple(symbolic_outputs.shape),
                         tuple(layer.compute_output_shape(
                             unknown_batch_shape)))
        if expected_output_shape is not None:
            self.assertEqual(tuple(symbolic_outputs.shape),
                             (None,) + tuple(expected_output_shape[1:]))

    def _run_eager_call_check(self, layer, input_data, call_kwargs,
                              expected_output_shape, expected_output, atol,
                              rtol):
        """Eager calls, at the data's batch size and at batch size 1."""
        outputs = layer(input_data, **call_kwargs)
        if expected_output_shape is not None:
            self.assertEqual(tuple(outputs.shape),
                             tuple(expected_output_shape))
        input_shape = _map_inputs(lambda x: tuple(x.shape), input_data)
        self.assertEqual(tuple(outputs.shape),
                         tuple(layer.compute_output_shape(input_shape)))
        if expected_output is not None:
            self.assertAllClose(outputs, expected_output, atol=atol,
                                rtol=rtol)
        first_example = _map_inputs(lambda x: x[:1], input_data)
        single = layer(first_example, **call_kwargs)
        self.assertEqual(tuple(single.shape)[0], 1)
        self.assertAllClose(single, _to_numpy(outputs)[:1], atol=1e-5,
                            rtol=1e-5)

    def _run_zero_input_check(self, layer, input_data, call_kwargs):
        """Finite outputs and gradients for all-zero inputs."""
        zeros = _map_inputs(np.zeros_like, input_data)
        outputs, gradients = value_and_gradients(layer, zeros, **call_kwargs)
        self.assertAllFinite(outputs, "outputs at all-zero inputs")
        self.assertAllFinite(gradients, "gradients at all-zero inputs")

    def _run_training_step(self, layer_cls, init_kwargs, input_data,
                           call_kwargs):
        model = _functional_wrapper(layer_cls(**init_kwargs), input_data,
                                    call_kwargs)
        if not model.trainable_weights:
            return  # Nothing to train; gradients are checked elsewhere.
        outputs = _to_numpy(model(input_data))
        targets = np.random.default_rng(0).uniform(size=outputs.shape)
        model.compile(optimizer="sgd", loss="mse", jit_compile="auto")
        history = model.fit(input_data, targets.astype("float32"),
                            batch_size=len(outputs), epochs=1, verbose=0)
        self.assertAllFinite(history.history["loss"], "training loss")
        self.assertAllFinite([_to_numpy(w) for w in model.weights],
                             "weights after one training step")

    def _run_mixed_precision_pass(self, layer_cls, init_kwargs, input_data,
                                  call_kwargs, policy):
        layer = layer_cls(**{**init_kwargs, "dtype": policy})
        outputs, gradients = value_and_gradients(layer, input_data,
                                                 **call_kwargs)
        self.assertEqual(
            keras.backend.standardize_dtype(outputs.dtype),
            keras.backend.standardize_dtype(layer.compute_dtype),
            f"output dtype under {policy}")
        spec = layer.compute_output_spec(
            _map_inputs(lambda x: keras.KerasTensor(x.shape, dtype=x.dtype),
                        input_data), **call_kwargs)
        self.assertEqual(keras.backend.standardize_dtype(spec.dtype),
                         keras.backend.standardize_dtype(outputs.dtype))
        for weight in layer.weights:
            self.assertEqual(keras.backend.standardize_dtype(weight.dtype),
                             "float32", f"{weight.path} under {policy}")
        self.assertAllFinite(outputs, f"outputs under {policy}")
        self.assertAllFinite(gradients, f"gradients under {policy}")
        zeros = _map_inputs(np.zeros_like, input_data)
        outputs, gradients = value_and_gradients(layer, zeros, **call_kwargs)
        self.assertAllFinite(outputs, f"outputs at zero inputs, {policy}")
        self.assertAllFinite(gradients, f"gradients at zero inputs, {policy}")

    # --- Models ----------------------------------------------------------

    def run_model_saving_test(self, model, input_data, atol=1e-6, rtol=1e-6):
        """`.keras` save and load without `custom_objects`; equal outputs."""
        expected = model(input_data)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
        self.assertIsInstance(restored, model.__class__)
        actual = restored(input_data)
        keras.tree.map_structure(
            lambda a, e: self.assertAllClose(a, e, atol=atol, rtol=rtol),
            actual, expected)
        return restored

    def run_loss_test(self, loss, y_true, y_pred):
        """Serialization, a finite value, and a compiled `.keras` round trip."""
        self.run_serialization_test(loss)
        value = _to_numpy(loss(y_true, y_pred))
        self.assertAllFinite(value, "loss value")
        num_classes = y_true.shape[-1]
        inputs = keras.Input((num_classes,))
        outputs = keras.layers.Dense(num_classes, activation="sigmoid",
                                     name="scores")(inputs)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="sgd", loss=loss)
        history = model.fit(y_pred, y_true, batch_size=len(y_true),
                            epochs=1, verbose=0)
        self.assertAllFinite(history.history["loss"])
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
        self.assertIs(type(restored.loss), type(loss))
        self.assertEqual(restored.loss.get_config(), loss.get_config())


def value_and_gradients(layer, inputs, **call_kwargs):
    """Outputs of `layer(inputs)` and the gradients of their sum.

    Gradients are taken with respect to the inputs and to the layer's
    trainable weights with the backend's own autodiff, so this works on the
    TensorFlow, JAX and PyTorch backends.

    Returns:
        `(outputs, gradients)`, where gradients is a list of NumPy arrays:
        one per input, then one per trainable weight.
    """
    if not layer.built:
        layer(inputs, **call_kwargs)
    is_list = isinstance(inputs, (list, tuple))
    input_list = list(inputs) if is_list else [inputs]
    num_inputs = len(input_list)
    trainable = [v.value for v in layer.trainable_variables]
    non_trainable_mapping = [(v, v.value)
                             for v in layer.non_trainable_variables]

    def forward(*values):
        structured = list(values[:num_inputs]) if is_list else values[0]
        mapping = list(zip(layer.trainable_variables, values[num_inputs:]))
        # A stateless scope runs the real `__call__` (input autocasting and
        # mixed-precision variable casts included) on traced weight values.
        with keras.StatelessScope(
                state_mapping=mapping + non_trainable_mapping):
            return layer(structured, **call_kwargs)

    return function_gradients(forward, *input_list, *trainable)


def function_gradients(fn, *args):
    """`fn(*args)` and the gradients of its sum with respect to each arg.

    Works on the TensorFlow, JAX and PyTorch backends. The sum is taken in
    float32, so half-precision outputs are differentiated exactly.

    Returns:
        `(outputs, gradients)`, gradients a list of NumPy arrays.

    Example:

    >>> outputs, (grad,) = function_gradients(keras.ops.square, np.ones(2))
    >>> grad.tolist()
    [2.0, 2.0]
    """
    args = [ops.convert_to_tensor(x) for x in args]

    def total_and_outputs(*values):
        outputs = fn(*values)
        return ops.sum(ops.cast(outputs, "float32")), outputs

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(args)
            total, outputs = total_and_outputs(*args)
        gradients = tape.gradient(total, args)
    elif backend == "jax":
        import jax

        # Compiled: op-by-op differentiation of a routing layer dispatches
        # thousands of tiny XLA computations, several times slower.
        (_, outputs), gradients = jax.jit(jax.value_and_grad(
            total_and_outputs, argnums=tuple(range(len(args))),
            has_aux=True))(*args)
    elif backend == "torch":
        import torch

        leaves = [x.detach().clone().requires_grad_(True) for x in args]
        total, outputs = total_and_outputs(*leaves)
        gradients = torch.autograd.grad(total, leaves, allow_unused=True)
    else:
        raise ValueError(
            "Gradients are supported on the tensorflow, jax and torch "
            f"backends. Received: backend={backend!r}")
    gradients = [np.zeros(1) if g is None else _to_numpy(g)
                 for g in gradients]
    return outputs, gradients


def _functional_wrapper(layer, input_data, call_kwargs):
    inputs = _map_inputs(lambda x: keras.Input(x.shape[1:]), input_data)
    return keras.Model(inputs, layer(inputs, **call_kwargs))


def _map_inputs(fn, inputs):
    """Applies `fn` to a single input or to each input of a list."""
    if isinstance(inputs, (list, tuple)):
        return [fn(x) for x in inputs]
    return fn(inputs)


def _random_data(input_shape):
    rng = np.random.default_rng(0)
    if isinstance(input_shape[0], (list, tuple)):
        return [rng.normal(size=shape).astype("float32")
                for shape in input_shape]
    return rng.normal(size=input_shape).astype("float32")


def _to_numpy(x):
    if isinstance(x, (list, tuple)):
        return np.asarray([_to_numpy(item) for item in x])
    if hasattr(x, "dtype") and not isinstance(x, np.ndarray):
        x = ops.convert_to_numpy(ops.cast(x, "float32")
                                 if "bfloat16" in str(x.dtype) else x)
    return np.asarray(x)


def _jsonable(config):
    return json.loads(json.dumps(config, default=str))


def _init_argument_names(cls):
    parameters = inspect.signature(cls.__init__).parameters.values()
    return [p.name for p in parameters if p.name != "self" and p.kind in (
        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _public_attributes(instance):
    return {name for name in dir(instance) if not name.startswith("_")}


def _remove_tree(path):
    import shutil

    shutil.rmtree(path, ignore_errors=True)
