"""Input pipelines of the capsule-network benchmarks (`tf.data` or NumPy).

`load(dataset, split, ...)` returns batches for `model.fit`; `DATASETS`
describes each dataset. Images are yielded as raw pixels (float32, 0-255
scale); models scale them themselves.

Imported here, and free of TensorFlow (so they work with the JAX or
PyTorch backend on a machine without it): `load` and `training_statistics`
(`loader`), `DATASETS`, `idx` (the IDX reader), `holdout` (the validation
split), `viewpoints`, `affnist`, `augmentation_parameters`,
`numpy_augmentation`, `image_batches`, `multi_mnist_batches` and
`numpy_pipeline` (the NumPy pipeline of mnist, fashion_mnist and
multi_mnist).

The `tf.data` pipelines import TensorFlow, so import them yourself when
you want them: `from keras_caps.datasets import mnist` (also
`fashion_mnist`, `mnist_canvas`, `multi_mnist`, `smallnorb`, `cifar`,
`augmentation`, `pipeline`, `sources`, `crops`, `tfds_splits`,
`prepared_folders`, `data_record`). A dataset a user brings (a folder, a
`.npz` file, a TFDS name) is `keras_caps.datasets.user_data`.
"""

from keras_caps.datasets import affnist
from keras_caps.datasets import augmentation_parameters
from keras_caps.datasets import holdout
from keras_caps.datasets import idx
from keras_caps.datasets import image_batches
from keras_caps.datasets import multi_mnist_batches
from keras_caps.datasets import numpy_augmentation
from keras_caps.datasets import numpy_pipeline
from keras_caps.datasets import viewpoints
from keras_caps.datasets.dataset_info import DATASETS
from keras_caps.datasets.dataset_info import DatasetInfo
from keras_caps.datasets.loader import load
from keras_caps.datasets.loader import training_statistics
