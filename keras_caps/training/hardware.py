"""`describe_hardware`: the devices a run trained on, for its records."""

import os
import platform

from keras_caps.training.backend_runtime import describe_devices


def describe_hardware():
    """A short description of the devices the backend trains on."""
    gpus = describe_devices()
    if gpus is not None:
        return gpus
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"CPU: {cpu}, {os.cpu_count()} cores"
