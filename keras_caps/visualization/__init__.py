"""Figures of what capsule networks learned, as matplotlib figures.

matplotlib is an optional extra: `pip install "keras-caps[plot]"`. This
package imports it only when a figure is drawn, and then says how to
install it if it is missing. Every `plot_*` function returns a
`matplotlib.figure.Figure` drawn by the non-interactive Agg canvas: it
displays in notebooks and saves with `figure.savefig("figure.png")`, and
never opens a window. The matching functions without `plot_` return the
numbers behind each figure.

- `plot_reconstructions`: inputs next to their reconstructions from the
  predicted capsule.
- `plot_capsule_perturbations`: a class capsule decoded with each dimension
  swept over -0.25..0.25 (Sabour et al., Figure 4).
- `plot_routing_maps`: coupling coefficients of `FCCaps`, `DynamicRouting`
  and other routing layers for one input.
- `plot_credit_overlays`: the credit of each image position for a class
  through `VectorRouting` layers, over the image.
- `plot_training_curves`: loss and accuracy per epoch from `history.csv`.
- `plot_confusion_matrix`: a class report's confusion matrix
  (`keras-caps evaluate --class-report`).

`keras-caps plot <kind>` writes the same figures as PNG files
(`plot_to_file`).
"""

from keras_caps.visualization.capsule_perturbation_grid import PAPER_OFFSETS
from keras_caps.visualization.capsule_perturbation_grid import (
    capsule_perturbations,
)
from keras_caps.visualization.capsule_perturbation_grid import (
    plot_capsule_perturbations,
)
from keras_caps.visualization.confusion_matrix_figure import (
    plot_confusion_matrix,
)
from keras_caps.visualization.credit_overlays import credit_maps
from keras_caps.visualization.credit_overlays import plot_credit_overlays
from keras_caps.visualization.plot_files import PLOT_KINDS
from keras_caps.visualization.plot_files import plot_to_file
from keras_caps.visualization.reconstruction_grid import plot_reconstructions
from keras_caps.visualization.reconstruction_grid import reconstructions
from keras_caps.visualization.routing_maps import plot_routing_maps
from keras_caps.visualization.routing_maps import routing_couplings
from keras_caps.visualization.routing_maps import routing_layer_names
from keras_caps.visualization.training_curves import plot_training_curves
from keras_caps.visualization.training_curves import read_training_log
