"""MultiMNIST generated on the fly from MNIST, on `tf.data`.

The dataset of Sabour et al. 2017, "Dynamic Routing Between Capsules"
(Section 6.1), as `multi_mnist_pairs` describes it (the checks, the digit
pool, shifting and merging, written once), run by the `tf_data_ops`
executor with pairs drawn by stateless ops. Unlike the official code of
Mazzia et al. 2021, training partners always come from another class (it
only rejects a pixel-identical partner, so about 10 % of its pairs share a
class) and the validation and test pairs are seeded.
"""

import tensorflow as tf

from keras_caps.datasets import holdout
from keras_caps.datasets import multi_mnist_pairs as pairs
from keras_caps.datasets import pipeline
from keras_caps.datasets import sources
from keras_caps.datasets import tf_data_ops


def load(split, *, batch_size, training=None, data_dir=None, seed=42,
         validation="holdout", reconstruction=True, shuffle_buffer_size=None,
         shift=6, partners_per_digit=1000, pairs_per_epoch=None,
         download=True):
    """MultiMNIST batches: pairs of shifted digits of different classes.

    Each example overlays two MNIST digits of **different classes**. Each
    digit is zero-padded by 4 to 36 x 36 and translated (zero fill) by
    integer shifts uniform in [-shift, shift] per axis; the pair merges as
    `clip(a + b, 0, 255)`.

    With `reconstruction=True` the dataset yields
    `({"image": merged, "label": labels},
      {"length": multi_hot, "reconstruction": digits})`, otherwise
    `(merged, multi_hot)`:

    - `merged`: float32 `(batch, 36, 36, 1)`, raw pixels in [0, 255].
    - `labels`: float32 `(batch, 2, 10)`, the one-hot labels of the first
      and the second digit, in that order.
    - `multi_hot`: float32 `(batch, 10)`, their sum (two distinct ones).
    - `digits`: float32 `(batch, 2, 36, 36, 1)`, the two shifted digits
      scaled to [0, 1] (`a / 255`, `b / 255`); their sum, times 255 and
      clipped to [0, 255], is `merged`.

    Digit pools: `"train"` uses the training digits (54,000 under
    `validation="holdout"`, all 60,000 under `"test"`); `"validation"` the
    6,000 held-out digits (holdout) or the 10,000 test digits (`"test"`);
    `"test"` always the 10,000 test digits.

    - **Training** (default for `"train"`): `pairs_per_epoch // batch_size`
      batches per epoch of fresh pairs: the first digit uniform over the
      pool, the second uniform over the pool's digits of other classes,
      shifts uniform. Each batch is drawn by stateless ops from a per-batch
      seed, the seeds from `tf.data.Dataset.random(seed,
      rerandomize_each_iteration=True)`: new pairs every epoch, the whole
      sequence fixed by `seed`.
    - **Evaluation** (`training=False`): a fixed, seeded set, the same in
      every epoch and on every call. `"test"`: for each pool digit (the
      base, shifted once) `partners_per_digit` partners drawn without
      replacement from the digits of other classes, each shifted on its
      own; pairs come base by base (10,000 x 1,000 = 10M by default).
      `"validation"` and `"train"`: one such partner per digit. Pairs are
      computed statelessly from `(seed, base index)`; nothing is stored.
      The stream differs from the official NumPy one.

    Data: MNIST, from the IDX files in `data_dir` (or
    `$KERAS_CAPS_DATA_DIR`) or the TFDS `mnist`, downloaded on first use
    unless `download=False`.

    Args:
        split: str. `"train"`, `"validation"` or `"test"`.
        batch_size: int. The global batch size.
        training: bool or `None`. Random pairs (`True`) or the fixed set.
            Defaults to `split == "train"`.
        data_dir: str or `None`. Folder of MNIST's IDX files.
        seed: int. Seeds the holdout and every pair. Defaults to `42`.
        validation: str. `"holdout"` or `"test"`. Defaults to `"holdout"`.
        reconstruction: bool. Defaults to `True`.
        shuffle_buffer_size: Unused (pairs are drawn at random); accepted
            for a uniform signature.
        shift: int. Largest shift per axis, `6` (official) or `4` (Sabour).
            Defaults to `6`.
        partners_per_digit: int. Partners of each base digit in the test
            set. Defaults to `1000`.
        pairs_per_epoch: int or `None`. Training pairs per epoch. Defaults
            to 10 x the number of pool digits (540,000 under holdout).
        download: bool. Let TFDS download and prepare a dataset that is
            not prepared yet (see `keras_caps.datasets.sources.load_tfds`).
            Defaults to `True`; `False` reads prepared data only.

    Returns:
        A `tf.data.Dataset` with known cardinality.

    Example:

    >>> ds = keras_caps.datasets.multi_mnist.load(  # doctest: +SKIP
    ...     "test", batch_size=100, partners_per_digit=10)
    >>> ds.element_spec[1]["reconstruction"].shape  # doctest: +SKIP
    TensorShape([None, 2, 36, 36, 1])
    """
    training = pipeline.check_arguments(split, batch_size, training,
                                        validation, seed,
                                        shuffle_buffer_size)
    pairs.check_options(shift, partners_per_digit, pairs_per_epoch)
    arrays = sources.load_image_arrays("mnist", data_dir, download)
    images, labels = holdout.select_split(arrays, split, validation, seed)
    pool = _Pool(images, labels, shift)
    plan = pairs.plan_split(split, training=training, pool=pool.digits,
                            batch_size=batch_size,
                            partners_per_digit=partners_per_digit,
                            pairs_per_epoch=pairs_per_epoch)
    if plan.training:
        seeds = pipeline.batch_seeds(seed + pairs.TRAINING_SALT).take(
            plan.num_batches)
        dataset = seeds.map(pool.random_pairs(batch_size),
                            num_parallel_calls=tf.data.AUTOTUNE)
    else:
        dataset = tf.data.Dataset.range(pool.size).map(
            pool.fixed_pairs(plan.partners, [seed, plan.salt]),
            num_parallel_calls=tf.data.AUTOTUNE)
        dataset = dataset.unbatch().apply(tf.data.experimental
                                          .assert_cardinality(
                                              pool.size * plan.partners))
        dataset = dataset.batch(batch_size,
                                num_parallel_calls=tf.data.AUTOTUNE)

    def format_batch(merged, labels, digits):
        return pairs.format_batch(merged, labels, digits, reconstruction,
                                  tf_data_ops)

    dataset = dataset.map(format_batch, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


class _Pool:
    """The digits pairs are drawn from (a `pairs.DigitPool` of their labels
    and the images as a constant tensor), and the stateless draws of
    pairs."""

    def __init__(self, images, labels, shift):
        self.digits = pairs.DigitPool(labels)
        self.size = self.digits.size
        self.shift = shift
        self.images = tf.constant(images, tf.uint8)
        self.labels = tf.constant(self.digits.labels)
        self.counts = tf.constant(self.digits.counts)

    def random_pairs(self, batch_size):
        """A function of a stateless seed giving one batch of random pairs."""

        def generate(seed):
            first_seed, second_seed, shift_seed = tf.unstack(
                tf.random.experimental.stateless_split(seed, num=3))
            first = self._uniform_index(first_seed, [batch_size], self.size)
            second = self._other_class(first, second_seed)
            shifts = self._shifts(shift_seed, [batch_size, 2, 2])
            return self._merge(first, second, shifts)

        return generate

    def fixed_pairs(self, partners, seed):
        """A function of a base index giving its `partners` fixed pairs."""
        seed = tf.constant(seed, tf.int64)

        def generate(base):
            base_seed = tf.random.experimental.stateless_fold_in(seed, base)
            partner_seed, base_shift_seed, shift_seed = tf.unstack(
                tf.random.experimental.stateless_split(base_seed, num=3))
            label = tf.gather(self.labels, base)
            num_others = self.size - tf.gather(self.counts, label)
            scores = tf.random.stateless_uniform([num_others], partner_seed)
            # The top `partners` of uniform scores: a uniform draw without
            # replacement, in random order.
            positions = tf.math.top_k(scores, k=partners).indices
            second = self.digits.skip_class(
                tf.cast(positions, tf.int64), tf.fill([partners], label),
                tf_data_ops)
            first = tf.fill([partners], base)
            base_shift = self._shifts(base_shift_seed, [1, 1, 2])
            partner_shifts = self._shifts(shift_seed, [partners, 1, 2])
            shifts = tf.concat(
                [tf.tile(base_shift, [partners, 1, 1]), partner_shifts],
                axis=1)
            return self._merge(first, second, shifts)

        return generate

    def _uniform_index(self, seed, shape, maxval):
        draws = tf.random.stateless_uniform(shape, seed, dtype=tf.float64)
        maxval = tf.cast(maxval, tf.float64)
        index = tf.minimum(tf.floor(draws * maxval), maxval - 1.0)
        return tf.cast(index, tf.int64)

    def _other_class(self, first, seed):
        label = tf.gather(self.labels, first)
        num_others = self.size - tf.gather(self.counts, label)
        positions = self._uniform_index(seed, tf.shape(first), num_others)
        return self.digits.skip_class(positions, label, tf_data_ops)

    def _shifts(self, seed, shape):
        return tf.random.stateless_uniform(
            shape, seed, minval=-self.shift, maxval=self.shift + 1,
            dtype=tf.int32)

    def _merge(self, first, second, shifts):
        """`(merged, labels, digits)` of pairs; shifts `(n, 2, 2)`."""
        shifted = [pairs.shift_digits(tf.gather(self.images, indices),
                                      shifts[:, slot], self.shift,
                                      tf_data_ops)
                   for slot, indices in enumerate((first, second))]
        return pairs.merge_pairs(*shifted, tf.gather(self.labels, first),
                                 tf.gather(self.labels, second), tf_data_ops)
