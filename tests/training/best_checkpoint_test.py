import os

import keras

from keras_caps.testing import TestCase
from keras_caps.training import BestCheckpoint


class BestCheckpointTest(TestCase):
    def test_missing_monitor_key_raises_listing_keys(self):
        callback = BestCheckpoint(os.path.join(self.get_temp_dir(),
                                               "best.keras"),
                                  monitor="val_Efficient_CapsNet_accuracy")
        with self.assertRaisesRegex(
                ValueError, "val_Efficient_CapsNet_accuracy.*Available keys: "
                "\\['loss', 'val_length_multi_digit_accuracy'\\]"):
            callback.on_epoch_end(0, {"loss": 1.0,
                                      "val_length_multi_digit_accuracy": 0.5})

    def test_auto_monitor_without_validation_raises(self):
        callback = BestCheckpoint(os.path.join(self.get_temp_dir(),
                                               "best.keras"))
        with self.assertRaisesRegex(ValueError, "No validation accuracy"):
            callback.on_epoch_end(0, {"loss": 1.0, "accuracy": 0.5})

    def test_keeps_best_and_resumes_its_state(self):
        path = os.path.join(self.get_temp_dir(), "best.keras")
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        callback = BestCheckpoint(path)
        callback.set_model(model)
        callback.on_epoch_end(0, {"val_accuracy": 0.5})
        callback.on_epoch_end(1, {"val_accuracy": 0.4})
        self.assertEqual((callback.best, callback.best_epoch), (0.5, 0))
        resumed = BestCheckpoint(path)
        resumed.set_model(model)
        resumed.on_train_begin()
        self.assertEqual((resumed.best, resumed.best_epoch), (0.5, 0))
        resumed.on_epoch_end(2, {"val_accuracy": 0.45})
        self.assertEqual(resumed.best_epoch, 0)

    def test_an_unreadable_state_is_named_with_the_fix(self):
        path = os.path.join(self.get_temp_dir(), "best.keras")
        for text, reason in (('{"best": 0.5, "epo', "not valid JSON"),
                             ('{"best": 0.5}', "lacks 'epoch'")):
            with open(path + ".json", "w") as file:
                file.write(text)
            with self.assertRaisesRegex(
                    ValueError, f"best.keras.json.*{reason}.*Delete both "
                    "files"):
                BestCheckpoint(path).on_train_begin()
