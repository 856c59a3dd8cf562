"""The one place that creates the distribution strategies for training.

On TensorFlow, `tf.distribute` strategies; on JAX and PyTorch, what
`keras_caps.training.backend_distribution` makes of the same names
(`keras.distribution.DataParallel` on JAX). TensorFlow is imported only
where a TensorFlow strategy is made or asked about.
"""

import functools
import json
import logging
import os
import signal
import sys
import threading

import keras

from keras_caps.training.backend_distribution import backend_distribution
from keras_caps.training.worker_rendezvous import wait_for_workers
from keras_caps.training.worker_rendezvous import watch_startup

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")


DEFAULT_WORKER_TIMEOUT = 600.0


def get_strategy(name="auto", tpu_address=None,
                 worker_timeout=DEFAULT_WORKER_TIMEOUT):
    """Creates the distribution strategy `name`.

    - `"one_device"`: the first GPU if there is one, else the CPU.
    - `"mirrored"`: `MirroredStrategy` over all local GPUs (or all logical
      devices of the CPU when there is no GPU).
    - `"multi_worker"`: `MultiWorkerMirroredStrategy` configured from the
      `TF_CONFIG` environment variable, which must be set. It first
      waits (logging which) for the other workers to start, at most
      `worker_timeout` seconds, then gives TensorFlow's start-up of the
      cluster as long again; it stops on SIGTERM or SIGINT meanwhile,
      and names the workers that stopped answering after that time (see
      `worker_rendezvous.wait_for_workers` and `watch_startup`).
    - `"tpu"`: `TPUStrategy` from a TPU cluster resolver (`tpu_address`, or
      the environment's TPU).
    - `"auto"`: a TPU if one can be resolved, else `multi_worker` when
      `TF_CONFIG` describes a cluster, else `mirrored` when there are
      several GPUs, else `one_device`.

    Datasets given to `model.fit` under these strategies are batched with
    the global batch size; `shard_by_data` sets the auto-shard policy the
    training recipe uses (`DATA`, see there).

    Args:
        name: str. One of `STRATEGIES`.
        tpu_address: str or None. Address of the TPU for `"tpu"`.
        worker_timeout: float. Seconds `"multi_worker"` waits for the other
            workers to start, and then for TensorFlow's start-up of the
            cluster. Defaults to 600.

    On JAX and PyTorch, see `backend_distribution`: `"mirrored"` (and
    `"auto"` with several devices) is `keras.distribution.DataParallel`
    on JAX; the strategies only TensorFlow has are refused.

    Returns:
        A `tf.distribute.Strategy` (TensorFlow), else a
        `BackendDistribution`.
    """
    if name not in STRATEGIES:
        raise ValueError(
            f"Unknown `strategy`. Expected one of {list(STRATEGIES)}. "
            f"Received: strategy={name!r}")
    if keras.backend.backend() != "tensorflow":
        return backend_distribution(name)
    import tensorflow as tf

    if name == "auto":
        try:
            return _tpu_strategy(tpu_address)
        except ValueError:
            pass
        gpus = tf.config.list_logical_devices("GPU")
        if _tf_config_cluster():
            name = "multi_worker"
        else:
            name = "mirrored" if len(gpus) > 1 else "one_device"
    if name == "tpu":
        return _tpu_strategy(tpu_address)
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "The `multi_worker` strategy needs the TF_CONFIG environment "
                "variable describing the cluster and this worker's task. "
                "Received: no TF_CONFIG")
        cluster = _tf_config_cluster()  # Fail early on bad JSON.
        return _multi_worker_strategy(cluster, worker_timeout)
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = ([d.name for d in gpus] if gpus else
                   [d.name for d in tf.config.list_logical_devices("CPU")])
        return tf.distribute.MirroredStrategy(devices)
    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/cpu:0"
    logging.info("Training on one device: %s", device)
    return tf.distribute.OneDeviceStrategy(device)


def _multi_worker_strategy(cluster, worker_timeout):
    if (isinstance(worker_timeout, bool)
            or not isinstance(worker_timeout, (int, float))
            or not worker_timeout > 0):
        raise ValueError(
            "`worker_timeout` must be a positive number of seconds. "
            f"Received: worker_timeout={worker_timeout!r}")
    task = json.loads(os.environ["TF_CONFIG"]).get("task") or {}
    task_type, task_id = task.get("type"), task.get("index", 0)
    if cluster and task_type in cluster:
        if (not isinstance(task_id, int)
                or not 0 <= task_id < len(cluster[task_type])):
            raise ValueError(
                f"TF_CONFIG's task index {task_id} is not in its cluster's "
                f"{task_type!r} list. Received: TF_CONFIG="
                f"{os.environ['TF_CONFIG']!r}")
        wait_for_workers(cluster, task_type, task_id, worker_timeout)
    main_thread = threading.current_thread() is threading.main_thread()
    sigterm_handler = signal.getsignal(signal.SIGTERM)
    # A peer that stops now, after greeting, would leave TensorFlow waiting
    # for it: the watchdog bounds that wait too, and stops on signals.
    with watch_startup(cluster, task_type, task_id, worker_timeout):
        _without_coordination_service()
        strategy = _multi_worker_mirrored_strategy()()
    if main_thread and sigterm_handler is not None:
        # With a coordination service configured by the caller,
        # TensorFlow's preemption notifier replaced the SIGTERM handler
        # with one that only logs: give SIGTERM its meaning back.
        signal.signal(signal.SIGTERM, sigterm_handler)
    return strategy


