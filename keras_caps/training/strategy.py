"""The one place that creates `tf.distribute` strategies for training."""

import json
import logging
import os

import tensorflow as tf

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")


def get_strategy(name="auto", tpu_address=None):
    """Creates the distribution strategy `name`.

    - `"one_device"`: the first GPU if there is one, else the CPU.
    - `"mirrored"`: `MirroredStrategy` over all local GPUs (or all logical
      devices of the CPU when there is no GPU).
    - `"multi_worker"`: `MultiWorkerMirroredStrategy` configured from the
      `TF_CONFIG` environment variable, which must be set.
    - `"tpu"`: `TPUStrategy` from a TPU cluster resolver (`tpu_address`, or
      the environment's TPU).
    - `"auto"`: a TPU if one can be resolved, else `mirrored` when there are
      several GPUs, else `one_device`.

    Datasets given to `model.fit` under these strategies are batched with
    the global batch size and sharded by data (the default auto-shard policy
    falls back to data sharding for the generated datasets here).

    Args:
        name: str. One of `STRATEGIES`.
        tpu_address: str or None. Address of the TPU for `"tpu"`.

    Returns:
        A `tf.distribute.Strategy`.
    """
    if name not in STRATEGIES:
        raise ValueError(
            f"Unknown `strategy`. Expected one of {list(STRATEGIES)}. "
            f"Received: strategy={name!r}")
    if name == "auto":
        try:
            return _tpu_strategy(tpu_address)
        except ValueError:
            pass
        gpus = tf.config.list_logical_devices("GPU")
        name = "mirrored" if len(gpus) > 1 else "one_device"
    if name == "tpu":
        return _tpu_strategy(tpu_address)
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "The `multi_worker` strategy needs the TF_CONFIG environment "
                "variable describing the cluster and this worker's task. "
                "Received: no TF_CONFIG")
        json.loads(os.environ["TF_CONFIG"])  # Fail early on bad JSON.
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = ([d.name for d in gpus] if gpus else
                   [d.name for d in tf.config.list_logical_devices("CPU")])
        return tf.distribute.MirroredStrategy(devices)
    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/cpu:0"
    logging.info("Training on one device: %s", device)
    return tf.distribute.OneDeviceStrategy(device)


def _tpu_strategy(tpu_address):
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=tpu_address)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.NotFoundError,
            tf.errors.InvalidArgumentError) as error:
        raise ValueError(
            "No TPU could be resolved for the `tpu` strategy "
            f"(tpu_address={tpu_address!r}): {error}. Use strategy='auto', "
            "'mirrored' or 'one_device' on machines without a TPU.") from None
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy):
    """Whether this worker writes checkpoints, logs and exports."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type in (None, "chief") or (
        task_type == "worker" and task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict())
