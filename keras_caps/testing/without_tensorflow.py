"""A Python prelude that makes TensorFlow look uninstalled, for tests
that prove a path needs no TensorFlow."""

# Makes TensorFlow look uninstalled in the process it starts: every import
# finder answers `None` for it (as `importlib.util.find_spec`, which
# PyTorch and Keras ask, then does), so `import tensorflow` fails. What
# runs after it proves that it needs no TensorFlow.
REFUSE_TENSORFLOW = """
import sys

class _WithoutTensorFlow:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tensorflow":
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, name):
        return getattr(self.finder, name)

sys.meta_path[:] = [_WithoutTensorFlow(finder) for finder in sys.meta_path]
"""
