"""`keras-caps compare`: which routing, and does it beat a CNN.

`compare(routers, dataset, seeds=..., output_dir=...)` trains every
compared model (the routers of `CapsuleClassifier`, the CNN and the
controls of `COMPARED_MODELS`) with the recipe of `keras-caps train`, one
model per seed, evaluates each on the same clean, corrupted and attacked
test images and writes the table with its statistics. The modules, in the
order the data flows:

- `comparison`: the settings (`compare.json`), the models' runs and the
  results record; `compare` itself.
- `comparison_process`: each model trained and evaluated in a process of
  its own; `shards`: a share of the models per machine.
- `user_data_comparison`, `multi_digit_comparison`, `comparison_attacks`:
  what a user's dataset, MultiMNIST and adversarial attacks add.
- `comparison_statistics`, `comparison_significance`: intervals and the
  paired tests against a reference model.
- `comparison_tables`, `learning_curves`: the written tables and figures.

It builds on `keras_caps.training` (each model is a training run),
`keras_caps.evaluation` (robustness, attacks, predictions) and
`keras_caps.runs` (records and file safety); nothing below imports it.
"""

from keras_caps.compare.comparison import COMPARED_MODELS
from keras_caps.compare.comparison import compare
from keras_caps.compare.comparison import default_models
