"""The class report of `evaluate(..., class_report=True)` and
`evaluate_export(..., class_report=True)`: every test image's predicted
class against its label, as `keras_caps.training.class_report` scores
them, with the model's class names."""

import keras
import numpy as np

from keras_caps import model_roles as roles
from keras_caps.inference import find_class_names
from keras_caps.inference import serving_model
from keras_caps.training.class_report import class_report
from keras_caps.training.data_batches import numpy_batches


def keras_class_report(network, test, model_path):
    """The class report of the `.keras` model `network` (loaded from
    `model_path`) on the batches `test` (`evaluate`'s), scored by its
    serving graph (image to class scores, for every model, as its exports
    serve it)."""
    served = serving_model(network)
    labels, predicted = [], []
    for inputs, targets in numpy_batches(test):
        one_hot = (targets[roles.LENGTH] if isinstance(targets, dict)
                   else targets)
        scores = served.predict_on_batch(
            np.asarray(roles.batch_images(inputs)))
        labels.append(np.argmax(one_hot, -1))
        predicted.append(np.argmax(keras.ops.convert_to_numpy(scores), -1))
    return report_with_names(np.concatenate(labels),
                             np.concatenate(predicted), model_path,
                             int(served.outputs[0].shape[-1]))


def report_with_names(labels, predicted, model_path, num_classes):
    """`class_report` with the class names kept beside the model (or in
    the export), else the class ids as names."""
    names = find_class_names(model_path) or [
        str(index) for index in range(num_classes)]
    return class_report(labels, predicted, names)
