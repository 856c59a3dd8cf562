"""Writes `routers_before_contract.keras` and its outputs beside this file.

Run once with the code of commit ce1ff98, the last before the `Router`
base class and its unified couplings layout; `tests/legacy_models_test.py`
checks that later code loads the file and reproduces the outputs. The graph
holds every router of that code, both hybrid forms (then
`DynamicRouting(attention=...)`), a changed temperature, and couplings and
credit read inside the graph in the layouts of that time, so a saved model
that consumed them keeps working. Do not rerun it with newer code.
"""

import os

import keras
import numpy as np

from keras_caps import layers

FOLDER = os.path.dirname(os.path.abspath(__file__))


def every_router_model():
    children = keras.Input((6, 4), name="capsules")
    fc, fc_couplings = layers.FCCaps(3, 4, name="fc_caps")(
        children, return_couplings=True)  # couplings (b, 3, 6)
    dynamic, dynamic_couplings = layers.DynamicRouting(
        3, 4, num_iterations=2, temperature=0.5, name="dynamic")(
            children, return_couplings=True)  # (b, 3, 6)
    bilinear = layers.DynamicRouting(
        3, 4, attention="bilinear", attention_weight=0.4,
        name="hybrid_bilinear")(children)
    concat = layers.DynamicRouting(
        3, 4, attention="concat", attention_weight=-0.3, use_bias=True,
        name="hybrid_concat")(children)
    vector, credit = layers.VectorRouting(3, 4, name="vector")(
        children, return_couplings=True)  # credit (b, 6, 3)
    inverted, inverted_couplings = layers.InvertedAttentionRouting(
        3, 4, pose="vector", name="inverted")(
            children, return_couplings=True)  # (b, 3, 6)
    attention, attention_couplings = layers.AttentionRouting(
        3, 4, num_heads=2, key_dim=2, name="attention")(
            children, return_couplings=True)  # (b, 2, 6, 3)
    poses = keras.layers.Add(name="poses")(
        [fc, dynamic, bilinear, concat, vector, inverted, attention])
    transposed_credit = keras.layers.Permute((2, 1), name="credit_t")(credit)
    summed = keras.layers.Add(name="couplings")(
        [fc_couplings, dynamic_couplings, inverted_couplings,
         transposed_credit])  # (b, 3, 6): every layout of that time
    return keras.Model(children, {
        "poses": poses, "couplings": summed,
        "attention_couplings": attention_couplings})


def main():
    keras.utils.set_random_seed(0)
    model = every_router_model()
    for layer in model.layers:  # non-zero hybrid weights and biases
        for variable in layer.trainable_variables:
            if len(variable.shape) == 0:
                variable.assign(0.25 + float(variable.numpy()))
    inputs = np.random.default_rng(0).normal(size=(2, 6, 4)).astype(
        "float32")
    outputs = model.predict(inputs, verbose=0)
    model.save(os.path.join(FOLDER, "routers_before_contract.keras"))
    np.savez(os.path.join(FOLDER, "routers_before_contract.npz"),
             inputs=inputs, **outputs)


if __name__ == "__main__":
    main()