def _without_coordination_service():
    """Has the strategy start without TensorFlow's coordination service.

    Unless one was configured already. With it, the strategy's constructor
    waits for every worker in a barrier that `worker_timeout` cannot
    bound, inside one call that holds the interpreter,
    and installs a preemption notifier that turns SIGTERM into a log line:
    a peer that stops after `wait_for_workers` then leaves this process
    waiting, deaf to signals, with no Python thread able to run. Without
    it, the strategy waits for the cluster with a first collective that
    releases the interpreter (so `watch_startup`'s watchdog can act),
    SIGTERM keeps its meaning, and the strategy's own health check
    detects failed peers during training.
    """
    unbounded = ("if a worker stops after the rendezvous, the start-up "
                 "watchdog (--worker-timeout) cannot bound TensorFlow's own "
                 "wait for it")
    try:  # TensorFlow's private API: it may move.
        from tensorflow.python.eager import context

        tf_context = context.context()
        configured = tf_context.coordination_service is not None
        initialized = tf_context._initialized
    except (ImportError, AttributeError) as error:
        logging.warning("Cannot turn TensorFlow's coordination service off "
                        "(its API moved: %s): %s.", error, unbounded)
        return
    if configured:
        return
    if initialized:
        logging.warning(
            "TensorFlow was initialised before the multi-worker strategy "
            "(something ran TensorFlow first), so its coordination service "
            "may stay on: %s.", unbounded)
    tf_context.configure_coordination_service(service_type="")


@functools.cache
def _multi_worker_mirrored_strategy():
    """The class below, made on first use (it subclasses TensorFlow's)."""
    import tensorflow as tf

    return type("MultiWorkerMirroredStrategy",
                (_ReduceWhatKerasGives,
                 tf.distribute.MultiWorkerMirroredStrategy), {})


class _ReduceWhatKerasGives:
    """`MultiWorkerMirroredStrategy` whose `reduce` takes what Keras gives.

    Keras 3's `fit` under several workers calls `strategy.reduce` in two
    ways the strategy rejects (keras-team/keras#20329):

    - on the first distributed batch, to build metrics and optimizer:
      a structure (`(inputs, targets)`, dicts), not a single tensor (the
      workers' shares of that batch must then have equal shapes, so every
      split needs at least one whole global batch);
    - on each step's logs with `axis=0`: scalars, which have no axis 0.

    This reduces each tensor of a structure, and scalars across replicas
    only, which is what those calls mean.
    """

    def reduce(self, reduce_op, value, axis):
        def reduce_one(item):
            local = self.experimental_local_results(item)[0]
            rank = getattr(getattr(local, "shape", None), "rank", None)
            return super(_ReduceWhatKerasGives, self).reduce(
                reduce_op, item, None if rank == 0 else axis)

        import tensorflow as tf

        return tf.nest.map_structure(reduce_one, value)


def _tf_config_cluster():
    """The cluster of `TF_CONFIG` (`{}` when unset), failing on bad JSON."""
    text = os.environ.get("TF_CONFIG")
    if not text:
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"TF_CONFIG is not valid JSON ({error}). Received: "
            f"TF_CONFIG={text!r}") from None
    if not isinstance(config, dict):
        raise ValueError("TF_CONFIG must be a JSON object with `cluster` "
                         f"and `task` keys. Received: TF_CONFIG={text!r}")
    return config.get("cluster") or {}


def shard_by_data(dataset):
    """`dataset` with the `DATA` auto-shard policy for multi-worker input.

    Our pipelines are built from in-memory arrays (`from_tensor_slices`)
    or generated on the fly, not read from files, so `FILE` sharding has
    nothing to split and `AUTO` only falls back to `DATA` after a warning.
    Under `DATA` every worker runs the whole (identically seeded) pipeline,
    each global batch is split into per-replica batches and every worker
    keeps its own replicas' share: all workers see disjoint examples, and
    a step uses exactly the global batch a single device would. Other
    strategies ignore the option.

    Args:
        dataset: `tf.data.Dataset`; other input (a `PyDataset`) is
            returned as it is.

    Returns:
        The same dataset with the option set.
    """
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is None or not isinstance(dataset,
                                            tensorflow.data.Dataset):
        return dataset
    options = tensorflow.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tensorflow.data.experimental.AutoShardPolicy.DATA)
    return dataset.with_options(options)


def _tpu_strategy(tpu_address):
    import tensorflow as tf

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
    """Whether this worker writes checkpoints, logs and exports.

    Without a cluster (one machine, or a TPU) that is the only worker; in a
    `TF_CONFIG` cluster it is the `chief` task, or `worker` 0 when the
    cluster has no `chief`.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    import tensorflow as tf

    if isinstance(strategy, tf.distribute.TPUStrategy):
        return True  # One client drives the whole TPU system.
    return task_type in (None, "chief") or (
        task_type == "worker" and task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict())


def task_name(strategy):
    """`"<task_type>-<task_id>"` of this worker, or `"local"`."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_type is None:
        return "local"
    return f"{resolver.task_type}-{resolver.task_id}"
