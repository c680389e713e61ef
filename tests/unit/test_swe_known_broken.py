"""The bundled known-broken SWE-bench Verified lists: versioned, sourced, and all Verified ids."""

import json

import pytest

from rlgate.core.errors import SweError
from rlgate.swe.known_broken import KNOWN_BROKEN_FILE, known_broken, known_broken_ids
from rlgate.swe.records import verified_ids


class TestKnownBroken:
    def test_every_list_names_its_source_and_only_verified_ids(self):
        lists = known_broken()
        assert {item.name for item in lists} == {"nemo-skills", "swebench-gold-run-2025-01"}
        for item in lists:
            assert item.ids and item.ids <= verified_ids()
            assert "github" in item.source.lower() or "/" in item.source
            assert item.observed

    def test_the_file_is_versioned(self):
        assert json.loads(KNOWN_BROKEN_FILE.read_text())["schema_version"] == 1

    def test_nemo_skills_list_is_the_eleven_documented_instances(self):
        ids = known_broken_ids(("nemo-skills",))
        assert len(ids) == 11 and "django__django-10097" in ids

    def test_union_of_all_lists(self):
        both = known_broken_ids(("nemo-skills",)) & known_broken_ids(("swebench-gold-run-2025-01",))
        assert len(both) == 8 and len(known_broken_ids()) == 11 + 14 - 8

    def test_an_unknown_list_name_is_refused_naming_the_bundled_ones(self):
        with pytest.raises(SweError, match="unknown known-broken list nope") as exc:
            known_broken_ids(("nope",))
        assert "nemo-skills" in str(exc.value)
