"""A trained classifier on clean and corrupted test data.

`evaluate_robustness(model, dataset, corruptions=...)` (and the corruption
flags of `keras-caps evaluate`) classifies the test split of `dataset`
clean and under each corruption of `keras_caps.evaluation.corruptions`,
every model seeing the same corrupted images for the same `seed`.

For each set (clean and every corruption) it records the accuracy and the
share of the images given the most frequent predicted class
(`"majority_share"`: near 1 / classes for a working model on a balanced
test set, 1.0 when every image gets one class, a collapse); with
`predictions_dir` it saves the predicted class of every image
(`predictions.npz`, read back by
`keras_caps.evaluation.predictions.read_predictions`; format in that
module) and the confusion matrices (`confusion.npz`); with
`adapt_batchnorm=True` it classifies each set a second time with the
BatchNorm statistics re-estimated on that set
(`keras_caps.evaluation.batchnorm_adaptation`), under `"adapted"`.
"""

import os
import time

import keras
import numpy as np

from keras_caps import datasets
from keras_caps.datasets.viewpoints import check_viewpoints
from keras_caps.diagnostics.costs import cost_record
from keras_caps.evaluation import attack_evaluation
from keras_caps.evaluation import batchnorm_adaptation
from keras_caps.evaluation import corruptions as corruptions_lib
from keras_caps.evaluation import multi_digit_robustness as multi_digit
from keras_caps.evaluation import predictions as predictions_lib
from keras_caps.evaluation.test_sets import classifier
from keras_caps.evaluation.test_sets import column_key
from keras_caps.evaluation.test_sets import corrupted_test_sets
from keras_caps.evaluation.test_sets import load_test_arrays
from keras_caps.evaluation.test_sets import macro_accuracy
from keras_caps.validation import check_bool

CORRUPTIONS = ("noise", "pixels", "occlusion", "affine")
# Datasets whose test split is single-label image classification.
_SINGLE_LABEL = ("mnist", "fashion_mnist", "mnist_canvas", "smallnorb",
                 "cifar10", "cifar100")
# Options of the canvas tests, in a corruptions dict only when given (so
# the records of earlier versions, without them, stay equal to new ones):
# `"affnist_dir"`, the affNIST files the affine column reads instead of
# the generated set; `"translated"`, the translated-only test.
CANVAS_OPTIONS = ("affnist_dir", "translated")


def check_corruptions(dataset, corruptions):
    """The corruptions to run on `dataset`, validated and normalised.

    Args:
        dataset: str. A key of `keras_caps.datasets.DATASETS`.
        corruptions: dict or `None`. `"noise"` (Gaussian noise standard
            deviations, fractions of the pixel range in [0, 1]),
            `"pixels"` (fractions of pixels replaced by uniform noise, in
            [0, 1]), `"occlusion"` (square patch sides in pixels, at most
            the image side): lists of severities; `"affine"`: bool, the
            generated affNIST-style test set, only for `"mnist_canvas"`;
            with `"affnist_dir"` (a folder, see
            `keras_caps.datasets.affnist.test_files`) the affine column
            reads affNIST's own test files instead; `"translated"`:
            bool, each clean canvas test image's digit moved to a random
            position, nothing else (`"mnist_canvas"` only).

    Returns:
        dict with every key of `CORRUPTIONS`: sorted severity lists, and a
        bool for `"affine"`; `"affnist_dir"` (the folder's absolute path)
        and `"translated"` (`True`) only when asked for.
    """
    if dataset not in datasets.DATASETS:
        raise ValueError(
            f"Unknown `dataset`. Expected one of {sorted(datasets.DATASETS)}"
            f". Received: dataset={dataset!r}")
    scored = _SINGLE_LABEL + multi_digit.MULTI_DIGIT_DATASETS
    if dataset not in scored:
        raise ValueError(
            "Robustness evaluations classify one object per image, or the "
            f"digits of a multi-digit image. Expected a dataset among "
            f"{sorted(scored)}. Received: dataset={dataset!r}")
    corruptions = dict(corruptions or {})
    unknown = sorted(set(corruptions) - set(CORRUPTIONS)
                     - set(CANVAS_OPTIONS))
    if unknown:
        raise ValueError(
            f"Unknown corruptions {unknown}. Expected some of "
            f"{list(CORRUPTIONS)}. Received: corruptions={corruptions!r}")
    image_size = min(datasets.DATASETS[dataset].input_shape[:2])
    result = {"affine": bool(corruptions.get("affine", False))}
    for kind in ("noise", "pixels", "occlusion"):
        severities = corruptions.get(kind)
        if severities is None:
            severities = []
        if not isinstance(severities, (list, tuple)):
            raise TypeError(
                f"Received an invalid type for the {kind!r} severities, "
                "expected a list of numbers (e.g. [0.1, 0.2]). Received: "
                f"{kind}={severities!r}")
        severities = list(severities)
        checked = [corruptions_lib.check_severity(kind, value, image_size)
                   for value in severities]
        if len(set(checked)) != len(checked):
            raise ValueError(
                f"Duplicate {kind} severities. Received: {severities!r}")
        result[kind] = sorted(checked)
    if result["affine"] and dataset != "mnist_canvas":
        if dataset == "smallnorb":
            # Its test set holds other object instances seen from the
            # same viewpoints as the training set: unseen viewpoints are
            # the `viewpoints` splits (Hinton et al. 2018, section 5.1).
            reason = (
                "smallNORB images are stereo pairs of one object: one "
                "2-D warp of both views is not a change of viewpoint. For "
                "unseen viewpoints, train and compare on its viewpoint "
                "splits (`viewpoints`, --viewpoints azimuth or elevation), "
                "which hold the test images of novel azimuths or "
                "elevations apart")
        else:
            reason = (
                f"the generated affine test set warps the 28x28 MNIST test "
                f"digits onto a 40x40 canvas, which {dataset!r} models do "
                "not take")
        raise ValueError(
            f"The affine corruption does not apply to {dataset!r}: "
            f"{reason}. Train and evaluate on dataset 'mnist_canvas' "
            "(MNIST digits placed at random on a 40x40 canvas) for it. "
            f"Received: dataset={dataset!r}, affine=True")
    result.update(_canvas_options(dataset, corruptions, result["affine"]))
    return result


