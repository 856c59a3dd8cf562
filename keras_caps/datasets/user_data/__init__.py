"""Datasets a user brings: a folder of class subfolders (`folder:PATH`), a
NumPy `.npz` file (`npz:PATH`) or a TFDS dataset (`tfds:NAME`).

`user_dataset` reads a spec (`read_user_dataset`, `UserDataset`); the
readers are `image_folder`, `npz_arrays` and `tfds_images` (which imports
TensorFlow and TFDS when it reads), sharing `image_arrays` (the decoded
images and their conversion) and `image_memory` (whether they fit in
memory); `image_shifts` is their training augmentation (`tf.data`).
"""

from keras_caps.datasets.user_data import image_arrays
from keras_caps.datasets.user_data import image_folder
from keras_caps.datasets.user_data import image_memory
from keras_caps.datasets.user_data import npz_arrays
from keras_caps.datasets.user_data import user_dataset
