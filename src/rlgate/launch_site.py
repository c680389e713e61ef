"""Site configuration for launching: everything cluster-specific, read from one YAML file.

A site config holds what differs between clusters and must never be hard-coded: the Slurm
account, partition, container image and mounts, time limits, the Ray job API address, the
environment a run needs (``env``: literal, non-secret values such as ``HF_HOME``;
``pass_env``: names of variables such as ``HF_TOKEN`` whose values are taken from the
launching environment and never written down), the default runs root and NeMo RL checkout.
``ci/site.example.yaml`` documents every key; unknown keys are errors (``extra="forbid"``).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlgate._errors import LaunchError
from rlgate._io import read_yaml

__all__ = ["RaySite", "SiteConfig", "SlurmSite", "load_site_config"]


class SlurmSite(BaseModel):
    """The ``slurm:`` block of a site config."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    account: str
    partition: str
    container: str  # enroot/pyxis image (ray.sub's CONTAINER)
    mounts: list[str] = Field(default_factory=list)  # "src:dst[:flags]" (ray.sub's MOUNTS)
    max_minutes: int | None = Field(default=None, ge=1)  # partition time limit
    default_minutes: int | None = Field(default=None, ge=1)
    gres: bool = True  # --gres=gpu:<gpus_per_node> (False = tools/launch's EXCLUDE_GRES)
    extra_sbatch_args: list[str] = Field(default_factory=list)
    ray_sub: str = "ray.sub"  # relative to the NeMo RL checkout
    job_name_prefix: str = "rlgate"


class RaySite(BaseModel):
    """The ``ray:`` block of a site config."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    address: str  # the Ray dashboard / job API, e.g. http://head:8265


class SiteConfig(BaseModel):
    """Everything cluster-specific; loaded from YAML (see ``ci/site.example.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    slurm: SlurmSite | None = None
    ray: RaySite | None = None
    env: dict[str, str] = Field(default_factory=dict)  # literal, non-secret values
    pass_env: list[str] = Field(default_factory=list)  # names taken from the launching env
    runs_root: str | None = None
    nemo_rl_dir: str | None = None


def load_site_config(path: str | os.PathLike[str] | None) -> SiteConfig:
    """Read a site config YAML (``None``: an empty config, enough for ``--backend local``).

    Raises:
        LaunchError: missing file, invalid YAML, unknown or badly typed keys.
    """
    if path is None:
        return SiteConfig()
    file = Path(path)
    raw = read_yaml(file, what="site config", error=LaunchError, hint="see ci/site.example.yaml")
    try:
        return SiteConfig.model_validate(raw or {})
    except ValidationError as exc:
        raise LaunchError(
            f"{file}: invalid site config: {exc}", hint="see ci/site.example.yaml"
        ) from exc
