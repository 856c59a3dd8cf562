"""`keras-caps compare`: which routing, and does it beat a CNN.

`compare(ComparisonSettings(routers, dataset, seeds=...), output_dir=...)`
trains every compared model (the routers of `CapsuleClassifier`, the CNN
and the controls of `keras_caps.applications.MODELS`) with the recipe of
`keras-caps train`, one model per seed, evaluates each on the same
clean, corrupted and attacked test images and writes the table with its
statistics. The modules, in the order the data flows:

- `comparison_settings`: `ComparisonSettings`, what a comparison is (the
  schema of `compare.json`); `compared_models`: the models it can train.
- `comparison`: `compare` itself; `comparison_folder`: the folder it
  claims; `model_runs`: one model's run and evaluation.
- `comparison_process`: each model trained and evaluated in a process of
  its own; `shards`: a share of the models per machine.
- `user_data_comparison`, `multi_digit_comparison`, `comparison_attacks`:
  what a user's dataset, MultiMNIST and adversarial attacks add.
- `comparison_statistics`, `comparison_significance`: intervals and the
  paired tests against a reference model.
- `comparison_results`: the results record; `comparison_report`,
  `comparison_tables`, `learning_curves`: the written tables and figures.

It builds on `keras_caps.training` (each model is a training run),
`keras_caps.evaluation` (robustness, attacks, predictions) and
`keras_caps.runs` (records and file safety); nothing below imports it.
"""

from keras_caps.compare.compared_models import comparable_models
from keras_caps.compare.compared_models import default_models
from keras_caps.compare.comparison import compare
from keras_caps.compare.comparison_settings import ComparisonSettings
