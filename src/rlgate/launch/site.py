"""Site configuration for launching: everything cluster-specific, read from one YAML file.

A site config holds what differs between clusters and must never be hard-coded: the Slurm
account, partition, container image and mounts, time limits, the Ray job API address, the
environment a run needs (``env``: literal, non-secret values such as ``HF_HOME``;
``pass_env``: names of variables such as ``HF_TOKEN`` whose values are taken from the
launching environment and never written down), the default runs root and NeMo RL checkout,
and the report's ``links:`` (https URL templates, :mod:`rlgate.core.links`).
``ci/site.example.yaml`` documents every key; unknown keys are errors (``extra="forbid"``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from rlgate.core.errors import LaunchError
from rlgate.core.io import read_yaml
from rlgate.core.links import check_template
from rlgate.core.text import redact_url
from rlgate.core.validate import LineText, PositiveInt, check_env_name, problems

__all__ = [
    "PLAIN_PATH",
    "SLURM_NAME",
    "RaySite",
    "SiteConfig",
    "SlurmSite",
    "load_site_config",
    "with_ray_address",
]

# The characters a path rlgate hands to a run may hold (run directory, mounts). The run
# directory reaches NeMo RL's Hydra override parser (``logger.log_dir=<run>/logs``: ``,``
# ``'`` ``=`` are syntax, ``${...}`` interpolates), Slurm (``--output=<run>/slurm/...-%j.out``:
# ``%`` is a pattern), pyxis (``MOUNTS`` is ``SRC:DST`` joined by ``,``) and ray.sub, which
# pastes ``$LOG_DIR`` unquoted into the scripts it generates for the head and worker
# containers (``mkdir -p $LOG_DIR/ray``, ``source $LOG_DIR/topology_probe.sh``) and
# ``$MOUNTS``/``$CONTAINER`` unquoted into ``srun`` arguments (``COMMON_SRUN_ARGS``): quoting
# cannot protect a value there, so anything else is refused.
PLAIN_CHARS = "A-Za-z0-9._+@/-"
PLAIN_PATH = re.compile(f"[{PLAIN_CHARS}]+")
# ray.sub's inputs that rlgate itself sets in sbatch.sh (launch_slurm.render_sbatch_script).
RLGATE_SETS = frozenset({"CONTAINER", "MOUNTS", "COMMAND", "GPUS_PER_NODE", "BASE_LOG_DIR"})
# Variables that change how bash runs the generated scripts themselves, not the run.
SHELL_CONTROL = frozenset({"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND"})
# Values ray.sub pastes unquoted into srun arguments (COMMON_SRUN_ARGS) and into the scripts
# it generates: no whitespace, quotes, globs or shell syntax can be allowed in them.
#: A Slurm account, partition or job name prefix (and so the start of the job names rlgate gives).
SLURM_NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]*"
_PATTERNS = {
    "account": re.compile(SLURM_NAME),
    "job_name_prefix": re.compile(SLURM_NAME),
    "partition": re.compile(rf"{SLURM_NAME}(?:,{SLURM_NAME})*"),
    "container": re.compile(r"[A-Za-z0-9_./][A-Za-z0-9._+@/:#=-]*"),
    "ray_sub": PLAIN_PATH,
}
_MOUNT = re.compile(f"/[{PLAIN_CHARS}]*:/[{PLAIN_CHARS}]*(?::[A-Za-z0-9+_-]+)?")
_SBATCH_OPTION = re.compile(r"--([a-z][a-z0-9-]*)(?:=[^\x00-\x1f\x7f]*)?")
# sbatch options rlgate sets itself: a second copy would silently win (sbatch takes the last).
_SBATCH_RESERVED = frozenset(
    {"parsable", "nodes", "gres", "time", "account", "partition", "job-name", "dependency"}
    | {"chdir", "output", "wrap"}
)


def _env_name(name: str) -> str:
    check_env_name(name)
    if name in RLGATE_SETS:
        raise ValueError(f"{name!r} is set by rlgate for ray.sub; the site may not set it")
    if name in SHELL_CONTROL:
        raise ValueError(f"{name!r} changes how bash runs rlgate's scripts; refused")
    return name


EnvName = Annotated[str, AfterValidator(_env_name)]


class SlurmSite(BaseModel):
    """The ``slurm:`` block of a site config.

    Every value reaches ``launch/sbatch.sh`` quoted, and then ray.sub, which uses several of
    them unquoted; so each is constrained to the characters its kind of value needs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    account: str
    partition: str
    container: str  # enroot/pyxis image (ray.sub's CONTAINER)
    mounts: list[str] = Field(default_factory=list)  # "src:dst[:flags]" (ray.sub's MOUNTS)
    max_minutes: PositiveInt | None = None  # partition time limit
    default_minutes: PositiveInt | None = None
    gres: bool = True  # --gres=gpu:<gpus_per_node> (False = tools/launch's EXCLUDE_GRES)
    extra_sbatch_args: list[str] = Field(default_factory=list)
    ray_sub: str = "ray.sub"  # relative to the NeMo RL checkout
    job_name_prefix: str = "rlgate"

    @field_validator("account", "partition", "container", "ray_sub", "job_name_prefix")
    @classmethod
    def _plain(cls, value: str, info: ValidationInfo) -> str:
        field = info.field_name or ""
        if not _PATTERNS[field].fullmatch(value):
            raise ValueError(
                f"{value!r} is not a plain {field.replace('_', ' ')} "
                f"(allowed: {_PATTERNS[field].pattern})"
            )
        return value

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, mounts: list[str]) -> list[str]:
        for mount in mounts:
            if not _MOUNT.fullmatch(mount):
                raise ValueError(
                    f"entry {mount!r} is not an absolute SRC:DST[:FLAGS] mount of plain paths "
                    "(one entry per mount, e.g. /lustre/data:/data; no commas or spaces)"
                )
        return mounts

    @field_validator("extra_sbatch_args")
    @classmethod
    def _sbatch_args(cls, args: list[str]) -> list[str]:
        for arg in args:
            match = _SBATCH_OPTION.fullmatch(arg)
            if not match:
                raise ValueError(
                    f"{arg!r} is not a long sbatch option (--name or --name=value, "
                    "no control characters)"
                )
            name = match.group(1)
            # sbatch reads options with getopt_long, which takes an unambiguous abbreviation
            # (--chd=/x is --chdir=/x): a prefix of a reserved name is that option too
            reserved = sorted(r for r in _SBATCH_RESERVED if r.startswith(name))
            if reserved:
                raise ValueError(f"{arg!r}: rlgate sets --{reserved[0]} itself")
        return args


