"""smallNORB's novel-viewpoint splits (Hinton, Sabour & Frosst 2018, §5.1).

"Matrix capsules with EM routing" (ICLR 2018), section 5.1
("Generalization to novel viewpoints"), trains on the third of smallNORB's
training images seen from six azimuths (300, 320, 340, 0, 20 and 40
degrees) and tests on the two thirds of the test images seen from the
other twelve (60 to 280 degrees); in a second experiment it trains on the
three smallest elevations (30, 35 and 40 degrees) and tests on the six
larger ones (45 to 70 degrees). Models are compared at matched accuracy on
the familiar viewpoints.

The viewpoint labels are TFDS' (`tensorflow_datasets` `smallnorb` 2.0.0,
`datasets/smallnorb/smallnorb_dataset_builder.py`): `label_elevation` is a
`ClassLabel` of 9 classes, 0..8 for 30, 35, .., 70 degrees (steps of 5);
`label_azimuth` a `ClassLabel` of 18 classes, 0..17 for 0, 20, .., 340
degrees: the original files store the azimuth as 0, 2, .., 34 (tens of
degrees) and TFDS halves it, so label `k` is `20 * k` degrees. The paper's
familiar azimuths are therefore the labels 15, 16, 17, 0, 1 and 2, its
familiar elevations the labels 0, 1 and 2.

Each viewpoint (azimuth, elevation) holds the same number of images in
both splits (5 categories x 5 instances x 6 lightings x the other angle's
values), so the familiar training images are 8,100 of 24,300, the familiar
test images 8,100 and the novel test images 16,200, for either experiment.

NumPy only: usable without TensorFlow.
"""

import numpy as np

# `viewpoints` -> (the TFDS feature, its familiar labels).
VIEWPOINT_FEATURES = {"azimuth": "label_azimuth",
                      "elevation": "label_elevation"}
FAMILIAR_LABELS = {"azimuth": (15, 16, 17, 0, 1, 2),
                   "elevation": (0, 1, 2)}
NUM_LABELS = {"azimuth": 18, "elevation": 9}
# The datasets with viewpoint labels.
VIEWPOINT_DATASETS = ("smallnorb",)
# The loader's extra test splits under `viewpoints`.
TEST_SPLITS = ("test_familiar", "test_novel")


def degrees(viewpoints, labels):
    """The angles in degrees of TFDS viewpoint labels.

    Args:
        viewpoints: str. `"azimuth"` or `"elevation"`.
        labels: int array of TFDS `label_azimuth` or `label_elevation`.

    Returns:
        int64 array: `20 * label` for azimuths, `30 + 5 * label` for
        elevations.

    Example:

    >>> degrees("azimuth", [15, 0, 2]).tolist()
    [300, 0, 40]
    >>> degrees("elevation", [0, 8]).tolist()
    [30, 70]
    """
    check_viewpoints("smallnorb", viewpoints)
    labels = np.asarray(labels).astype("int64")
    if viewpoints == "azimuth":
        return 20 * labels
    return 30 + 5 * labels


def check_viewpoints(dataset, viewpoints):
    """Refuses a viewpoint split that does not exist.

    Args:
        dataset: str. The dataset.
        viewpoints: `None`, `"azimuth"` or `"elevation"`.

    Returns:
        `viewpoints`.

    Raises:
        ValueError: `viewpoints` on a dataset without viewpoint labels, or
            an unknown `viewpoints`; the message names both.

    Example:

    >>> check_viewpoints("smallnorb", "azimuth")
    'azimuth'
    >>> check_viewpoints("mnist", None) is None
    True
    """
    if viewpoints is None:
        return None
    if dataset not in VIEWPOINT_DATASETS:
        raise ValueError(
            "Received an invalid value for `viewpoints`: only "
            f"{', '.join(VIEWPOINT_DATASETS)} has viewpoint labels "
            f"(azimuth and elevation), {dataset!r} has none. Drop "
            "`viewpoints` (--viewpoints). Received: "
            f"dataset={dataset!r}, viewpoints={viewpoints!r}")
    if viewpoints not in VIEWPOINT_FEATURES:
        raise ValueError(
            "Received an invalid value for `viewpoints`, expected one of "
            f"{sorted(VIEWPOINT_FEATURES)} or None. Received: "
            f"viewpoints={viewpoints!r}")
    return viewpoints


def familiar_mask(viewpoints, labels):
    """Which images are seen from the familiar (training) viewpoints.

    Args:
        viewpoints: str. `"azimuth"` or `"elevation"`.
        labels: int array of the images' TFDS `label_azimuth` (for
            `"azimuth"`) or `label_elevation` (for `"elevation"`).

    Returns:
        bool array of the shape of `labels`: `True` for the familiar
        viewpoints of Hinton et al. 2018, §5.1 (`FAMILIAR_LABELS`).

    Raises:
        ValueError: a label outside the feature's classes.

    Example:

    >>> familiar_mask("azimuth", [0, 3, 14, 15, 17]).tolist()
    [True, False, False, True, True]
    >>> familiar_mask("elevation", [2, 3]).tolist()
    [True, False]
    """
    check_viewpoints("smallnorb", viewpoints)
    labels = np.asarray(labels)
    if labels.size and (labels.min() < 0
                        or labels.max() >= NUM_LABELS[viewpoints]):
        raise ValueError(
            f"Expected {VIEWPOINT_FEATURES[viewpoints]} labels in [0, "
            f"{NUM_LABELS[viewpoints] - 1}]. Received labels from "
            f"{labels.min()} to {labels.max()}")
    return np.isin(labels, FAMILIAR_LABELS[viewpoints])
