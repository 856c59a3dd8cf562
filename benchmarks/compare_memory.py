"""Peak memory of `keras-caps compare`: many models against one.

Each model of a comparison trains after `keras.backend.clear_session()`,
so the peak memory of a run should not grow with the number of models.
This runs, each in a fresh process on the same tiny IDX data, a
comparison of one model (one router, one seed) and one of every router x
2 seeds, and prints both peaks (`ru_maxrss`) and their ratio; the issue's
bar is 1.2.

    python benchmarks/compare_memory.py
"""

import json
import os
import subprocess
import sys
import tempfile

_CHILD = """
import json, resource, sys
from keras_caps.evaluation import comparison
routers, seeds, data_dir, output_dir = json.loads(sys.argv[1])
comparison.compare(routers, "mnist", output_dir=output_dir, seeds=seeds,
                   epochs=1, steps_per_epoch=3, batch_size=16,
                   data_dir=data_dir, corruptions={"noise": [0.2]})
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""


def peak_kib(routers, seeds, data_dir, output_dir):
    result = subprocess.run(
        [sys.executable, "-c", _CHILD,
         json.dumps([routers, seeds, data_dir, output_dir])],
        capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    from keras_caps.evaluation.comparison import COMPARED_MODELS
    from keras_caps.testing import synthetic_digits
    from keras_caps.testing import write_idx_dataset

    folder = tempfile.mkdtemp()
    data_dir = write_idx_dataset(os.path.join(folder, "mnist"),
                                 synthetic_digits(200, seed=0),
                                 synthetic_digits(100, seed=1))
    one = peak_kib(["self_attention"], [0], data_dir,
                   os.path.join(folder, "one"))
    routers = list(COMPARED_MODELS)
    many = peak_kib(routers, [0, 1], data_dir, os.path.join(folder, "many"))
    print(f"1 model: {one / 1024:.0f} MiB peak; {len(routers)} routers x 2 "
          f"seeds: {many / 1024:.0f} MiB peak; ratio {many / one:.2f}")


if __name__ == "__main__":
    main()
