"""The history's database URLs: no credential is ever shown, a malformed URL is exit 2.

* A URL's credentials (the user's password, ``password`` / ``sslpassword`` / ``passfile``
  / ``sslkey`` ... query parameters) never reach a message, an output or a JSON document:
  one function, ``rlgate.core.text.redact_url`` (hypothesis over secrets), used by every
  message, on an unreachable server and on a real one (its trust authentication ignores
  the password, so every command that names the database runs).
* A malformed URL (a port out of range, an unknown parameter or value, a host that is not
  one, a driver rlgate does not use) is exit 2 before anything is connected to; only a
  well-formed URL whose server does not answer is exit 3.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.text import md_text, redact_url
from rlgate.history.store import open_store

from .helpers.cli import one_error
from .helpers.cli import run_cli as run
from .helpers.history_inputs import postgres_url
from .helpers.mlperf_runs import RECIPE, mlperf_path

SECRET = "S3CRET"
SECRET_KEYS = ("password", "sslpassword", "passfile", "sslkey", "sslkeylogfile",
               "oauth_client_secret")  # fmt: skip


@pytest.fixture(scope="module")
def closed_port():
    """A port bound but not listening: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


# --- credentials ------------------------------------------------------------------------------


def credential_forms(secret: str, port: int, *, raw: bool = True) -> list[str]:
    """Every way a secret rides in a PostgreSQL URL (encoded as a URL carries it; ``raw``:
    also unencoded in the user part, '@', '/', '?' in it included)."""
    enc = quote(secret, safe="")
    base = f"127.0.0.1:{port}/history"
    return [
        f"postgresql://rlgate:{enc}@{base}",
        *([f"postgresql://rlgate:{secret}@{base}"] if raw else []),
        *(f"postgresql://rlgate@{base}?{key}={enc}" for key in SECRET_KEYS),
        f"postgresql://rlgate@{base}?sslmode=require&password={enc}&application_name=x",
        f"postgresql://rlgate:{enc}@{base}?sslpassword={enc}",
        f"postgresql://rlgate:{enc}@127.0.0.1:port/history?password={enc}",  # unparsable
        f"postgresql://rlgate@{base}?PassWord={enc}",
        *([f"postgresql://rlgate@{base}?scram_client_key={enc}"] if raw else []),
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20))
def test_redact_url_leaves_no_secret_in_any_credential_form(secret: str) -> None:
    secret = SECRET + secret
    for url in credential_forms(secret, 5432):
        shown = redact_url(url)
        assert SECRET not in shown, (url, shown)
        assert "127.0.0.1" in shown and "***" in shown


def test_a_path_and_a_url_without_secrets_are_shown_as_they_are() -> None:
    for text in ("/data/history.db", "postgresql://rlgate@db.example.com:5432/h?sslmode=require",
                 "sqlite:///h.db"):  # fmt: skip
        assert redact_url(text) == text


def test_an_unreachable_server_is_exit_three_and_no_error_shows_a_secret(
    closed_port: int, capsys
) -> None:
    for url in credential_forms(SECRET + "p@ss/w?rd#1", closed_port, raw=False):
        code, out, err = run(["history", "show", "x", "--db", url], capsys)
        assert SECRET not in out + err and "***" in one_error(err), (url, err)
        if ":port/" in url:
            assert code == ExitCode.USAGE and "cannot be parsed" in err, err
        elif "PassWord" in url:  # libpq's names are lower case: not a parameter (exit 2)
            assert code == ExitCode.USAGE and "'PassWord' is not a PostgreSQL" in err, err
        else:
            assert code == ExitCode.INFRA and "Connection refused" in err, (url, err)


@pytest.fixture(scope="module")
def pg_with_password(tmp_path_factory) -> str:
    """A real server's database, its URL with secrets (trust authentication ignores them)."""
    url = postgres_url().replace("postgresql+psycopg://", "postgresql://")
    return f"{url}?password={SECRET}&sslpassword={SECRET}2&application_name=rlgate-test"


