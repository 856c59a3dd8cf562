"""One model of a comparison: its folder, and its run and evaluation.

`train_and_evaluate` is what runs for each `(model, seed)`, in the
comparison's process (`isolation="session"`) or in a child of its own
(`keras_caps.compare.comparison_process`): it trains the model with the
recipe of `keras_caps.training.train` unless its run is finished, then
evaluates it unless its `robustness.json` was made with the same
evaluation settings (`evaluation_settings`, `finished_evaluation`).
"""

import gc
import logging
import os

import keras

from keras_caps import training
from keras_caps.compare import multi_digit_comparison
from keras_caps.compare import user_data_comparison
from keras_caps.evaluation import predictions as predictions_lib
from keras_caps.evaluation import robustness
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.record_files import read_record_made_with


def run_dir(output_dir, router, seed):
    """The folder of one trained model of a comparison."""
    return os.path.join(output_dir, "models", f"{router}_seed{seed}")


def evaluation_settings(settings):
    """What a model's `robustness.json` must have been made with to be
    reused: the corruptions, their seed and the data."""
    evaluation = {"corruptions": settings.corruptions,
                  "seed": settings.evaluation_seed,
                  "data": settings.data}
    if not settings.is_user_data():  # Built-in data: per-image predictions.
        evaluation["predictions"] = predictions_lib.FORMAT
    if settings.adapt_batchnorm:
        evaluation["adapt_batchnorm"] = True
    if settings.viewpoints is not None:
        evaluation["viewpoints"] = settings.viewpoints
    if settings.attacks:
        evaluation["attacks"] = settings.attacks
    evaluation.update(multi_digit_comparison.dataset_options(
        settings.partners_per_digit))
    return evaluation


def finished_evaluation(folder, evaluation):
    """The model's `robustness.json` if made with these `evaluation`
    settings (`evaluation_settings`); `None` if there is none, it was
    made with other settings, or it is unreadable (it is computed again:
    compare wrote it, from the model)."""
    finished = read_record_made_with(
        os.path.join(folder, "robustness.json"), evaluation,
        "The model is evaluated again.")
    if finished is None:
        return None
    if evaluation.get("predictions") and not _readable_predictions(folder):
        return None
    return finished


def _readable_predictions(folder):
    """Whether the model's `predictions.npz` is there and readable (else
    the model is evaluated again)."""
    try:
        predictions_lib.read_predictions(folder)
    except (OSError, ValueError) as error:
        logging.warning("%s The model is evaluated again.", error)
        return False
    return True



def train_and_evaluate(router, settings, folder, evaluation, *,
                       data_dir=None, verbose=0, download=True):
    """One model of a comparison: trains it unless done, evaluates it.

    Writes the run of `keras_caps.training.train` in `folder` and its
    `robustness.json`.

    Args:
        router: str. The model's name in the comparison (for the log).
        settings: `TrainingSettings`. The model's (`training_settings`).
        folder: str. The model's run folder (`run_dir`).
        evaluation: dict. `{"corruptions": ..., "seed": ...}`, the
            corruptions of `keras_caps.evaluation.evaluate_robustness` and
            their seed.
        data_dir: str or `None`. The data folder.
        verbose: Keras `fit` verbosity. Defaults to `0`.
        download: bool. Let TFDS download a dataset that is not prepared.

    Example:

    ```python
    train_and_evaluate("cnn", training_settings(compared, "cnn", 0),
                       run_dir("runs/compare", "cnn", 0),
                       {"corruptions": compared["corruptions"], "seed": 1234})
    ```
    """
    evaluation_path = os.path.join(folder, "robustness.json")
    if not os.path.exists(os.path.join(folder, "metrics.json")):
        logging.info("%s, seed %d: training", router, settings.seed)
        if os.path.exists(evaluation_path):
            os.remove(evaluation_path)  # Of an earlier, unfinished model.
        training.train(output_dir=folder, settings=settings,
                       data_dir=data_dir, verbose=verbose, download=download)
        free_memory()
    if finished_evaluation(folder, evaluation) is None:
        logging.info("%s, seed %d: evaluating", router, settings.seed)
        model_path = os.path.join(folder, "model.keras")
        if settings.is_user_data():
            record = user_data_comparison.evaluate_on_user_data(
                model_path, settings.data_source, data_dir=data_dir,
                download=download)
        else:
            record = robustness.evaluate_robustness(
                model_path, settings.dataset,
                corruptions=evaluation["corruptions"], data_dir=data_dir,
                seed=evaluation["seed"], download=download,
                predictions_dir=folder,
                adapt_batchnorm=evaluation.get("adapt_batchnorm", False),
                viewpoints=evaluation.get("viewpoints"),
                attacks=evaluation.get("attacks"),
                dataset_options=evaluation.get("dataset_options"))
        write_json_atomically(evaluation_path,
                              {"settings": evaluation, **record})


def free_memory():
    """Frees what the models of this process left: Keras' graph and
    Python's cycles."""
    keras.backend.clear_session()
    gc.collect()
