"""``rlgate recipe check``: every rule on a config, with ran / skipped / not-applicable status.

The rules are :mod:`rlgate.checks.recipe_rules` (config only), the registry of NeMo RL's
start-up asserts :mod:`rlgate.checks.startup` (config only, one check per area) and
:mod:`rlgate.checks.served` (on the served chat path); this module runs them in order and
builds the :class:`CompatReport`.

Each ``check_*`` function is pure over a loaded :class:`~rlgate.recipe.load.Recipe` (or its
:class:`~rlgate.serving.setup.ServingSetup`) and returns :class:`~rlgate.recipe.findings.Finding`s.
Template and parser verdicts are *measured*: a probe conversation is rendered with the
served template and parsed back with the served vLLM parsers.

Every rule that says "NeMo RL asserts X" was read in NeMo RL's code at 7ea279a and its
message names the file and function (``grpo.py::setup``...). Runtime asserts NeMo RL only
hits after allocating a cluster are errors; keys NeMo RL or Gym accept but never read are
warnings, so NeMo RL's own published configs pass.

Checks come in three groups. The config checks need nothing but the config (and vLLM's
parser registry). The ``model-config`` check runs the model rules
(:func:`rlgate.checks.startup.check_model`) on the model's ``config.json`` when a rule's
config side holds; without that file it is skipped (exit 3 unless an error was found) when
one of those rules insists, else not applicable, naming the rules not run. The served
checks render the chat template with the model's tokenizer; when that tokenizer cannot be
loaded (no hub access, a gated model, a placeholder path) they are reported as *skipped*
with the reason, and the report's exit code is 3 unless an error was found. They do not
apply (and are not skipped) when the config does not serve chat through vLLM's HTTP server
(no NeMo Gym, another generation backend).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgate.checks.cache import CachedChecks, RecipeCheckCache, cache_key
from rlgate.checks.recipe_rules import (
    CheckSkipped,
    CheckState,
    _gym_setup,
    _topology_not_applicable,
    chat_server_not_applicable,
    check_async,
    check_batch,
    check_gym,
    check_lengths,
    check_mandatory,
    check_parser_names,
    check_ranges,
    check_sampling,
    check_serving_kwargs,
    check_topology,
    check_unresolved,
    parser_problem,
)
from rlgate.checks.registry import load_recipe
from rlgate.checks.served import (
    check_budget,
    check_contiguity,
    check_data,
    check_parsers,
    check_thinking,
    check_tool_call_in_reasoning,
)
from rlgate.checks.startup import AREAS, check_area, check_model
from rlgate.core.errors import ExitCode
from rlgate.recipe.findings import Finding, Severity
from rlgate.recipe.load import Recipe, require_grpo
from rlgate.recipe.schema import check_keys
from rlgate.serving.model_config import ModelConfig
from rlgate.serving.setup import (
    NoChatTemplate,
    ServingSetup,
    TokenizerUnavailable,
    serving_setup,
)
from rlgate.serving.templates import SERVING_KWARGS

__all__ = ["CheckStatus", "CompatReport", "check_recipe", "check_recipe_file"]


@dataclass(frozen=True, slots=True)
class CheckStatus:
    """Whether one check ran, and why not when it did not."""

    name: str
    status: CheckState
    reason: str = ""
    findings: tuple[Finding, ...] = ()  # what this check found (``--junit``: its testcase)

    def as_dict(self) -> dict[str, str]:
        """Plain JSON form."""
        out = {"check": self.name, "status": self.status}
        if self.reason:
            out["reason"] = self.reason
        return out


class CompatReport:
    """All findings for one recipe, and which checks ran."""

    def __init__(
        self,
        recipe: Recipe,
        findings: Sequence[Finding],
        setup: ServingSetup | None,
        checks: Sequence[CheckStatus] = (),
        served: dict[str, Any] | None = None,
    ) -> None:
        self.recipe, self.findings, self.setup = recipe, list(findings), setup
        self.checks = list(checks)
        # tokenizer/template/profile of the report when they come from the cache (no setup)
        self.served = served
        self.volatile = False  # a check was skipped for what is installed/reachable here
        self.model_config: str | None = None  # the config.json the model rules read

    @property
    def errors(self) -> list[Finding]:
        """Findings that make the config incompatible."""
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        """Findings worth a look that do not fail the check."""
        return [f for f in self.findings if f.severity is Severity.WARNING]

    @property
    def skipped(self) -> list[CheckStatus]:
        """Checks that apply to this config but could not run here."""
        return [c for c in self.checks if c.status == "skipped"]

    @property
    def ok(self) -> bool:
        """True when there is no error (skipped checks aside)."""
        return not self.errors

    @property
    def status(self) -> str:
        """``incompatible`` (an error), ``incomplete`` (checks skipped) or ``compatible``."""
        if self.errors:
            return "incompatible"
        return "incomplete" if self.skipped else "compatible"

    @property
    def exit_code(self) -> ExitCode:
        """1 with an error, else 3 when checks were skipped, else 0."""
        return {
            "incompatible": ExitCode.FAIL,
            "incomplete": ExitCode.INFRA,
            "compatible": ExitCode.OK,
        }[self.status]

    def served_summary(self) -> dict[str, Any]:
        """``tokenizer``, ``template`` and ``profile`` of the served path (None each without)."""
        if self.setup is None:
            return dict(self.served or {"tokenizer": None, "template": None, "profile": None})
        setup = self.setup
        return {
            "tokenizer": setup.tokenizer_source,
            "template": {"source": setup.template.source, "sha256": setup.template.sha256},
            "profile": setup.profile().as_dict(),
        }

    def as_dict(self) -> dict[str, Any]:
        """JSON form of one config (an element of ``rlgate recipe check --json``'s reports)."""
        return {
            "recipe": str(self.recipe.path),
            "name": self.recipe.name,
            "overrides": list(self.recipe.overrides),
            "status": self.status,
            "exit_code": int(self.exit_code),
            "compatible": self.ok,
            **self.served_summary(),
            "model_config": self.model_config,
            "checks": [c.as_dict() for c in self.checks],
            "findings": [f.as_dict() for f in self.findings],
        }


CONFIG_CHECKS: tuple[tuple[str, Callable[[Recipe], list[Finding]]], ...] = (
    ("interpolations", check_unresolved),
    ("mandatory-values", check_mandatory),
    ("keys", lambda r: check_keys(r.config)),
    ("ranges", check_ranges),
    ("async", check_async),
    ("sampling", check_sampling),
    ("batch-size", check_batch),
    ("topology", check_topology),
    ("lengths", check_lengths),
    # NeMo RL's start-up asserts, one check per area (rlgate.checks.startup)
    *((area, check_area(area)) for area in AREAS),
    ("gym", check_gym),
)


# Checks of the served chat path: (name, function, needs the vLLM parsers).
SERVED_CHECKS: tuple[tuple[str, Callable[[ServingSetup], list[Finding]], bool], ...] = (
    ("data", check_data, False),
    ("thinking", check_thinking, False),
    ("parsers", check_parsers, True),
    ("tool-call-in-reasoning", check_tool_call_in_reasoning, True),
    ("turn-budget", check_budget, True),
    ("contiguity", check_contiguity, True),
)


#: Config checks from which on a check needs vLLM, nemo-gym or the tokenizer (cached).
_FIRST_CACHED = "gym"


def check_recipe(
    recipe: Recipe,
    tokenizer_root: str | Path | None,
    setup: ServingSetup | None = None,
    *,
    skip_unavailable: bool = False,
    cache: RecipeCheckCache | None = None,
    model_config: ModelConfig | None = None,
) -> CompatReport:
    """Run every check on a loaded recipe (``setup`` reuses an already resolved serving setup).

    Args:
        recipe: the loaded config.
        tokenizer_root: folder with one tokenizer subfolder per model (else HF cache/hub).
        setup: an already resolved serving setup (tests share one).
        skip_unavailable: when the tokenizer cannot be loaded, report the served checks as
            skipped instead of raising :class:`~rlgate.serving.setup.TokenizerUnavailable`.
        cache: where the results of the checks that need vLLM, nemo-gym or the tokenizer
            are looked up and stored (:mod:`rlgate.checks.cache`); only without ``setup``.
        model_config: the model's ``config.json`` given by the user (``--model-config``),
            used instead of the one found for ``policy.model_name``.
    """
    findings: list[Finding] = []
    checks: list[CheckStatus] = []
    names = [name for name, _ in CONFIG_CHECKS]
    first_cached = names.index(_FIRST_CACHED)
    for name, fn in CONFIG_CHECKS[:first_cached]:
        if name == "topology" and (why := _topology_not_applicable(recipe.config)):
            checks.append(CheckStatus(name, "not-applicable", why))
            continue
        _run(findings, checks, name, fn, recipe)
    model = check_model(recipe, tokenizer_root, model_config)  # rules on the model's config.json
    findings.extend(model.findings)
    checks.append(
        CheckStatus("model-config", model.state, model.reason, tuple(model.findings))  # type: ignore[arg-type]
    )
    key = cache_key(recipe, tokenizer_root) if cache is not None and setup is None else None
    if cache is not None and key is not None and (hit := cache.load(key)) is not None:
        findings += [_finding(f) for f in hit.findings]
        checks += [
            CheckStatus(c.check, c.status, c.reason, tuple(_finding(f) for f in c.findings))
            for c in hit.checks
        ]
        served = {
            "tokenizer": hit.tokenizer,
            "template": hit.template.model_dump() if hit.template else None,
            "profile": hit.profile,
        }
        report = CompatReport(recipe, findings, None, checks, served=served)
        report.model_config = model.path
        return report
    part = CompatReport(recipe, [], None, [])
    part = _cached_part(recipe, tokenizer_root, setup, skip_unavailable, part)
    # A check skipped for what is installed or reachable here (a Gym module that does not
    # import, a tokenizer not available) is not decided by the key: such a result is not stored.
    if cache is not None and key is not None and not part.volatile:
        summary = part.served_summary()
        cache.store(
            key,
            CachedChecks.model_validate(
                {
                    "findings": [f.as_dict() for f in part.findings],
                    "checks": [
                        {"reason": "", **c.as_dict(), "findings": [f.as_dict() for f in c.findings]}
                        for c in part.checks
                    ],
                    **summary,
                }
            ),
            inputs=[*recipe.sources, recipe.path]
            + ([summary["tokenizer"]] if summary["tokenizer"] else []),
        )
    report = CompatReport(
        recipe, findings + part.findings, part.setup, checks + part.checks, served=part.served
    )
    report.model_config = model.path
    return report


def _run(
    findings: list[Finding],
    checks: list[CheckStatus],
    name: str,
    fn: Callable[[Any], list[Finding]],
    arg: Any,
) -> None:
    try:
        found = fn(arg)
    except CheckSkipped as skip:
        findings.extend(skip.findings)
        checks.append(CheckStatus(name, "skipped", skip.reason, tuple(skip.findings)))
    else:
        findings.extend(found)
        checks.append(CheckStatus(name, "ran", findings=tuple(found)))


def _finding(f: Any) -> Finding:
    """A cached finding (:class:`rlgate.checks.cache.CachedChecks`) as a :class:`Finding`."""
    return Finding(f.code, Severity(f.severity), f.key, f.message)


def _cached_part(
    recipe: Recipe,
    tokenizer_root: str | Path | None,
    setup: ServingSetup | None,
    skip_unavailable: bool,
    report: CompatReport,
) -> CompatReport:
    """The checks from :data:`_FIRST_CACHED` on (vLLM, nemo-gym, tokenizer), into ``report``."""
    findings, checks = report.findings, report.checks

    def run(name: str, fn: Callable[[Any], list[Finding]], arg: Any) -> None:
        _run(findings, checks, name, fn, arg)
        if checks[-1].status == "skipped":
            report.volatile = True

    names = [name for name, _ in CONFIG_CHECKS]
    for name, fn in CONFIG_CHECKS[names.index(_FIRST_CACHED) :]:
        run(name, fn, recipe)
    served = [name for name, _, _ in SERVED_CHECKS]
    not_applicable = chat_server_not_applicable(recipe.config) if setup is None else None
    if not_applicable:
        names = ["serving-kwargs", "parser-names", *served]
        checks += [CheckStatus(n, "not-applicable", not_applicable) for n in names]
        return report
    run("serving-kwargs", check_serving_kwargs, recipe)
    run("parser-names", check_parser_names, recipe)
    unusable_parsers = parser_problem(recipe)
    try:
        _gym_setup(recipe)
    except CheckSkipped as skip:
        checks += [CheckStatus(n, "skipped", skip.reason) for n in served]
        report.volatile = True
        return report
    try:
        setup = setup or serving_setup(recipe, tokenizer_root)
    except TokenizerUnavailable as exc:
        if not skip_unavailable:
            raise
        checks += [CheckStatus(n, "skipped", exc.reason) for n in served]
        report.volatile = True
        return report
    except NoChatTemplate as exc:
        key = f"{SERVING_KWARGS}.chat_template"
        findings.append(Finding("no-chat-template", Severity.ERROR, key, exc.message))
        checks += [CheckStatus(n, "skipped", "no chat template to render") for n in served]
        return report
    for name, fn, needs_parsers in SERVED_CHECKS:
        if needs_parsers and unusable_parsers:
            checks.append(CheckStatus(name, "skipped", unusable_parsers))
            continue
        run(name, fn, setup)
    report.setup = setup
    return report


def check_recipe_file(
    path: str | Path,
    overrides: Sequence[str] = (),
    tokenizer_root: str | Path | None = None,
    *,
    skip_unavailable: bool = False,
    cache: RecipeCheckCache | None = None,
    model_config: ModelConfig | None = None,
) -> CompatReport:
    """Load ``path`` with ``overrides``, refuse a non-GRPO config, and run every check.

    Raises:
        RecipeError: the config cannot be loaded, or is not a GRPO config.
        TokenizerUnavailable: the tokenizer cannot be loaded (unless ``skip_unavailable``).
    """
    recipe = load_recipe(path, overrides, strict=False)  # the rules report invalid values
    require_grpo(recipe)
    return check_recipe(
        recipe,
        tokenizer_root,
        skip_unavailable=skip_unavailable,
        cache=cache,
        model_config=model_config,
    )