def test_no_output_naming_a_real_database_shows_its_password(
    pg_with_password: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    db = pg_with_password
    runs = [
        ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE), "--db", db,
         "--nightly-id", "n1", "--branch", "main", "--json", str(tmp_path / "c.json"),
         "--junit", str(tmp_path / "c.xml")],
        ["history", "show", RECIPE.stem, "--db", db],
        ["history", "flaky", "--db", db, "--json", str(tmp_path / "f.json")],
        ["history", "prune", "--before", "2000-01-01", "--dry-run", "--db", db],
        ["history", "export", str(tmp_path / "r.csv"), "--db", db],
        ["triage", "--candidate", str(tmp_path / "c.xml"), "--db", db,
         "--json", str(tmp_path / "t.json")],
        ["report", "--junit", str(tmp_path / "c.xml"), "--recipe", str(RECIPE), "--db", db,
         "--no-plots", "--out", str(tmp_path / "report")],
    ]  # fmt: skip
    printed = ""
    for args in runs:
        code, out, err = run(args, capsys)
        assert code in (0, 1, 3) and "rlgate: error" not in err, (args, out, err)
        printed += out + err
    monkeypatch.setenv("RLGATE_DB", db)
    code, out, err = run(["history", "show", RECIPE.stem], capsys)
    assert code == 0, err
    printed += out + err
    # the band names where its (zero) promoted runs came from: the database, redacted
    assert "promoted run(s) of" in printed and "password=***" in printed
    files = [tmp_path / n for n in ("c.json", "c.xml", "f.json", "r.csv", "t.json")]
    files += sorted((tmp_path / "report").glob("*.*"))
    assert len(files) >= 8
    for text in [printed, *(f.read_text(encoding="utf-8") for f in files)]:
        assert SECRET not in text
    assert "password=***" in (tmp_path / "c.json").read_text()  # band_source, in the JSON
    assert md_text("password=***") in (tmp_path / "report" / "report.md").read_text()


# --- malformed URLs: exit 2 before connecting ---------------------------------------------------


