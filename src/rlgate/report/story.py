"""Facts the release report states: the recipe, the training time, versions, and the sentence.

Pure apart from reading the recipe, the tokenizer files it hashes and installed package
metadata. The story sentence is the README's template filled from the evidence::

    {model} trained for {time} on {cluster config} improves from {baseline} to {result} on
    SWE-bench Verified (Δ, CI, p, seeds), with key training health metrics verified

and, whenever the evidence cannot carry a clause, the sentence it can honestly make
instead (an inconclusive, self-contradicting or missing comparison, failing or missing
health checks, an unknown model or time). The instance set is named as compared: only the
full set is "SWE-bench Verified"; otherwise "a 100-instance subset of SWE-bench Verified"
or "an unrecognised 100-instance set". A ``swe compare --exclude`` comparison follows the
numbers, named the same way (it never decides). A demo sentence starts with ``DEMO``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlgate.core.results import CHECK_TIERS, Outcome, Tier
from rlgate.core.text import one_line
from rlgate.report.inputs import Case, JunitEvidence, SweDoc, sha256_path
from rlgate.report.verdict import SweEvidence
from rlgate.runs.metrics import RunMetrics
from rlgate.swe.compare import Verdict as SweVerdict

Escape = Callable[[str], str]

__all__ = [
    "RecipeFacts",
    "StoryInputs",
    "TrainingTime",
    "VersionFacts",
    "load_recipe_facts",
    "story_sentence",
    "training_time",
    "version_facts",
]

STEP_TIME_TAG = "timing/train/total_step_time"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)
_TESTS = {
    "exact_mcnemar": "exact McNemar",
    "paired_sign_flip_permutation": "paired sign-flip permutation",
}


@dataclass(frozen=True, slots=True)
class RecipeFacts:
    """What the report states about the recipe that was trained and gated."""

    name: str
    path: str
    sha256: str
    model: str
    nodes: int | None
    gpus_per_node: int | None
    generation_nodes: int | None
    colocated: bool
    tool_parser: str | None
    reasoning_parser: str | None
    async_grpo: bool
    max_trajectory_age: int | None
    in_flight_weight_updates: bool | None
    max_num_steps: int | None
    batch: str | None
    template_sha256: str | None
    band_alpha: float
    sources: tuple[str, ...]
    #: the convergence and perf checks the recipe plans (tier, name): every one must show in
    #: the JUnit, as a pass, a failure or a skip (docs/recommendation-rule.md)
    planned: tuple[tuple[Tier, str], ...] = ()

    @property
    def cluster(self) -> str:
        """``4 nodes × 8 GPUs (2 training + 2 generation nodes)``, as far as known."""
        if not self.nodes or not self.gpus_per_node:
            return "an unstated cluster"
        base = f"{_plural(self.nodes, 'node')} × {self.gpus_per_node} GPUs"
        if self.colocated:
            return f"{base} (colocated generation)"
        if self.generation_nodes:
            train = self.nodes - self.generation_nodes
            return (
                f"{base} ({train} training + {_plural(self.generation_nodes, 'generation node')})"
            )
        return base


@dataclass(frozen=True, slots=True)
class TrainingTime:
    """Training wall time as the run logged it."""

    seconds: float
    steps: int

    def text(self) -> str:
        """``5.9 h (50 steps)`` / ``42 min (10 steps)``."""
        span = (
            f"{self.seconds / 3600:.1f} h"
            if self.seconds >= 7200
            else f"{self.seconds / 60:.0f} min"
        )
        return f"{span} ({_plural(self.steps, 'step')})"


@dataclass(frozen=True, slots=True)
class VersionFacts:
    """Versions and hashes the evidence was produced with."""

    environment: tuple[tuple[str, str], ...]
    from_junit: tuple[tuple[str, str, str], ...]  # (source, package, version)
    nemo_rl: str
    nemo_gym: str
    tokenizer_files: tuple[tuple[str, str], ...]  # (path, sha256)
    templates: tuple[tuple[str, str], ...]  # (where, sha256)


@dataclass(frozen=True, slots=True)
class StoryInputs:
    """Everything the sentence is filled from."""

    recipe: RecipeFacts | None
    run_recipe: str | None
    time: TrainingTime | None
    health_ran: bool
    health_failures: tuple[str, ...]
    perf_failures: tuple[str, ...]
    swe: SweDoc | None
    swe_evidence: SweEvidence | None
    swe_cases: tuple[Case, ...]
    demo: bool


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- facts ------------------------------------------------------------------------------


def load_recipe_facts(path: str | os.PathLike[str]) -> RecipeFacts:
    """Load a recipe (``rlgate.checks.registry.load_recipe``); pick the facts the report states."""
    from rlgate.checks.plan import plan_gate
    from rlgate.checks.registry import load_recipe

    recipe = load_recipe(path)
    facts, gate = recipe.facts, recipe.gate
    checks = plan_gate(gate, recipe.run_context(), require_gates=False).checks
    generation, grpo = facts.policy.generation, facts.grpo
    colocated = generation.colocated.enabled is True
    template = generation.serving_kwargs.chat_template
    prompts, gens = grpo.num_prompts_per_step, grpo.num_generations_per_prompt
    return RecipeFacts(
        name=recipe.name,
        path=str(recipe.path),
        sha256=sha256_path(Path(recipe.path)),
        model=facts.policy.model_name or "an unnamed model",
        nodes=facts.cluster.num_nodes,
        gpus_per_node=facts.cluster.gpus_per_node,
        generation_nodes=None if colocated else generation.colocated.resources.num_nodes,
        colocated=colocated,
        tool_parser=generation.serving_kwargs.tool_parser,
        reasoning_parser=generation.serving_kwargs.reasoning_parser,
        async_grpo=grpo.is_async,
        max_trajectory_age=grpo.async_grpo.max_trajectory_age_steps,
        in_flight_weight_updates=grpo.async_grpo.in_flight_weight_updates,
        max_num_steps=grpo.max_num_steps,
        batch=f"{prompts} prompts × {gens} generations" if prompts and gens else None,
        template_sha256=_sha256_text(template) if template is not None else None,
        band_alpha=gate.band.alpha if gate.band is not None else 0.01,
        sources=tuple(str(s) for s in recipe.sources),
        planned=tuple((c.tier, c.name) for c in checks if c.tier in CHECK_TIERS),
    )


def _sha256_text(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def training_time(run: RunMetrics) -> TrainingTime | None:
    """Sum of ``timing/train/total_step_time`` over the logged steps (None if not logged)."""
    series = run.series.get(STEP_TIME_TAG)
    if series is None or not len(series):
        return None
    values = [float(v) for v in series.values if math.isfinite(float(v))]
    return TrainingTime(sum(values), len(series)) if values else None


def _tokenizer_hashes(model: str, root: str | os.PathLike[str] | None) -> list[tuple[str, str]]:
    from rlgate.serving.templates import tokenizer_folder

    if root is None:
        return []
    folder = Path(root) / tokenizer_folder(model)
    return [
        (str(folder / name), sha256_path(folder / name))
        for name in TOKENIZER_FILES
        if (folder / name).is_file()
    ]


def version_facts(
    evidence: JunitEvidence, recipe: RecipeFacts | None, tokenizers: str | os.PathLike[str] | None
) -> VersionFacts:
    """Versions installed now, versions the JUnit suites recorded, and content hashes."""
    from rlgate.core.versions import tested_versions
    from rlgate.recipe.schema import load_schema

    env = tested_versions()
    prefix = "rlgate.version."
    junit = tuple(
        (src, name.removeprefix(prefix), value)
        for src, name, value in evidence.suite_properties
        if name.startswith(prefix)
    )
    templates = (
        [(f"recipe {recipe.name} (served chat_template)", recipe.template_sha256)]
        if (recipe and recipe.template_sha256)
        else []
    )
    seen = set()
    for case in evidence.cases:  # one line per distinct template the functional tier rendered
        value = case.fact("rlgate.template_sha256")
        if value and value not in seen:
            seen.add(value)
            templates.append((f"functional: {case.name}", value))
    return VersionFacts(
        environment=tuple(env.items()),
        from_junit=junit,
        nemo_rl=f"NeMo RL config keys checked against NVIDIA-NeMo/RL @ {load_schema().commit[:9]}",
        nemo_gym=f"nemo-gym {env.get('nemo-gym', 'absent')} (PyPI wheel)",
        tokenizer_files=tuple(_tokenizer_hashes(recipe.model, tokenizers) if recipe else ()),
        templates=tuple(templates),
    )


# --- the sentence -------------------------------------------------------------------------


def _p(p: float) -> str:
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.2g}"


def _swe_numbers(doc: SweDoc, esc: Escape) -> tuple[str, str, str]:
    """(before rate, after rate, the statistics in parentheses)."""
    k_b, k_a = len(doc.before.runs), len(doc.after.runs)
    seeds = _plural(k_b, "seed") + " per arm" if k_b == k_a else f"{k_b} vs {k_a} seeds"
    lo, hi = doc.ci95_pp
    stats = (
        f"Δ {doc.delta_pp:+.1f} pp, 95% CI [{lo:+.1f}, {hi:+.1f}] pp, "
        f"{_TESTS.get(doc.test) or esc(doc.test)} {_p(doc.p_value)}, {seeds}, "
        f"n = {doc.before.n_instances}"
    )
    return f"{100 * doc.before.rate:.1f}%", f"{100 * doc.after.rate:.1f}%", stats


def _junit_numbers(cases: tuple[Case, ...]) -> str | None:
    """Δ and its CI from the significance criterion's evidence (checked finite at load)."""
    for case in cases:
        evidence = case.result.evidence
        delta, lo, hi = (evidence.get(k) for k in ("delta_pp", "ci95_low_pp", "ci95_high_pp"))
        if all(isinstance(x, int | float) and not isinstance(x, bool) for x in (delta, lo, hi)):
            return f"Δ {delta:+.1f} pp, 95% CI [{lo:+.1f}, {hi:+.1f}] pp"
    return None


