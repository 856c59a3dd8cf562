"""Run records and file safety: what the lab writes, and how.

Everything the command line writes goes through this package, so that
nothing a user wrote is deleted or silently overwritten and no record is
left half-written:

- `RunFolder`: a training run's output folder, its `run.json` (the
  settings that made it, how far it got) and the files it owns.
- `RunLock` (`run.lock`): one run per folder at a time; a second one
  stops with `FolderInUseError`, naming the owner.
- `write_json_atomically`, `write_text_atomically`, `write_atomically`,
  `save_model_atomically`: a write leaves the old file or the new one.
- `read_json_record`: a truncated or hand-edited record is an
  `UnreadableRecordError` naming the file.
- `check_output_path`: a file a command writes at a path the user names
  (`--output`) carries the command's mark; anything else is refused.
- `is_keras_caps_export`, `check_export_target`: an export's manifest
  lists every file it holds; only an unchanged export of keras_caps is
  ever replaced.

It imports nothing else from keras_caps but the reading of an export's
manifest (`keras_caps.inference.export_contents`, which the library's
`ExportedClassifier` checks too): training, evaluation, export,
visualization and the command line build on it.
"""

from keras_caps.runs.atomic_files import save_model_atomically
from keras_caps.runs.atomic_files import write_atomically
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.atomic_files import write_text_atomically
from keras_caps.runs.export_manifest import check_export_target
from keras_caps.runs.export_manifest import is_keras_caps_export
from keras_caps.runs.output_files import WRITTEN_BY
from keras_caps.runs.output_files import check_output_path
from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record
from keras_caps.runs.run_folder import RunFolder
from keras_caps.runs.run_lock import FolderInUseError
from keras_caps.runs.run_lock import RunLock
