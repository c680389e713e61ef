"""Links a report may carry: https URLs from rlgate's own configuration, never from an input.

Two trusted sources only (docs/security.md):

* the CI's own variables (:func:`ci_links`): GitLab's ``CI_JOB_URL``; GitHub Actions'
  ``GITHUB_SERVER_URL`` + ``GITHUB_REPOSITORY`` + ``GITHUB_RUN_ID``;
* the site config's ``links:`` templates (``run: "https://wandb.example/{run_id}"``),
  checked by :func:`check_template`: ``string.Formatter`` parses them, and only plain
  ``{name}`` fields of :data:`LINK_FIELDS` are allowed (no format spec, conversion,
  attribute or index). :func:`fill` percent-encodes each value (an input's run id cannot add
  a path segment, a query or a host).

Every URL is checked by :func:`https_url`: scheme https, a host, no credentials, only the
characters RFC 3986 allows (so it needs no escaping beyond HTML's ``&``).
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

__all__ = [
    "LINK_FIELDS",
    "LINK_KINDS",
    "check_template",
    "ci_links",
    "fill",
    "https_url",
    "report_links",
]

#: The names a ``links:`` template may use.
LINK_FIELDS = frozenset({"run_id", "run_name", "recipe", "nightly_id", "branch"})
#: What a site's ``links:`` may link to (its keys).
LINK_KINDS = ("run", "wandb", "tensorboard", "ci_job", "release")
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
_HOST = re.compile(r"[A-Za-z0-9.-]+(?::[0-9]{1,5})?")


def https_url(url: str) -> str | None:
    """``url`` if it is a plain https URL (see the module docstring), else None."""
    if not isinstance(url, str) or not _URL_CHARS.fullmatch(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme != "https" or not parts.netloc or "@" in parts.netloc:
        return None
    if not _HOST.fullmatch(parts.netloc):
        return None
    return url


def check_template(template: str) -> str:
    """``template`` if it is an https URL template of plain ``{name}`` fields; else ValueError."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{template!r} is not a URL template: {exc}") from None
    names = []
    for _, name, spec, conversion in fields:
        if name is None:
            continue
        if spec or conversion or name not in LINK_FIELDS:
            raise ValueError(
                f"{template!r}: field {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} is not allowed; use plain fields of "
                f"{', '.join(sorted(LINK_FIELDS))}"
            )
        names.append(name)
    probe = template.format_map(dict.fromkeys(names, "x"))
    if not probe.startswith("https://") or https_url(probe) is None:
        raise ValueError(f"{template!r} is not an https URL (https://host/...{{run_id}})")
    if not re.match(r"https://[^/{}]+/", template.split("{", 1)[0] + ("/" if not names else "")):
        raise ValueError(f"{template!r}: a field may not be part of the host")
    return template


def fill(template: str, values: Mapping[str, str | None]) -> str | None:
    """``template`` with its fields filled, each value percent-encoded; None if one is missing."""
    check_template(template)
    names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    if any(not values.get(name) for name in names):
        return None
    url = template.format_map({n: _segment(str(values[n])) for n in names})
    return https_url(url)


def _segment(value: str) -> str:
    """``value`` percent-encoded as one path segment: ``.`` and ``..`` too (RFC 3986 5.2.4)."""
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def ci_links(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The CI job's own link (``ci_job``) from its variables, if they make an https URL."""
    env = os.environ if environ is None else environ
    url = None
    if env.get("CI_JOB_URL"):
        url = https_url(env["CI_JOB_URL"])
    elif all(env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")):
        repo, run = env["GITHUB_REPOSITORY"], env["GITHUB_RUN_ID"]
        parts = repo.split("/")
        named = re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo)
        if named and not {".", ".."} & set(parts) and run.isdigit():
            url = https_url(f"{env['GITHUB_SERVER_URL'].rstrip('/')}/{repo}/actions/runs/{run}")
    return {"ci_job": url} if url else {}


def report_links(
    templates: Mapping[str, str],
    values: Mapping[str, str | None],
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Kind -> URL: the site's templates filled with ``values``, then the CI job's own link.

    A template whose field has no value is left out; the CI variables win for ``ci_job``.
    """
    links = {kind: url for kind, t in templates.items() if (url := fill(t, values))}
    return {**links, **ci_links(environ)}
