"""Training: strategies, the training recipe and its callbacks (TensorFlow,
JAX and PyTorch)."""

from keras_caps.training.best_checkpoint import BestCheckpoint
from keras_caps.training.export_evaluation import evaluate_export
from keras_caps.training.run_evaluation import evaluate
from keras_caps.training.strategy import STRATEGIES
from keras_caps.training.strategy import get_strategy
from keras_caps.training.train_run import train
from keras_caps.training.training_settings import PRECISIONS
from keras_caps.training.training_settings import PROTOCOLS
from keras_caps.training.training_settings import TrainingSettings
