"""rlgate reads a config's YAML exactly as ``OmegaConf.load`` (NeMo RL's ``load_config``) does.

``recipe.load`` parses each file once, with libyaml and OmegaConf's own loader rules (1e-6 a
float, duplicate keys refused, no timestamps) plus the alias budget; these tests hold it to
``OmegaConf.load`` on every YAML file of the repository and on generated documents.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from rlgate.core.errors import RecipeError
from rlgate.recipe.load import _load_yaml

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for d in ("recipes", "ci", "tests") for p in (ROOT / d).rglob("*.yaml"))

#: scalars whose type YAML 1.1, YAML 1.2 and OmegaConf disagree about
TRICKY = [
    "1e-6",
    "1.0e-6",
    "1E6",
    "-1e+3",
    ".5",
    "1_000",
    "0x1F",
    "0o17",
    "017",
    "1:20",
    "1:20.5",
    ".inf",
    "-.Inf",
    ".NaN",
    "yes",
    "No",
    "on",
    "OFF",
    "y",
    "~",
    "null",
    "Null",
    "true",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "'quoted'",
    '"1e-6"',
    "${a.b}",
    "${oc.env:X}",
    "[1, 2e-3]",
    "{x: 1}",
    "=",
    "<<",
    "1.",
    "+.5",
    "0b101",
    "1_0.0_1",
]


def _plain(path: Path) -> object:
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)


def _same_as_omegaconf(path: Path) -> None:
    """rlgate's read of ``path`` is OmegaConf's (values and types), or both refuse it."""
    try:
        want = _plain(path)
    except Exception:
        with pytest.raises(RecipeError):
            _load_yaml(path)
        return
    if not isinstance(want, dict):
        with pytest.raises(RecipeError, match="must be a mapping"):
            _load_yaml(path)
        return
    got = OmegaConf.to_container(_load_yaml(path), resolve=False)
    assert got == want
    assert _types(got) == _types(want)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_yaml_file_of_the_repository_reads_as_omegaconf_reads_it(path: Path) -> None:
    _same_as_omegaconf(path)


def test_the_repository_has_yaml_files_to_compare() -> None:
    assert len(FILES) >= 10 and sum(p.parent.name == "recipes" for p in FILES) >= 4


VALUES = st.one_of(
    st.sampled_from(TRICKY),
    st.from_regex(r"[-+]?[0-9_.eE:]{1,8}", fullmatch=True),
    st.text(alphabet="abc019._-:+ ", min_size=1, max_size=8),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(VALUES, min_size=1, max_size=6), nested=st.booleans())
def test_any_document_reads_with_the_same_types_or_fails_in_both(
    tmp_path: Path, values: list[str], nested: bool
) -> None:
    body = "".join(f"{'  ' if nested else ''}k{i}: {v}\n" for i, v in enumerate(values))
    path = tmp_path / "c.yaml"
    path.write_text(("top:\n" if nested else "") + body, encoding="utf-8")
    _same_as_omegaconf(path)


def _types(value: object) -> object:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


def test_duplicate_keys_are_refused_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("a:\n  b: 1\n  b: 2\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=r"not a valid NeMo RL config: .*duplicate key b"):
        _load_yaml(path)
