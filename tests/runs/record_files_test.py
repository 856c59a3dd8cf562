"""`read_json_record`: a broken record is an error that names its file."""

import pytest

from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record


@pytest.mark.single_backend
def test_reads_an_object(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"settings": {"seed": 1}}')
    assert read_json_record(str(path)) == {"settings": {"seed": 1}}


@pytest.mark.single_backend
@pytest.mark.parametrize("content, reason", [
    ('{"settings": \x01}', "not valid JSON"),
    ('{"settings": ', "not valid JSON"),
    ("", "not valid JSON"),
    (b"\xff\xfe{}", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, found list"),
])
def test_broken_records_name_the_file(tmp_path, content, reason):
    path = tmp_path / "metrics.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(UnreadableRecordError) as raised:
        read_json_record(str(path))
    assert str(path) in str(raised.value)
    assert reason in str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert raised.value.path == str(path)


@pytest.mark.single_backend
def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json_record(str(tmp_path / "absent.json"))