def _canvas_options(dataset, corruptions, affine):
    """The checked `CANVAS_OPTIONS` of `corruptions` that are given."""
    options = {}
    folder = corruptions.get("affnist_dir")
    if folder is not None:
        if not affine:
            raise ValueError(
                "`affnist_dir` (--affnist-dir) names the affNIST files the "
                "affine test reads: ask for that test too (--affine, "
                f"affine=True). Received: affnist_dir={folder!r}, "
                "affine=False")
        from keras_caps.datasets import affnist

        affnist.test_files(folder)  # Every file there and complete.
        options["affnist_dir"] = os.path.abspath(folder)
    translated = corruptions.get("translated", False)
    if not isinstance(translated, bool):
        raise TypeError(
            "Received an invalid type for `translated`, expected a bool. "
            f"Received: translated={translated!r}")
    if translated:
        if dataset != "mnist_canvas":
            raise ValueError(
                "The translated test moves the digits of the 40x40 "
                "'mnist_canvas' test images; it does not apply to "
                f"{dataset!r}. Received: dataset={dataset!r}, "
                "translated=True")
        options["translated"] = True
    return options


def evaluate_robustness(model, dataset, *, corruptions=None, data_dir=None,
                        seed=42, batch_size=256, dataset_options=None,
                        download=True, predictions_dir=None,
                        adapt_batchnorm=False, viewpoints=None,
                        attacks=None):
    """Accuracy of a classifier on clean, corrupted and attacked images.

    Args:
        model: A `keras.Model` from an application builder (or a path to
            its `.keras` file). Models with a decoder are evaluated through
            `keras_caps.inference.inference_model`.
        dataset: str. The dataset the model was trained on. For
            `"multi_mnist"` (two digits an image) the record holds
            per-digit and exact-match accuracies instead, and its
            predictions one per digit, see
            `keras_caps.evaluation.multi_digit_robustness` (it needs
            `dataset_options={"partners_per_digit": n}`; no attacks).
        corruptions: dict or `None`; see `check_corruptions`. Clean
            accuracy only when `None`.
        data_dir: str or `None`. The data folder.
        seed: int. Seeds the corruptions. Defaults to `42`.
        batch_size: int. Prediction batch size. Defaults to `256`.
        dataset_options: dict or `None`. Options of the test loader.
        download: bool. Without a data folder, let TFDS download the
            dataset if it is not prepared. Defaults to `True`.
        predictions_dir: str or `None`. Also write the predicted class of
            every image, clean and under each corruption, to
            `predictions_dir/predictions.npz` and the confusion matrices to
            `confusion.npz` (see `keras_caps.evaluation.predictions`).
        adapt_batchnorm: bool. Also classify each set (clean included)
            with every BatchNormalization layer's statistics re-estimated
            on that set (Schneider et al., 2020; see
            `keras_caps.evaluation.batchnorm_adaptation`), the original
            statistics restored afterwards. Defaults to `False`.
        viewpoints: `None`, `"azimuth"` or `"elevation"` (smallnorb, a
            model trained on a viewpoint split of
            `keras_caps.datasets.smallnorb.load`): also the accuracy of
            the clean test images seen from the familiar and from the
            novel viewpoints (Hinton, Sabour & Frosst 2018, §5.1), from
            the same clean predictions; with `adapt_batchnorm`, their
            adapted accuracies are those of the clean set's adaptation.
        attacks: dict or `None`. Adversarial attacks on the test images
            (FGSM, PGD, the vote attack; see
            `keras_caps.evaluation.attack_evaluation.check_attacks`), each
            seeded from `seed`; with `"attack_images": N`, on the first N
            test images only (their true classes `"labels:attacks"` in
            the predictions). Defaults to `None`: none.

    Returns:
        dict: `"clean"` with `accuracy`, `macro_accuracy` (the mean over
        classes of the per-class accuracy), `images_per_second` (the clean
        pass, after a warm-up batch) and `num_images`; `"noise"`,
        `"pixels"`, `"occlusion"`: severity (as a string) -> accuracy;
        `"affine"`: accuracy or `None`, and `"affine_set"`, which set it
        is (`affine_set_name`); `"translated"`: accuracy, when asked for;
        `"majority_share"`: column key
        (`"clean"`, `"noise:0.1"`, ..., as
        `keras_caps.compare.comparison_results.columns`) -> the share of the
        images predicted as the most frequent class; with
        `adapt_batchnorm`, `"adapted"`: `{"accuracy": {key: ...},
        "majority_share": {key: ...}, "batchnorm_layers": n}`;
        with `viewpoints`, `"viewpoints"`: `{"familiar": accuracy,
        "novel": accuracy}` and `"viewpoint_images"`: `{"split":
        viewpoints, "familiar": n, "novel": n}` (keys
        `"viewpoints:familiar"` and `"viewpoints:novel"` in
        `"majority_share"`, `"adapted"` and the predictions);
        `"trainable_parameters"` of the classifier (decoder excluded); its
        costs (`keras_caps.diagnostics.costs.cost_record`:
        `"trainable_parameters_with_decoder"`, `"decoder_parameters"`,
        `"multiply_adds"` of the classifier path, `"decoder_multiply_adds"`);
        `"seed"`, `"dataset"`; with `attacks`, `"fgsm"`, `"pgd"` (and
        `"vote_pgd"`): epsilon (as a string) -> accuracy, `"attacks"`: the
        settings (with `"attack_images"`, also `"clean_accuracy_subset"`,
        the clean accuracy of the attacked images), and `"masking_checks"`
        (`keras_caps.evaluation.attack_checks.masking_checks`).

    Example:

    >>> record = evaluate_robustness(  # doctest: +SKIP
    ...     "runs/efficient_capsnet_mnist/model.keras", "mnist",
    ...     corruptions={"noise": [0.1, 0.2], "occlusion": [8]})
    >>> record["noise"]["0.2"]  # doctest: +SKIP
    0.9876
    """
    corruptions = check_corruptions(dataset, corruptions)
    check_bool("adapt_batchnorm", adapt_batchnorm)
    check_viewpoints(dataset, viewpoints)
    attacks = attack_evaluation.check_attacks(attacks)
    multi_digit.check_multi_digit_evaluation(dataset, dataset_options,
                                             attacks=attacks)
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        if attacks:
            attack_evaluation.check_attack_model(model, "model")
        model = keras.saving.load_model(model)
    if dataset in multi_digit.MULTI_DIGIT_DATASETS:  # Two digits an image.
        return multi_digit.evaluate_multi_digit_robustness(
            model, dataset, corruptions, data_dir=data_dir, seed=seed,
            batch_size=batch_size, dataset_options=dataset_options,
            download=download, predictions_dir=predictions_dir,
            adapt_batchnorm=adapt_batchnorm)
    predictor = classifier(model)
    images, labels = load_test_arrays(dataset, data_dir=data_dir, seed=seed,
                                      dataset_options=dataset_options,
                                      download=download)
    attack_evaluation.check_attack_images(attacks, len(images))
    predict, scores, predicted = _clean_pass(predictor, images, labels,
                                             batch_size)
    record = {"dataset": dataset, "seed": seed, **scores,
              **cost_record(model)}
    sets = _PredictionSets(labels, predicted)
    if adapt_batchnorm:
        sets.adapt(predictor, "clean", images, labels, predict, batch_size)
    if viewpoints is not None:
        familiar = _familiar_test_images(viewpoints, data_dir, download)
        record.update(_split_by_viewpoint(sets, viewpoints, familiar))
    for kind, severity, corrupted, truth in corrupted_test_sets(
            dataset, images, labels, corruptions, seed, data_dir=data_dir,
            download=download):
        key = column_key(kind, severity)
        sets.add(key, predict(corrupted), truth)
        accuracy = float(np.mean(sets.predictions[key] == truth))
        if severity is None:  # "affine", "translated".
            record[kind] = accuracy
        else:
            record[kind][str(severity)] = accuracy
        if adapt_batchnorm:
            sets.adapt(predictor, key, corrupted, truth, predict,
                       batch_size)
    if attacks:
        _attack(predictor, (images, labels), attacks, seed, record, sets,
                (predict, batch_size, adapt_batchnorm))
    record.update(sets.record(adapt_batchnorm))
    if corruptions["affine"]:
        record["affine_set"] = affine_set_name(corruptions)
    if predictions_dir is not None:
        predictions_lib.write_predictions(
            predictions_dir, sets.predictions, predictor.output_shape[-1])
    return record


