"""Reading a model family's presets: lookup and learning-rate schedule.

A preset is a plain dict per dataset. Its training keys are data too:
`learning_rate_schedule` names the schedule and the keys it reads are
beside it:

- `"exponential_decay"`: `max(learning_rate * learning_rate_decay**epoch,
  min_learning_rate)`;
- `"step_decay"`: `learning_rate * learning_rate_decay**k`, where `k` is
  the number of `learning_rate_boundaries` (epochs) passed;
- `"constant"`: `learning_rate` throughout.
"""

LEARNING_RATE_SCHEDULES = ("exponential_decay", "step_decay", "constant")


def lookup_preset(presets, dataset, model_name):
    """`presets[dataset]`, with an error listing the datasets that exist."""
    if dataset not in presets:
        raise ValueError(
            f"Unknown `dataset` for {model_name}. Expected one of "
            f"{sorted(presets)}. Received: dataset={dataset!r}")
    return presets[dataset]


def learning_rate_schedule(preset):
    """`schedule(epoch) -> learning_rate` from a preset, or `None`.

    `None` for a `"constant"` schedule (the optimizer keeps its rate).
    Epochs count from 0, as in `keras.callbacks.LearningRateScheduler`.
    """
    kind = preset["learning_rate_schedule"]
    if kind not in LEARNING_RATE_SCHEDULES:
        raise ValueError(
            "Unknown `learning_rate_schedule` in the preset. Expected one "
            f"of {list(LEARNING_RATE_SCHEDULES)}. Received: "
            f"learning_rate_schedule={kind!r}")
    if kind == "constant":
        return None
    initial = preset["learning_rate"]
    decay = preset["learning_rate_decay"]
    if kind == "exponential_decay":
        minimum = preset["min_learning_rate"]

        def schedule(epoch, learning_rate=None):
            del learning_rate  # The schedule depends on the epoch only.
            return max(initial * decay**epoch, minimum)

        return schedule
    boundaries = preset["learning_rate_boundaries"]

    def schedule(epoch, learning_rate=None):
        del learning_rate
        return initial * decay**sum(epoch >= boundary
                                    for boundary in boundaries)

    return schedule
