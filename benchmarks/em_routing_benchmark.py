"""EM routing's training step at the smallNORB sizes, side by side.

The two convolutional capsule layers of Hinton, Sabour & Frosst's smallNORB
model (ICLR 2018, Section 5): a 32x32 crop, a 5x5 convolution of stride 2
gives a 14x14 grid of B = 32 primary capsule types; ConvCaps1 (K = 3,
stride 2, C = 32) routes it to 6x6x32 and ConvCaps2 (K = 3, stride 1,
D = 32) to 4x4x32, 3 EM iterations each. One training step (forward,
backward to the inputs and every weight) at batch 32, in one TensorFlow
process, of:

- **ours**: two `keras_caps.layers.ConvMatrixCaps`: each parent sees its
  window's children; the E-step normalises a child's assignments over every
  parent that reaches it, across windows (a fold of the per-window sums
  back onto the child grid);
- **peer**: a faithful Keras re-implementation of the structure of
  www0wwwjs1/Matrix-Capsules-EM-Tensorflow (`capsnet_em.py`: `kernel_tile`,
  `mat_transform`, `em_routing`), one of the two most used public ports
  (with yl-1993/Matrix-Capsules-EM-PyTorch, whose structure is the same):
  the windows are unfolded by a depthwise convolution with a one-hot
  filter into `batch * H' * W'` independent routing problems of `K * K * B`
  children; the transforms are tiled over them and the poses over the
  parents before one batched matrix product; each window is routed by its
  own dense EM (assignments normalised over the window's parents only, no
  cross-window E-step), with the port's numerics (its log-density shift,
  its softmax activations in the early iterations).

Both layers compute the same shapes and the same number of votes; the
peer does not normalise across windows (less work than ours). Printed: the
median and minimum step time and the TF CPU allocator's peak memory above
the start of a step, and the peer / ours ratios (above 1: ours is faster
or smaller).

With `--whole-model`, instead: the whole smallNORB model,
`keras_caps.applications.MatrixCapsNet("smallnorb")` (convolution, primary
capsules, ConvCaps1, ConvCaps2, class capsules; compiled with its Adam and
spread loss), one `train_on_batch` step per timing on random 32x32 images
and labels: the median and minimum step time and the allocator's peak
during one step (no peer: the ports are not built as whole models here).

    python -m benchmarks.em_routing_benchmark [--batch 32] [--steps 5]
    python -m benchmarks.em_routing_benchmark --whole-model --batch 32
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

from benchmarks.side_by_side import make_step  # noqa: E402
from benchmarks.side_by_side import peak_memory_mib  # noqa: E402
from benchmarks.side_by_side import time_steps  # noqa: E402
from keras_caps.applications import MatrixCapsNet  # noqa: E402
from keras_caps.layers import ConvMatrixCaps  # noqa: E402

# (kernel, stride, parent types) of ConvCaps1 and ConvCaps2 (Section 5).
LAYERS = ((3, 2, 32), (3, 1, 32))
GRID, TYPES = 14, 32  # the primary capsules of a 32x32 crop


class PortConvCaps(keras.layers.Layer):
    """One convolutional EM layer with the port's structure (see above)."""

    def __init__(self, parents, kernel, stride, iterations=3, epsilon=1e-9,
                 final_lambda=0.01, **kwargs):
        super().__init__(**kwargs)
        self.parents, self.kernel, self.stride = parents, kernel, stride
        self.iterations, self.epsilon = iterations, epsilon
        self.final_lambda = final_lambda

    def build(self, input_shape):
        _, _, _, types, _ = input_shape
        children = self.kernel * self.kernel * types
        # The port's `kernel_tile` filter: a one-hot per kernel offset.
        tile = np.zeros((self.kernel, self.kernel, types * 17,
                         self.kernel ** 2), "float32")
        for i in range(self.kernel):
            for j in range(self.kernel):
                tile[i, j, :, i * self.kernel + j] = 1.0
        self.tile = tile
        self.w = self.add_weight(name="w", shape=(1, children, self.parents,
                                                  4, 4),
                                 initializer="truncated_normal")
        self.beta_v = self.add_weight(name="beta_v",
                                      shape=(self.parents, 16),
                                      initializer="zeros")
        self.beta_a = self.add_weight(name="beta_a", shape=(self.parents,),
                                      initializer="zeros")

    def call(self, inputs):
        batch, height, width, types, _ = inputs.shape
        grid = ops.reshape(inputs, (-1, height, width, types * 17))
        # kernel_tile: (b, H', W', B * 17 * K * K) -> (b H' W', K K B, 17)
        tiled = ops.depthwise_conv(grid, self.tile, strides=self.stride,
                                   padding="valid")
        out_h, out_w = tiled.shape[1:3]
        tiled = ops.reshape(tiled, (-1, out_h, out_w, types * 17,
                                    self.kernel ** 2))
        tiled = ops.transpose(tiled, (0, 1, 2, 4, 3))
        windows = ops.reshape(tiled, (-1, self.kernel ** 2 * types, 17))
        activation = windows[:, :, 16:]  # (b H' W', N, 1)
        votes = self._mat_transform(windows[:, :, :16])
        means, activations = self._em_routing(votes, activation)
        poses = ops.reshape(means, (-1, out_h, out_w, self.parents, 16))
        activations = ops.reshape(activations,
                                  (-1, out_h, out_w, self.parents, 1))
        return ops.concatenate([poses, activations], -1)

    def _mat_transform(self, poses):
        """mat_transform: tile W over the windows, poses over the parents."""
        windows, children = ops.shape(poses)[0], poses.shape[1]
        poses = ops.reshape(poses, (-1, children, 1, 4, 4))
        w = ops.tile(self.w, (windows, 1, 1, 1, 1))
        poses = ops.tile(poses, (1, 1, self.parents, 1, 1))
        return ops.reshape(ops.matmul(poses, w),
                           (-1, children, self.parents, 16))

    def _em_routing(self, votes, activation):
        """The port's `em_routing`, one dense problem per window."""
        windows, children = ops.shape(votes)[0], votes.shape[1]
        r = ops.ones((windows, children, self.parents)) / self.parents
        miu = sigma_square = activation_out = None  # set by the M-steps
        for iteration in range(self.iterations):
            if iteration > 0:
                log_p_h = -ops.log(ops.sqrt(sigma_square)) - (
                    ops.square(votes - miu) / (2 * sigma_square))
                log_p_h = log_p_h - (ops.max(log_p_h, axis=(2, 3),
                                             keepdims=True) - np.log(10.0))
                p = ops.exp(ops.sum(log_p_h, axis=3))
                ap = p * ops.expand_dims(activation_out, 1)
                r = ap / (ops.sum(ap, axis=2, keepdims=True) + self.epsilon)
            r = r * activation
            r = r / (ops.sum(r, axis=2, keepdims=True) + self.epsilon)
            r_sum = ops.sum(r, axis=1, keepdims=True)  # (w, 1, C)
            r1 = ops.expand_dims(r / (r_sum + self.epsilon), -1)
            miu = ops.sum(votes * r1, axis=1, keepdims=True)
            sigma_square = ops.sum(ops.square(votes - miu) * r1, axis=1,
                                   keepdims=True) + self.epsilon
            if iteration == self.iterations - 1:
                cost_h = (self.beta_v + ops.log(ops.sqrt(ops.reshape(
                    sigma_square, (-1, self.parents, 16))))) * ops.reshape(
                        r_sum, (-1, self.parents, 1))
                activation_out = ops.softmax(self.final_lambda * (
                    self.beta_a - ops.sum(cost_h, axis=2)))
            else:
                activation_out = ops.softmax(ops.reshape(
                    r_sum, (-1, self.parents)))
        return ops.reshape(miu, (-1, self.parents, 16)), activation_out