BAD_URLS = {
    "port-too-large": ("postgresql://u@127.0.0.1:99999/db", "port '99999' is not a TCP port"),
    "port-zero": ("postgresql://u@127.0.0.1:0/db", "port '0' is not a TCP port"),
    "port-negative": ("postgresql://u@127.0.0.1:-5/db", "port '-5' is not a TCP port"),
    "port-in-query": ("postgresql://u@127.0.0.1/db?port=70000", "port '70000' is not a TCP"),
    "sslmode": ("postgresql://u@127.0.0.1:{port}/db?sslmode=bogus",
                "sslmode 'bogus' is not one of disable, allow, prefer"),
    "unknown-parameter": ("postgresql://u@127.0.0.1:{port}/db?colour=red",
                          "'colour' is not a PostgreSQL connection parameter"),
    "timeout-not-a-number": ("postgresql://u@127.0.0.1:{port}/db?connect_timeout=soon",
                             "connect_timeout 'soon' is not an integer"),
    "password-twice": ("postgresql://u@127.0.0.1:{port}/db?password=S3CRETa&password=S3CRETb",
                       "parameter 'password' is given twice"),
    "host-with-space": ("postgresql://u@exa mple.com:{port}/db", "'exa mple.com' is not a host"),
    "password-with-raw-at": ("postgresql://u:p@S3CRET@127.0.0.1:{port}/db",
                             "a '@' in a password is written %40"),
    "control-character": ("postgresql://u@127.0.0.1:{port}/db\x1b[2K", "control character"),
    "unknown-driver": ("postgresql+asyncpg://u@127.0.0.1:{port}/db", "unsupported database"),
    # a percent-encoded control character, in any component (%00 ends libpq's string there)
    "encoded-nul-in-database": ("postgresql://u:S3CRET@127.0.0.1:{port}/db%00",
                                "percent-encoded control character"),
    "encoded-nul-in-user": ("postgresql://u%00x:S3CRET@127.0.0.1:{port}/db",
                            "percent-encoded control character"),
    "encoded-nul-in-password": ("postgresql://u:S3CRET%00@127.0.0.1:{port}/db",
                                "percent-encoded control character"),
    "encoded-newline-in-host": ("postgresql://u@127.0.0.1%0a:{port}/db",
                                "percent-encoded control character"),
    "encoded-escape-in-parameter": ("postgresql://u@127.0.0.1:{port}/db?application_name=%1b[2K",
                                    "percent-encoded control character"),
    "encoded-tab-in-query-key": ("postgresql://u@127.0.0.1:{port}/db?password%09=S3CRET",
                                 "percent-encoded control character"),
    # a libpq keyword=value string is no file name; an SQLite URL names no host or user
    "keyword-dsn": ("host=127.0.0.1 port={port} password=S3CRET",
                    "reads as a libpq keyword=value connection string (host, port, password)"),
    "keyword-dsn-spaced": ("  dbname = h  user=u", "keyword=value connection string (dbname"),
    "sqlite-with-user-and-host": ("sqlite://u:S3CRET@h/h.db",
                                  "an SQLite URL names a file, no host"),
    "sqlite-with-host": ("sqlite://h/h.db", "an SQLite URL names a file, no host"),
    "sqlite-parameters": ("sqlite:///{tmp}/h.db?mode=ro", "it takes no parameters (mode)"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(BAD_URLS))
def test_a_malformed_url_is_exit_two_before_connecting(
    name: str, closed_port: int, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a path is relative to it: nothing may be created there
    url, message = BAD_URLS[name]
    url = url.replace("{port}", str(closed_port)).replace("{tmp}", str(tmp_path))
    code, out, err = run(["history", "show", "x", "--db", url], capsys)
    assert code == ExitCode.USAGE, err
    assert message in one_error(err) and "\n  hint: " in err, err
    assert SECRET not in err and "\x1b" not in err and not out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", [n for n in BAD_URLS if n.startswith(("keyword", "sqlite-with"))])
def test_a_recording_command_creates_no_file_for_a_dsn_or_sqlite_url_with_a_host(
    name: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    """Recording creates a database, but never one named after a connection string."""
    monkeypatch.chdir(tmp_path)
    url, message = BAD_URLS[name]
    args = ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE), "--db", url]
    code, out, err = run(args, capsys)
    assert code == ExitCode.USAGE and message in one_error(err) and SECRET not in err, err
    assert list(tmp_path.iterdir()) == [] and not out


def test_an_encoded_nul_never_reaches_libpq_on_a_real_server(capsys, monkeypatch) -> None:
    """The attack: ``.../db%00`` made libpq drop the rest and fall back on PG* variables.

    With the variables naming a real server, the URL naming a closed port and a wrong
    password reached that server's database as another user (exit 0); refused now.
    """
    real = postgres_url().replace("postgresql+psycopg://", "postgresql://")
    server = real.split("@", 1)[1].split("/", 1)[0]
    host, port = server.rsplit(":", 1)
    monkeypatch.setenv("PGHOST", host)
    monkeypatch.setenv("PGPORT", port)
    monkeypatch.setenv("PGUSER", real.split("://", 1)[1].split("@", 1)[0].split(":")[0])
    monkeypatch.setenv("PGDATABASE", real.rsplit("/", 1)[1])
    for url in ("postgresql://nobody:S3CRET@127.0.0.1:1/db%00",
                "postgresql://nobody:S3CRET%00@127.0.0.1:1/db"):  # fmt: skip
        code, out, err = run(["history", "flaky", "--db", url], capsys)
        assert code == ExitCode.USAGE, (url, out, err)
        assert "percent-encoded control character" in one_error(err) and SECRET not in err


def test_a_well_formed_url_whose_server_does_not_answer_is_exit_three(
    closed_port: int, capsys
) -> None:
    url = f"postgresql://u@127.0.0.1:{closed_port}/db?sslmode=disable&connect_timeout=5"
    code, _, err = run(["history", "show", "x", "--db", url], capsys)
    assert code == ExitCode.INFRA and "Connection refused" in one_error(err)


def test_store_api_refuses_what_the_cli_refuses(closed_port: int) -> None:
    """The library has the same gate as the CLI (open_store checks the URL)."""
    with pytest.raises(RlgateError, match="port '99999' is not a TCP port") as caught:
        open_store(f"postgresql://u:{SECRET}@127.0.0.1:99999/db")
    assert caught.value.exit_code == ExitCode.USAGE and SECRET not in str(caught.value)
