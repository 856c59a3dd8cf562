"""A `keras-caps` process killed at a chosen backup, for resume tests."""

# Runs `keras-caps` with the arguments after the first two, and SIGKILLs
# the process right after the backup of (epoch, steps done in it) given as
# the first two arguments is written: `python -c KILLED_AFTER_BACKUP epoch
# steps train ...`.
KILLED_AFTER_BACKUP = """
import os, signal, sys
from keras_caps import cli
from keras_caps.training import resumable_backup

save = resumable_backup.ResumableBackup._save
stop = (int(sys.argv[1]), int(sys.argv[2]))

def save_then_die(self, epoch, steps_done):
    save(self, epoch, steps_done)
    if (epoch, steps_done) == stop:
        os.kill(os.getpid(), signal.SIGKILL)

resumable_backup.ResumableBackup._save = save_then_die
sys.exit(cli.main(sys.argv[3:]))
"""