def _inconclusive_why(doc: SweDoc | None, cases: tuple[Case, ...]) -> str:
    if doc is not None:
        worst = max(
            (
                (r.infra_error_rate, arm)
                for arm, a in (("before", doc.before), ("after", doc.after))
                for r in a.runs
            ),
            default=(0.0, ""),
        )
        if worst[0] > doc.max_infra_error_rate:
            return (
                f"{worst[0]:.0%} infra errors in the {worst[1]} arm "
                f"(at most {doc.max_infra_error_rate:.0%} allowed)"
            )
        errored = [c.message for c in doc.criteria if c.outcome is Outcome.ERROR]
        if errored or doc.reasons:
            return (errored or list(doc.reasons))[0][:200]
    errors = [c.message for c in cases if c.message and c.shown is Outcome.ERROR]
    return errors[0][:200] if errors else "see the SWE gate section"


def _swe_clause(s: StoryInputs, esc: Escape) -> tuple[str | None, str | None]:
    """(claim, caveat): exactly one is set."""
    ev = s.swe_evidence
    if ev is None:
        return None, "there is no SWE-bench Verified comparison"
    if ev.contradictions:
        return None, f"the SWE-bench comparison contradicts itself ({esc(ev.contradictions[0])})"
    if ev.stated is SweVerdict.INCONCLUSIVE:
        return None, "the SWE-bench comparison is inconclusive: " + esc(
            _inconclusive_why(s.swe, s.swe_cases)
        )
    on = ev.universe()
    if s.swe is not None:
        before, after, stats = _swe_numbers(s.swe, esc)
        span = f"from {before} to {after} "
    else:
        stats, span = _junit_numbers(s.swe_cases) or "numbers in the swe_gate JUnit", ""
        stats += f", n = {ev.n}" if ev.n else ""
    claim = {
        SweVerdict.IMPROVED: f"improves {span}on {on}",
        SweVerdict.REGRESSED: f"regresses {span}on {on}",
        SweVerdict.NO_SIGNIFICANT_CHANGE: f"shows no significant change on {on}"
        + (f" ({span.strip().removeprefix('from ').replace(' to ', ' → ')})" if span else ""),
    }[ev.stated]
    return f"{claim} ({stats}{_reduced_clause(s, esc)})", None