class RaySite(BaseModel):
    """The ``ray:`` block of a site config."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    address: LineText  # the Ray dashboard / job API, e.g. http://head:8265

    @field_validator("address")
    @classmethod
    def _address(cls, address: str) -> str:
        if not address or any(c.isspace() for c in address):
            raise ValueError(f"{redact_url(address)!r} is not an address (http://<head>:8265)")
        return address


class SiteConfig(BaseModel):
    """Everything cluster-specific; loaded from YAML (see ``ci/site.example.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    slurm: SlurmSite | None = None
    ray: RaySite | None = None
    env: dict[EnvName, str] = Field(default_factory=dict)  # literal, non-secret values
    pass_env: list[EnvName] = Field(default_factory=list)  # names taken from the launching env
    runs_root: LineText | None = None
    nemo_rl_dir: LineText | None = None
    # the report's links: kind -> https URL template of plain {fields} (rlgate.core.links)
    links: dict[Literal["run", "wandb", "tensorboard", "ci_job", "release"], str] = Field(
        default_factory=dict
    )

    @field_validator("links")
    @classmethod
    def _links(cls, links: dict[str, str]) -> dict[str, str]:
        for template in links.values():
            check_template(template)
        return links

    @field_validator("env")
    @classmethod
    def _env_values(cls, env: dict[str, str]) -> dict[str, str]:
        for key, value in env.items():
            if "\x00" in value:
                raise ValueError(f"the value of {key} holds a NUL byte")
        return env

    @field_validator("pass_env")
    @classmethod
    def _pass_env(cls, names: list[str], info: ValidationInfo) -> list[str]:
        env = info.data.get("env") or {}
        both = sorted(set(names) & set(env))
        if both:
            raise ValueError(f"{both} are in both env and pass_env; keep each in one")
        if len(set(names)) != len(names):
            raise ValueError("a name is listed twice")
        return names


def _invalid(where: str, exc: ValidationError) -> LaunchError:
    return LaunchError(
        f"{where}: invalid site config:\n{problems(exc)}", hint="see ci/site.example.yaml"
    )


def load_site_config(path: str | os.PathLike[str] | None) -> SiteConfig:
    """Read a site config YAML (``None``: an empty config, enough for ``--backend local``).

    Raises:
        LaunchError: missing file, invalid YAML, unknown or badly typed keys, environment
            names that are not POSIX names, values that cannot go into a script.
    """
    if path is None:
        return SiteConfig()
    file = Path(path)
    raw = read_yaml(file, what="site config", error=LaunchError, hint="see ci/site.example.yaml")
    if raw is not None and not isinstance(raw, dict):
        raise LaunchError(
            f"{file}: a site config is a mapping (slurm:, ray:, env:, ...), "
            f"got {type(raw).__name__}",
            hint="see ci/site.example.yaml",
        )
    try:
        return SiteConfig.model_validate(raw or {})
    except ValidationError as exc:
        raise _invalid(str(file), exc) from None


def with_ray_address(site: SiteConfig, address: str | None) -> SiteConfig:
    """``site`` with its Ray job API address replaced by ``--ray-address`` (if given)."""
    if not address:
        return site
    try:
        ray = RaySite(address=address)
    except ValidationError as exc:
        raise _invalid("--ray-address", exc) from None
    return site.model_copy(update={"ray": ray})