def affine_set_name(corruptions):
    """Which affine test set `corruptions` evaluates: `"affNIST
    (Tieleman)"` (its files) or `"generated affine set"`."""
    if corruptions.get("affnist_dir"):
        from keras_caps.datasets import affnist

        return affnist.SOURCE
    return GENERATED_AFFINE_SET


GENERATED_AFFINE_SET = "generated affine set"


def _familiar_test_images(viewpoints, data_dir, download):
    """smallNORB's mask of the test images at familiar viewpoints."""
    from keras_caps.datasets import smallnorb  # Imports TensorFlow.

    return smallnorb.familiar_test_images(viewpoints, data_dir, download)


def _split_by_viewpoint(sets, viewpoints, familiar):
    """The clean predictions (and adapted ones) of the test images seen
    from the familiar and the novel viewpoints (Hinton et al. 2018,
    section 5.1), added to `sets`; returns their record entries."""
    labels = sets.predictions[predictions_lib.LABELS]
    if len(familiar) != len(labels):
        raise ValueError(
            f"The viewpoint labels of the test split ({len(familiar)}) do "
            f"not match its {len(labels)} images: the data changed while "
            "it was read. Evaluate again.")
    accuracies, counts = {}, {"split": viewpoints}
    for name, chosen in (("familiar", familiar), ("novel", ~familiar)):
        key = f"viewpoints:{name}"
        for prefix in ("", predictions_lib.ADAPTED_PREFIX):
            if prefix + "clean" in sets.predictions:
                sets.add(prefix + key,
                         sets.predictions[prefix + "clean"][chosen],
                         labels[chosen])
        accuracies[name] = float(np.mean(
            sets.predictions[key] == labels[chosen]))
        counts[name] = int(chosen.sum())
    return {"viewpoints": accuracies, "viewpoint_images": counts}


