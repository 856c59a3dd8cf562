"""Looking up an application's per-dataset preset and its schedule."""


def lookup_preset(presets, dataset, model_name):
    """`presets[dataset]`, with an error listing the datasets that exist."""
    if dataset not in presets:
        raise ValueError(
            f"Unknown `dataset` for {model_name}. Expected one of "
            f"{sorted(presets)}. Received: dataset={dataset!r}")
    return presets[dataset]


def exponential_decay_schedule(preset):
    """`schedule(epoch) = max(lr0 * decay**epoch, min_lr)` from a preset.

    The preset holds `learning_rate`, `learning_rate_decay` and
    `min_learning_rate`; epochs count from 0, as in
    `keras.callbacks.LearningRateScheduler`.
    """
    initial = preset["learning_rate"]
    decay = preset["learning_rate_decay"]
    minimum = preset["min_learning_rate"]

    def schedule(epoch, learning_rate=None):
        del learning_rate  # The schedule depends on the epoch only.
        return max(initial * decay**epoch, minimum)

    return schedule
