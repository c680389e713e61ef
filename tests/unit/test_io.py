import json

import pytest

from rlgate.core.errors import RlgateError
from rlgate.core.io import (
    SCHEMA_VERSION,
    read_json,
    read_text,
    read_yaml,
    write_json_atomic,
    write_text_atomic,
)


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


BOMB = "".join(
    f"{k}: &{k} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['x'] * 9)}]\n"
    for p, k in zip(["", "a", "b", "c", "d", "e", "f", "g"], "abcdefgh", strict=True)
)


class TestReadYaml:
    def test_read_yaml_refuses_an_alias_bomb_before_expanding_it(self, tmp_path):
        path = tmp_path / "bomb.yaml"
        path.write_text(BOMB)  # 9**8 = 43 million leaves from ~400 bytes
        with pytest.raises(RlgateError, match="alias bomb"):
            read_yaml(path, what="recipe")

    def test_read_yaml_accepts_modest_aliases(self, tmp_path):
        path = tmp_path / "ok.yaml"
        path.write_text("base: &b {lr: 1.0e-6, steps: 3}\npolicy: *b\nref: *b\n")
        assert read_yaml(path, what="recipe")["ref"] == {"lr": 1.0e-6, "steps": 3}

    def test_read_yaml_refuses_python_tags(self, tmp_path):
        path = tmp_path / "tag.yaml"
        path.write_text("x: !!python/object/apply:os.system ['touch pwned']\n")
        with pytest.raises(RlgateError, match="not valid YAML"):
            read_yaml(path, what="recipe")
        assert not (tmp_path / "pwned").exists()

    def test_read_yaml_refuses_deep_nesting_with_a_message(self, tmp_path):
        path = tmp_path / "deep.yaml"
        path.write_text("a: " + "[" * 20000 + "]" * 20000)
        with pytest.raises(RlgateError, match="nested too deeply"):
            read_yaml(path, what="recipe")


class TestReadText:
    def test_read_text_refuses_bytes_that_are_not_utf8_naming_the_offset(self, tmp_path):
        path = tmp_path / "r.yaml"
        path.write_bytes(b"a: 1\n\xff\xfe")
        with pytest.raises(RlgateError, match=r"recipe is not UTF-8 text \(byte 5"):
            read_text(path, what="recipe")

    def test_read_text_replace_mode_keeps_a_torn_log_readable(self, tmp_path):
        path = tmp_path / "driver.log"
        path.write_bytes(b"step 3\n\xe2\x82")
        assert read_text(path, what="log", errors="replace") == "step 3\n\ufffd"

    def test_read_text_names_a_directory(self, tmp_path):
        with pytest.raises(RlgateError, match="a directory, not a file"):
            read_text(tmp_path, what="site config")

    def test_read_json_names_the_file_and_the_syntax_error(self, tmp_path):
        path = tmp_path / "x.json"
        path.write_text('{"a": ')
        with pytest.raises(RlgateError, match=r"x.json: report is not valid JSON"):
            read_json(path, what="report")


class TestWriteTarget:
    def test_write_text_atomic_refuses_a_directory_naming_it(self, tmp_path):
        with pytest.raises(RlgateError, match=f"cannot write {tmp_path}: it is a directory"):
            write_text_atomic(tmp_path, "x")

    def test_write_text_atomic_replaces_a_symlink_instead_of_writing_through_it(self, tmp_path):
        outside = tmp_path / "outside.txt"
        outside.write_text("keep")
        link = tmp_path / "out" / "report.md"
        link.parent.mkdir()
        link.symlink_to(outside)
        write_text_atomic(link, "new")
        assert outside.read_text() == "keep"
        assert not link.is_symlink() and link.read_text() == "new"


class TestStrictJson:
    def test_write_json_atomic_writes_non_finite_numbers_as_strings(self, tmp_path):
        out = write_json_atomic(tmp_path / "r.json", {"a": float("nan"), "b": [float("-inf"), 1.5]})
        text = out.read_text()
        assert "NaN" not in text and "Infinity" not in text
        doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
        assert doc["a"] == "nan" and doc["b"] == ["-inf", 1.5]
