"""Produce a real mini-swe-agent output directory with the tool's own process_instance.

tests/unit/data/mini_swe_agent_2.4.6/ was made with it: mini-swe-agent 2.4.6 from PyPI
(`pip install --no-deps --target DIR mini-swe-agent==2.4.6`; its batch module imports without
litellm), a DeterministicModel and the local environment; one instance submits a patch, one
hits the step limit, one cannot create its (docker) environment.

    PYTHONPATH=DIR python tools/mini_swe_agent_sample.py OUT
"""

import json
import sys
import time
from pathlib import Path

import yaml
from minisweagent.run.benchmarks import swebench as sb
from minisweagent.run.benchmarks.utils.batch_progress import RunBatchProgressManager

MODEL = "minisweagent.models.test_models.DeterministicModel"
PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
SUBMIT = {
    "role": "assistant",
    "content": "done",
    "extra": {
        "actions": [{"command": f"cat <<'EOF'\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n{PATCH}EOF"}]
    },
}
IDLE = {"role": "assistant", "content": "look", "extra": {"actions": [{"command": "true"}]}}


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    base = yaml.safe_load((sb.builtin_config_dir / "benchmarks" / "swebench.yaml").read_text())
    progress = RunBatchProgressManager(3, out / f"exit_statuses_{time.time()}.yaml")
    cases = {
        "django__django-11099": ([SUBMIT], {"environment_class": "local", "cwd": str(out)}),
        "sympy__sympy-20590": ([IDLE] * 3, {"environment_class": "local", "cwd": str(out)}),
        # an environment that cannot be created (as an image pull that fails): no trajectory
        "psf__requests-2317": (
            [SUBMIT],
            {"environment_class": "docker", "executable": "/no/docker"},
        ),
    }
    for iid, (outputs, environment) in cases.items():
        config = json.loads(json.dumps(base))
        config["environment"] = environment
        config["model"] = {
            "model_class": MODEL,
            "outputs": outputs,
            "model_name": "hosted_vllm/org/model",
        }
        config["agent"]["step_limit"] = 2
        sb.process_instance(
            {"instance_id": iid, "problem_statement": "fix it"}, out, config, progress
        )


if __name__ == "__main__":
    main()