def _reduced_clause(s: StoryInputs, esc: Escape) -> str:
    """The ``--exclude`` comparison after the numbers, its set named as compared ("" if none)."""
    ev = s.swe_evidence.reduced if s.swe_evidence is not None else None
    doc = s.swe.reduced if s.swe is not None else None
    if ev is None or doc is None or doc.excluded_count == 0:
        return ""
    excluded = _plural(doc.excluded_count, "excluded instance")
    what = f"without {excluded} ({esc(', '.join(doc.exclude))})"
    if ev.contradictions:
        return f"; {what}, the reduced comparison contradicts itself"
    c = doc.comparison
    verdict = ev.stated.value.replace("_", " ")
    return f"; {what}: {verdict} on {ev.universe()}, Δ {c.delta_pp:+.1f} pp, {_p(c.p_value)}"


def _names(items: tuple[str, ...], esc: Escape) -> str:
    return ", ".join(esc(x) for x in items[:3]) + (" …" if len(items) > 3 else "")


def _health_clause(s: StoryInputs, esc: Escape) -> str:
    if s.health_failures:
        health = f"with failing training health checks ({_names(s.health_failures, esc)})"
    elif not s.health_ran:
        health = "without verified training health metrics (the convergence tier did not run)"
    else:
        health = "with key training health metrics verified"
    if s.perf_failures:
        failing = _names(s.perf_failures, esc)
        health += f" and a perf regression against the baseline ({failing})"
    return health


def story_sentence(s: StoryInputs, escape: Escape = one_line) -> str:
    """Fill the release sentence, or say honestly what the evidence supports instead.

    ``escape`` is applied to every fragment that comes from an input (model and recipe
    names, check names, messages): ``one_line`` for plain text (the default), ``md_text``
    for the Markdown page.
    """
    esc = escape
    if s.recipe is not None:
        model, cluster = esc(s.recipe.model.strip()), s.recipe.cluster
    else:
        model = f"the model of recipe {esc(s.run_recipe)}" if s.run_recipe else "the model"
        cluster = "an unstated cluster (pass --recipe)"
    time = s.time.text() if s.time is not None else "an unknown time"
    subject = f"{model} trained for {time} on {cluster}"
    claim, caveat = _swe_clause(s, esc)
    health = _health_clause(s, esc)
    sentence = f"{subject} {claim}, {health}." if claim else f"{subject}, {health}, but {caveat}."
    return ("DEMO (generated inputs, not a release result): " if s.demo else "") + sentence
