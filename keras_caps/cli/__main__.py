"""`python -m keras_caps.cli`: the `keras-caps` command."""

import sys

from keras_caps.cli import main

sys.exit(main())
