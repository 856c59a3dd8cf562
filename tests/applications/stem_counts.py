"""Parameter counts of the shared Efficient-CapsNet stem, by hand.

Counted from the layer shapes, for the tests of every model built on the
stem (`CapsuleClassifier`, `CNNBaseline`, the CNN ladder).
"""


def conv(kernel, channels_in, filters):
    """A `kernel` x `kernel` convolution with biases."""
    return kernel * kernel * channels_in * filters + filters


def dense(units_in, units_out):
    """A dense layer with biases."""
    return units_in * units_out + units_out


# MNIST stem: four convolutions (5x5x1x32, 3x3x32x64, 3x3x64x64,
# 3x3x64x128, with biases), each followed by a normalisation with a gamma
# and a beta per channel (BatchNorm's trainable weights, or GroupNorm's):
# 130,688.
STEM = (conv(5, 1, 32) + conv(3, 32, 64) + conv(3, 64, 64)
        + conv(3, 64, 128) + 2 * (32 + 64 + 64 + 128))
# The primary capsules' window: one depthwise filter and a bias per
# channel over the whole last map. 16x16 -> 12 -> 10 -> 8 -> 3x3x128;
# 28x28 -> 9x9x128; 40x40 -> 15x15x128.
WINDOW = {16: 3 * 3 * 128 + 128, 28: 9 * 9 * 128 + 128,
          40: 15 * 15 * 128 + 128}