def _attack(predictor, test_set, attacks, seed, record, sets, options):
    """Classifies the adversarial test sets of `attacks` into `sets`
    and `record` (`"fgsm"`, `"pgd"`, `"vote_pgd"`, `"attacks"`,
    `"masking_checks"`); a model without votes gets its PGD predictions
    as its vote attack's."""
    images, labels = attack_evaluation.attack_subset(attacks, *test_set)
    predict, batch_size, adapt_batchnorm = options
    clean_subset = None
    if attacks.get("attack_images") is not None:  # The first N images.
        sets.predictions[predictions_lib.ATTACK_LABELS] = labels
        clean_subset = float(np.mean(
            sets.predictions["clean"][:len(labels)] == labels))
    for kind, epsilon, adversarial in attack_evaluation.attacked_sets(
            predictor, images, labels, attacks, seed, batch_size):
        key = column_key(kind, epsilon)
        if adversarial is None:
            reused = column_key("pgd", epsilon)
            sets.add(key, sets.predictions[reused], labels)
            if adapt_batchnorm:
                prefix = predictions_lib.ADAPTED_PREFIX
                sets.add(prefix + key, sets.predictions[prefix + reused],
                         labels)
        else:
            sets.add(key, predict(adversarial), labels)
            if adapt_batchnorm:
                sets.adapt(predictor, key, adversarial, labels, predict,
                           batch_size)
        record.setdefault(kind, {})[str(epsilon)] = float(
            np.mean(sets.predictions[key] == labels))
    record.update(attack_evaluation.attack_record(predictor, attacks,
                                                  record, clean_subset))


