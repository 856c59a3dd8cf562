"""Losses of capsule networks."""

from keras_caps.losses.margin_loss import MarginLoss
from keras_caps.losses.margin_loss import margin_loss
from keras_caps.losses.spread_loss import SpreadLoss
from keras_caps.losses.spread_loss import spread_loss