def stack(layers):
    """The layers applied one after the other, as one Keras layer."""
    model = keras.Sequential(layers)
    return model


def compare_layers(args):
    """Times ours against the port's structure: ConvCaps1 + ConvCaps2."""
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(args.batch, GRID, GRID, TYPES, 17))
    inputs[..., 16] = rng.uniform(size=(args.batch, GRID, GRID, TYPES))
    inputs = ops.convert_to_tensor(inputs.astype("float32"))
    ours = stack([ConvMatrixCaps(c, kernel_size=k, strides=s)
                  for k, s, c in LAYERS])
    peer = stack([PortConvCaps(c, k, s) for k, s, c in LAYERS])
    for model in (ours, peer):
        model.build(inputs.shape)
        model(inputs)
    steps = {"ours": make_step(ours), "peer": make_step(peer)}
    memory = {name: peak_memory_mib(step, inputs)
              for name, step in steps.items()}
    times = time_steps(steps, inputs, args.warmup, args.steps)
    print(f"EM routing training step, ConvCaps1 + ConvCaps2 of the "
          f"smallNORB model, batch {args.batch}, {args.steps} steps "
          f"(TensorFlow, {os.cpu_count()} CPUs):")
    for name in steps:
        median, minimum = times[name]
        print(f"  {name}: median {median:.0f} ms (min {minimum:.0f} ms), "
              f"peak memory {memory[name]:.0f} MiB")
    print(f"  peer / ours: {times['peer'][0] / times['ours'][0]:.2f}x "
          f"step time, {memory['peer'] / memory['ours']:.2f}x memory")


def whole_model(args):
    """Times `MatrixCapsNet("smallnorb")`'s training step and its peak."""
    model = MatrixCapsNet("smallnorb")
    rng = np.random.default_rng(0)
    images = rng.uniform(0.0, 255.0, size=(args.batch, *model.input_shape[
        1:])).astype("float32")
    labels = np.eye(model.output_shape[-1], dtype="float32")[
        rng.integers(model.output_shape[-1], size=args.batch)]

    def step(batch):
        # `(value, gradients)` as `side_by_side.sync` waits for them; the
        # optimizer has applied the gradients when `train_on_batch` returns.
        return tf.constant(model.train_on_batch(*batch)), []

    batch = (images, labels)
    step(batch)  # Traces the step.
    peak = peak_memory_mib(step, batch)
    median, minimum = time_steps({"model": step}, batch, args.warmup,
                                 args.steps)["model"]
    print(f"MatrixCapsNet('smallnorb') training step (train_on_batch: "
          f"forward, spread loss, backward, Adam), batch {args.batch}, "
          f"{args.steps} steps (TensorFlow, {os.cpu_count()} CPUs):")
    print(f"  median {median:.0f} ms (min {minimum:.0f} ms), peak memory "
          f"{peak:.0f} MiB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--whole-model", action="store_true",
                        help="the whole smallNORB model's step, alone")
    args = parser.parse_args()
    if args.whole_model:
        whole_model(args)
    else:
        compare_layers(args)


if __name__ == "__main__":
    main()