class _PredictionSets:
    """The predicted classes of every evaluated set, by column key."""

    def __init__(self, labels, clean):
        self.predictions = {predictions_lib.LABELS: labels, "clean": clean}
        self.adapted_layers = 0

    def add(self, key, predicted, labels):
        self.predictions[key] = predicted
        labels_key = predictions_lib.labels_of(key, self.predictions)
        if labels_key != predictions_lib.LABELS:  # A set of its own.
            self.predictions[labels_key] = labels

    def adapt(self, predictor, key, images, labels, predict, batch_size):
        """Classifies `images` again with BatchNorm statistics adapted
        to them (`adapted:<key>`)."""
        with batchnorm_adaptation.adapted_batchnorm(
                predictor, images, batch_size) as layers:
            self.adapted_layers = len(layers)
            predicted = predict(images) if layers else self.predictions[key]
        self.add(predictions_lib.ADAPTED_PREFIX + key, predicted, labels)

    def record(self, adapted):
        """`"majority_share"` (and `"adapted"`) of the evaluation record."""
        shares, accuracies = {}, {}
        for key, predicted in self.predictions.items():
            if predictions_lib.is_labels_key(key):
                continue
            shares[key] = predictions_lib.majority_share(predicted)
            truth = self.predictions[predictions_lib.labels_of(
                key, self.predictions)]
            accuracies[key] = float(np.mean(predicted == truth))
        prefix = predictions_lib.ADAPTED_PREFIX
        result = {"majority_share": {key: value for key, value in
                                     shares.items()
                                     if not key.startswith(prefix)}}
        if adapted:
            result["adapted"] = {
                "accuracy": {key[len(prefix):]: value for key, value in
                             accuracies.items() if key.startswith(prefix)},
                "majority_share": {key[len(prefix):]: value for key, value
                                   in shares.items()
                                   if key.startswith(prefix)},
                "batchnorm_layers": self.adapted_layers,
            }
        return result


def clean_scores(predictor, images, labels, batch_size):
    """Scores `predictor` on clean test images, timing the pass.

    Args:
        predictor: The classifier (`classifier(model)`).
        images: float32 array `(num_images, height, width, channels)`,
            raw pixels.
        labels: int array `(num_images,)`, the true classes.
        batch_size: int. The prediction batch size.

    Returns:
        `(predict, record)`: `predict(batch)` gives the predicted classes
        of a batch of images; `record` holds `"trainable_parameters"`, the
        `"clean"` entry of `evaluate_robustness` (its images per second
        measured after a warm-up batch that traces the function) and empty
        corruption entries.

    Example:

    ```python
    predict, record = clean_scores(classifier(model), images, labels, 256)
    record["clean"]["accuracy"]
    ```
    """
    predict, record, _ = _clean_pass(predictor, images, labels, batch_size)
    return predict, record


def _clean_pass(predictor, images, labels, batch_size):
    """`clean_scores`, and the predicted classes of the clean images."""
    def predict(batch):
        scores = predictor.predict(batch, batch_size=batch_size, verbose=0)
        return np.asarray(scores).argmax(axis=-1)

    predict(images[:batch_size])  # Warm-up: traces the function.
    start = time.perf_counter()
    predicted = predict(images)
    seconds = time.perf_counter() - start
    return predict, {
        "trainable_parameters": int(sum(
            np.prod(weight.shape) for weight in predictor.trainable_weights)),
        "clean": {
            "accuracy": float(np.mean(predicted == labels)),
            "macro_accuracy": macro_accuracy(labels, predicted),
            "images_per_second": float(len(images) / max(seconds, 1e-9)),
            "num_images": int(len(images)),
        },
        "noise": {}, "pixels": {}, "occlusion": {}, "affine": None,
    }, predicted
