import numpy as np

from keras_caps import visualization
from keras_caps.testing import TestCase
from tests.visualization import tiny_models

_LOG = ("epoch,learning_rate,length_accuracy,length_loss,loss,"
        "val_length_accuracy,val_length_loss,val_loss\n"
        "0,0.0005,0.50,0.40,0.90,0.60,0.35,0.80\n"
        "1,0.0004,0.70,0.30,0.60,0.75,0.25,0.55\n"
        "2,0.0003,0.80,0.20,0.40,0.78,0.22,0.45\n")


class TrainingCurvesTest(TestCase):
    def write_log(self, text=_LOG):
        path = self.get_temp_dir() + "/history.csv"
        with open(path, "w") as file:
            file.write(text)
        return path

    def test_curves_plot_the_csv_values(self):
        figure = visualization.plot_training_curves(self.write_log())
        tiny_models.check_png(self, figure, self.get_temp_dir() + "/c.png")
        loss, accuracy = figure.axes
        self.assertEqual(loss.get_title(), "loss")
        self.assertEqual(accuracy.get_title(), "length_accuracy")
        for axes, train, validation in (
                (loss, [0.9, 0.6, 0.4], [0.8, 0.55, 0.45]),
                (accuracy, [0.5, 0.7, 0.8], [0.6, 0.75, 0.78])):
            self.assertAllClose(axes.lines[0].get_xdata(), [1, 2, 3])
            self.assertAllClose(axes.lines[0].get_ydata(), train)
            self.assertAllClose(axes.lines[1].get_ydata(), validation)
            self.assertEqual(axes.lines[0].get_label(), "training")
            self.assertEqual(axes.lines[1].get_label(), "validation")

    def test_chosen_metrics_and_history_dicts(self):
        figure = visualization.plot_training_curves(
            {"loss": [1.0, 0.5], "length_loss": [0.3, 0.2]},
            metrics=["length_loss"])
        (axes,) = figure.axes
        self.assertLen(axes.lines, 1)  # no validation values
        self.assertAllClose(axes.lines[0].get_ydata(), [0.3, 0.2])

    def test_read_training_log(self):
        log = visualization.read_training_log(self.write_log())
        self.assertAllClose(log["val_loss"], [0.8, 0.55, 0.45])
        self.assertEqual(log["learning_rate"].dtype, np.float64)

    def test_clear_errors(self):
        with self.assertRaisesRegex(FileNotFoundError, "history.csv"):
            visualization.read_training_log("missing/history.csv")
        with self.assertRaisesRegex(ValueError, "holds no epochs"):
            visualization.read_training_log(self.write_log("epoch,loss\n"))
        with self.assertRaisesRegex(ValueError, r"no metric \['auc'\]"):
            visualization.plot_training_curves(self.write_log(),
                                               metrics=["auc"])
