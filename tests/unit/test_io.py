import json

import pytest

from rlgate._errors import RlgateError
from rlgate._io import SCHEMA_VERSION, write_json_atomic, write_text_atomic


class TestWriteJsonAtomic:
    def test_write_json_atomic_adds_schema_version(self, tmp_path):
        out = write_json_atomic(tmp_path / "a" / "r.json", {"verdict": "go"})
        doc = json.loads(out.read_text())
        assert doc == {"schema_version": SCHEMA_VERSION, "verdict": "go"}

    def test_write_json_atomic_leaves_no_temp_files(self, tmp_path):
        write_json_atomic(tmp_path / "r.json", {"x": 1})
        assert [p.name for p in tmp_path.iterdir()] == ["r.json"]

    def test_write_text_atomic_refuses_to_overwrite_an_input(self, tmp_path):
        src = tmp_path / "metrics.json"
        src.write_text("{}")
        with pytest.raises(RlgateError, match="one of the inputs"):
            write_text_atomic(src, "clobbered", inputs=[str(src)])
        assert src.read_text() == "{}"
