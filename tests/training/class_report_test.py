"""Per-class precision, recall and F1 against a per-image count written
independently of the confusion matrix, and the confusion-matrix figure."""

import numpy as np
import pytest

from keras_caps.training.class_report import check_single_label
from keras_caps.training.class_report import class_report


def _reference(labels, predicted, num_classes):
    """Per-class (precision, recall, f1, support) by counting image by
    image (None where undefined)."""
    rows = []
    for cls in range(num_classes):
        hits = sum(1 for t, p in zip(labels, predicted) if t == p == cls)
        called = sum(1 for p in predicted if p == cls)
        support = sum(1 for t in labels if t == cls)
        precision = hits / called if called else None
        recall = hits / support if support else None
        f1 = (None if precision is None or recall is None else
              0.0 if precision + recall == 0 else
              2 * precision * recall / (precision + recall))
        rows.append((precision, recall, f1, support))
    return rows


def test_class_report_matches_an_image_by_image_count():
    random = np.random.default_rng(3)
    # Seven classes: class 5 is absent from the test set, class 6 is never
    # predicted, so both averages meet undefined values.
    labels = random.choice([0, 1, 2, 3, 4, 6], size=200)
    predicted = np.where(random.random(200) < 0.6, labels,
                         random.choice([0, 1, 2, 3, 4, 5], size=200))
    predicted[predicted == 6] = 0
    names = [f"class {index}" for index in range(7)]
    report = class_report(labels, predicted, names)
    reference = _reference(labels.tolist(), predicted.tolist(), 7)
    for entry, (precision, recall, f1, support) in zip(report["classes"],
                                                       reference):
        assert entry["support"] == support
        for key, expected in (("precision", precision), ("recall", recall),
                              ("f1", f1)):
            if expected is None:
                assert entry[key] is None, (entry, key)
            else:
                assert entry[key] == pytest.approx(expected), (entry, key)
    assert report["classes"][5]["recall"] is None
    assert report["classes"][6]["precision"] is None
    present = [row for row in reference if row[3] > 0]
    supports = np.array([row[3] for row in present], "float64")
    for index, key in enumerate(("precision", "recall", "f1")):
        values = np.array([row[index] or 0.0 for row in present])
        assert report["macro"][key] == pytest.approx(values.mean())
        assert report["weighted"][key] == pytest.approx(
            (values * supports).sum() / supports.sum())
    assert report["accuracy"] == pytest.approx(np.mean(labels == predicted))
    assert report["images"] == 200
    matrix = np.array(report["confusion_matrix"])
    assert matrix.shape == (7, 7) and matrix.sum() == 200
    assert matrix[2, 4] == np.sum((labels == 2) & (predicted == 4))
    assert [entry["class"] for entry in report["classes"]] == names


def test_a_perfect_and_a_collapsed_classifier():
    labels = np.array([0, 1, 2, 2])
    perfect = class_report(labels, labels, ["a", "b", "c"])
    assert perfect["macro"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    # Every image called "c": recall 1 for c and 0 for the others; the
    # precision of the classes never predicted counts as 0.
    collapsed = class_report(labels, np.full(4, 2), ["a", "b", "c"])
    assert collapsed["classes"][2]["precision"] == 0.5
    assert collapsed["macro"]["precision"] == pytest.approx(0.5 / 3)
    assert collapsed["macro"]["recall"] == pytest.approx(1 / 3)


def test_multi_digit_datasets_are_refused():
    with pytest.raises(ValueError, match="one class per image"):
        check_single_label("multi_mnist")
    check_single_label("mnist")


@pytest.mark.parametrize("num_classes, annotated", [(3, True), (50, False)])
def test_confusion_figure_colours_rows_by_their_share(num_classes,
                                                      annotated):
    pytest.importorskip("matplotlib")
    from keras_caps.visualization import plot_confusion_matrix

    random = np.random.default_rng(0)
    labels = random.integers(0, num_classes, 400)
    predicted = np.where(random.random(400) < 0.7, labels,
                         random.integers(0, num_classes, 400))
    report = class_report(labels, predicted,
                          [str(index) for index in range(num_classes)])
    figure = plot_confusion_matrix(report)
    axes = figure.axes[0]
    shares = axes.images[0].get_array()
    matrix = np.array(report["confusion_matrix"], "float64")
    np.testing.assert_allclose(
        shares, matrix / np.maximum(matrix.sum(1, keepdims=True), 1))
    assert len(axes.texts) == (num_classes ** 2 if annotated else 0)
    assert len(axes.get_xticks()) <= 40
    assert "accuracy" in axes.get_title()
