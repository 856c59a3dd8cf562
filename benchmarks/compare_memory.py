"""Peak memory of `keras-caps compare`: many models against one.

The peak memory of a comparison should not grow with the number of
models. This runs, each in a fresh process on the same tiny IDX data, a
comparison of one model (one router, one seed) and one of every router x
2 seeds, for each `isolation`, and prints both peaks (the largest
`ru_maxrss` of the process and of its children: the models' processes)
and their ratio; the issue's bar is 1.2.

    python benchmarks/compare_memory.py
"""

import json
import os
import subprocess
import sys
import tempfile

_CHILD = """
import json, resource, sys
from keras_caps.compare import ComparisonSettings, compare
routers, seeds, data_dir, output_dir, isolation = json.loads(sys.argv[1])
compare(ComparisonSettings(routers, "mnist", seeds=seeds, epochs=1,
                           steps_per_epoch=3, batch_size=16,
                           corruptions={"noise": [0.2]}),
        output_dir=output_dir, data_dir=data_dir, isolation=isolation)
print(json.dumps(max(
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)))
"""


def peak_kib(routers, seeds, data_dir, output_dir, isolation):
    result = subprocess.run(
        [sys.executable, "-c", _CHILD,
         json.dumps([routers, seeds, data_dir, output_dir, isolation])],
        capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    from keras_caps.compare.compared_models import comparable_models
    from keras_caps.testing import synthetic_digits
    from keras_caps.testing import write_idx_dataset

    folder = tempfile.mkdtemp()
    data_dir = write_idx_dataset(os.path.join(folder, "mnist"),
                                 synthetic_digits(200, seed=0),
                                 synthetic_digits(100, seed=1))
    routers = comparable_models()
    isolations = sys.argv[1:] or ["process", "session"]
    for isolation in isolations:
        one = peak_kib(["self_attention"], [0], data_dir,
                       os.path.join(folder, f"one_{isolation}"), isolation)
        many = peak_kib(routers, [0, 1], data_dir,
                        os.path.join(folder, f"many_{isolation}"),
                        isolation)
        print(f"isolation={isolation}: 1 model: {one / 1024:.0f} MiB peak; "
              f"{len(routers)} routers x 2 seeds: {many / 1024:.0f} MiB "
              f"peak; ratio {many / one:.2f}", flush=True)


if __name__ == "__main__":
    main()
