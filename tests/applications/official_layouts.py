"""Official Efficient-CapsNet / CapsNet HDF5 weight files, written for tests.

The layouts are those of the official graphs (github.com/EscVM/
Efficient-CapsNet, `models/efficient_capsnet_graph_{mnist,multimnist}.py`
and `models/original_capsnet_graph_mnist.py`) as Keras 2 `save_weights`
stores them: one group per nested model (capsule network, `Generator`),
weights named `layer/weight:0`. `expected_*` give the values our models
must hold after loading such a file, written out by hand.
"""

import h5py
import numpy as np


def efficient_capsnet_layout(primary_kernel, image_size):
    """Efficient-CapsNet MNIST / MultiMNIST (official graph, Keras 2 names)."""
    network = []
    channels = [1, 32, 64, 64, 128]
    kernels = [5, 3, 3, 3]
    for index in range(4):
        conv = "conv2d" if index == 0 else f"conv2d_{index}"
        norm = ("batch_normalization" if index == 0
                else f"batch_normalization_{index}")
        filters = channels[index + 1]
        network.append((conv, [
            ("kernel", (kernels[index], kernels[index], channels[index],
                        filters)),
            ("bias", (filters,))]))
        network.append((norm, [(name, (filters,)) for name in (
            "gamma", "beta", "moving_mean", "moving_variance")]))
    network.append(("conv2d_4", [
        ("kernel", (primary_kernel, primary_kernel, 1, 128)),
        ("bias", (128,))]))
    network.append(("fc_caps", [("W", (10, 16, 8, 16)), ("b", (10, 16, 1))]))
    return ("Efficient_CapsNet", network), ("Generator", dense_generator(
        image_size))


def dense_generator(image_size):
    return [("dense", [("kernel", (160, 512)), ("bias", (512,))]),
            ("dense_1", [("kernel", (512, 1024)), ("bias", (1024,))]),
            ("dense_2", [("kernel", (1024, image_size)),
                         ("bias", (image_size,))])]


def original_capsnet_layout():
    network = [
        ("conv2d", [("kernel", (9, 9, 1, 256)), ("bias", (256,))]),
        ("primary_caps", [("kernel", (9, 9, 256, 256)),
                          ("biases", (32, 8))]),
        ("digit_caps", [("W", (1152, 8, 160)), ("biases", (10, 16))]),
    ]
    return ("Original_CapsNet", network), ("Generator", dense_generator(784))


LAYOUTS = {
    "mnist": efficient_capsnet_layout(9, 784),
    "multi_mnist": efficient_capsnet_layout(5, 1296),
    "capsnet": original_capsnet_layout(),
}


def known_weights(layout, seed):
    rng = np.random.default_rng(seed)
    values = {}
    for group, layers in layout:
        for layer, weights in layers:
            for name, shape in weights:
                value = rng.normal(0.0, 0.05, shape).astype("float32")
                if name == "moving_variance":
                    value = np.abs(value) + 0.5
                values[f"{group}/{layer}/{name}:0"] = value
    return values


def write_official_file(path, layout, values):
    """A Keras 2 `save_weights` HDF5 file: nested models as groups.

    As Keras 2 does, each nested model lists its trainable weights first
    and its non-trainable ones (batch-norm statistics) after them.
    """
    with h5py.File(path, "w") as file:
        groups = [group for group, _ in layout]
        file.attrs["layer_names"] = np.array(
            [b"input_1"] + [g.encode() for g in groups] + [b"mask"])
        file.attrs["backend"] = b"tensorflow"
        file.attrs["keras_version"] = b"2.4.0"
        for name in ("input_1", "mask"):
            file.create_group(name).attrs["weight_names"] = np.array([])
        for group_name, layers in layout:
            group = file.create_group(group_name)
            names = [f"{layer}/{name}:0" for layer, weights in layers
                     for name, _ in weights]
            trainable = [n for n in names if "moving_" not in n]
            statistics = [n for n in names if "moving_" in n]
            group.attrs["weight_names"] = np.array(
                [n.encode() for n in trainable + statistics])
            for name in names:
                group.create_dataset(name,
                                     data=values[f"{group_name}/{name}"])


def expected_efficient_capsnet(values, group="Efficient_CapsNet"):
    def file(name):
        return values[f"{group}/{name}:0"]

    expected = {}
    for index in range(4):
        conv = "conv2d" if index == 0 else f"conv2d_{index}"
        norm = ("batch_normalization" if index == 0
                else f"batch_normalization_{index}")
        expected[f"conv_{index + 1}/kernel"] = file(f"{conv}/kernel")
        expected[f"conv_{index + 1}/bias"] = file(f"{conv}/bias")
        for name in ("gamma", "beta", "moving_mean", "moving_variance"):
            expected[f"batch_norm_{index + 1}/{name}"] = file(
                f"{norm}/{name}")
    # Grouped (k, k, 1, C) -> depthwise (k, k, C, 1).
    expected["primary_caps/depthwise_conv/kernel"] = file(
        "conv2d_4/kernel")[:, :, 0, :, np.newaxis]
    expected["primary_caps/depthwise_conv/bias"] = file("conv2d_4/bias")
    expected["digit_caps/kernel"] = file("fc_caps/W")
    expected["digit_caps/prior"] = file("fc_caps/b")
    return expected


def expected_decoder(values):
    expected = {}
    for index, name in enumerate(("dense", "dense_1", "dense_2")):
        for weight in ("kernel", "bias"):
            expected[f"decoder/dense_{index + 1}/{weight}"] = values[
                f"Generator/{name}/{weight}:0"]
    return expected


def expected_capsnet(values):
    group = "Original_CapsNet"
    votes = values[f"{group}/digit_caps/W:0"]  # (h*w*type, 8, 10*16)
    ours = np.empty((1152, 8, 10, 16), "float32")
    for position in range(36):
        for capsule_type in range(32):
            # Official capsule (h, w, type) is our capsule (type, h, w).
            ours[capsule_type * 36 + position] = votes[
                position * 32 + capsule_type].reshape(8, 10, 16)
    return {
        "conv_1/kernel": values[f"{group}/conv2d/kernel:0"],
        "conv_1/bias": values[f"{group}/conv2d/bias:0"],
        "primary_caps/conv/kernel": values[f"{group}/primary_caps/kernel:0"],
        "primary_caps/bias": values[f"{group}/primary_caps/biases:0"],
        "digit_caps/kernel": ours,
        "digit_caps/bias": values[f"{group}/digit_caps/biases:0"],
    }
