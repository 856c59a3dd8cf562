"""Input pipelines of the capsule-network benchmarks (TensorFlow `tf.data`).

`load(dataset, split, ...)` returns batches for `model.fit`; `DATASETS`
describes each dataset. Images are yielded as raw pixels (float32, 0-255
scale); models scale them themselves.
"""

from keras_caps.datasets import augmentation
from keras_caps.datasets import fashion_mnist
from keras_caps.datasets import holdout
from keras_caps.datasets import idx
from keras_caps.datasets import mnist
from keras_caps.datasets import multi_mnist
from keras_caps.datasets import pipeline
from keras_caps.datasets import smallnorb
from keras_caps.datasets import sources
from keras_caps.datasets.dataset_info import DATASETS
from keras_caps.datasets.dataset_info import DatasetInfo
from keras_caps.datasets.loader import load
