import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf

from keras_caps.applications import EfficientCapsNet
from keras_caps.applications import inference_model
from keras_caps.export import export_inference_model
from keras_caps.testing import TestCase


class ExportTest(TestCase):
    def test_fresh_process_serves_same_predictions_at_batch_1_and_7(self):
        model = EfficientCapsNet("mnist")
        # Move the batch-norm statistics away from their initial values so
        # the comparison covers inference-mode normalisation.
        for layer in model.layers:
            if layer.name.startswith("batch_norm"):
                layer.moving_mean.assign(
                    np.full(layer.moving_mean.shape, 0.1, "float32"))
        folder = self.get_temp_dir()
        path = os.path.join(folder, "export")
        export_inference_model(model, path, reconstruction=True)
        images = np.random.default_rng(0).uniform(
            0, 255, (7, 28, 28, 1)).astype("float32")
        images_path = os.path.join(folder, "images.npy")
        np.save(images_path, images)
        expected = inference_model(model, reconstruction=True)(images)

        script = textwrap.dedent(f"""
            import json, numpy as np, tensorflow as tf
            images = np.load({images_path!r})
            served = tf.saved_model.load({path!r})
            out = {{}}
            for n in (1, 7):
                result = served.serve(tf.constant(images[:n]))
                out[n] = {{k: v.numpy().tolist() for k, v in result.items()}}
            signature = served.signatures["serving_default"]
            spec = signature.structured_input_signature[1]["image"]
            out["spec"] = [list(spec.shape), spec.dtype.name]
            print(json.dumps(out))
        """)
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True,
            check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        served = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual(served["spec"], [[None, 28, 28, 1], "float32"])
        for n in ("1", "7"):
            count = int(n)
            self.assertAllClose(served[n]["length"],
                                expected["length"][:count], atol=1e-5)
            self.assertAllClose(served[n]["reconstruction"],
                                expected["reconstruction"][:count],
                                atol=1e-5)

    def test_export_replaces_atomically_and_rejects_wrong_shapes(self):
        model = EfficientCapsNet("mnist", reconstruction=False)
        folder = self.get_temp_dir()
        path = os.path.join(folder, "export")
        export_inference_model(model, path)
        export_inference_model(model, path)  # Replaces the old export.
        self.assertEqual(sorted(os.listdir(folder)), ["export"])
        served = tf.saved_model.load(path)
        scores = served.serve(tf.zeros((2, 28, 28, 1)))
        self.assertEqual(tuple(scores.shape), (2, 10))
        with self.assertRaisesRegex((ValueError, TypeError),
                                    "(?s)shape|signature"):
            served.serve(tf.zeros((2, 32, 32, 1)))
