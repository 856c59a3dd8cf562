import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from keras_caps.training import get_strategy


def _run_python(script, timeout=600):
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
        text=True, timeout=timeout,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_unknown_strategy():
    with pytest.raises(ValueError, match="Unknown `strategy`.*'gpus'"):
        get_strategy("gpus")


def test_tpu_without_tpu_is_a_clear_error():
    with pytest.raises(ValueError, match="No TPU could be resolved"):
        get_strategy("tpu")


def test_multi_worker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        get_strategy("multi_worker")


def test_builder_and_pipeline_under_mirrored_strategy_on_two_cpus(tmp_path):
    """EfficientCapsNet built in scope trains on a distributed dataset."""
    from keras_caps.testing import synthetic_digits
    from keras_caps.testing import write_idx_dataset

    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(64), synthetic_digits(32))
    record = _run_python(f"""
        import json
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        import keras_caps
        from keras_caps import datasets
        from keras_caps.training import get_strategy
        strategy = get_strategy("mirrored")
        train = datasets.load("mnist", "train", batch_size=16,
                              data_dir={data_dir!r})
        with strategy.scope():
            model = keras_caps.applications.EfficientCapsNet("mnist")
        history = model.fit(train, epochs=1, verbose=0, shuffle=False)
        distributed = strategy.experimental_distribute_dataset(train)
        batch = next(iter(distributed))
        print(json.dumps({{
            "replicas": strategy.num_replicas_in_sync,
            "loss": history.history["loss"][0],
            "per_replica": [int(t.shape[0]) for t in
                            strategy.experimental_local_results(
                                batch[0]["image"])],
        }}))
    """)
    assert record["replicas"] == 2
    assert record["per_replica"] == [8, 8]
    assert math.isfinite(record["loss"])


def test_multi_worker_rejects_bad_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        get_strategy("multi_worker")


def test_recipe_datasets_shard_by_data():
    import tensorflow as tf

    from keras_caps.training.strategy import shard_by_data

    dataset = shard_by_data(tf.data.Dataset.range(4).batch(2))
    assert (dataset.options().experimental_distribute.auto_shard_policy
            == tf.data.experimental.AutoShardPolicy.DATA)


class _FakeContext:
    coordination_service = None

    def __init__(self, initialized):
        self._initialized = initialized
        self.service_types = []

    def configure_coordination_service(self, service_type):
        self.service_types.append(service_type)


@pytest.mark.single_backend
@pytest.mark.parametrize("initialized", [False, True])
def test_coordination_service_off_warns_when_it_cannot_be(
        monkeypatch, caplog, initialized):
    """#27 review: an already initialised TensorFlow ignores the setting;
    the watchdog then cannot bound TensorFlow's wait, and the log says
    so."""
    from tensorflow.python.eager import context

    from keras_caps.training import strategy

    fake = _FakeContext(initialized)
    monkeypatch.setattr(context, "context", lambda: fake)
    with caplog.at_level("WARNING"):
        strategy._without_coordination_service()
    assert fake.service_types == [""]
    warned = [record.getMessage() for record in caplog.records
              if "watchdog (--worker-timeout) cannot bound" in
              record.getMessage()]
    assert len(warned) == initialized, caplog.text


@pytest.mark.single_backend
def test_coordination_service_api_moved_is_logged(monkeypatch, caplog):
    from tensorflow.python.eager import context

    from keras_caps.training import strategy

    monkeypatch.delattr(context, "context")
    with caplog.at_level("WARNING"):
        strategy._without_coordination_service()
    assert "its API moved" in caplog.text
