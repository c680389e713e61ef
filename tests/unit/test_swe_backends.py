"""``rlgate swe eval --backend gym|nemo-skills``: the commands, checked by the engines' parsers.

Gym's command lines are parsed with Hydra's own override grammar and validated by nemo-gym
0.7.0's config models (installed here); NeMo-Skills' ``ns eval`` line is parsed by a click
command built from the typer signature read from its source at a pinned commit
(``tests/unit/data/nemo_skills_cli.json``, written by ``tools/nemo_skills_cli.py``).
What cannot run here: the engines themselves (Apptainer images, a GPU vLLM server, Slurm).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import click
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from rlgate.core.errors import SweError
from rlgate.swe.backends import GYM_AGENT_KEY, Backend, ClusterEval, plan_eval

from .helpers import swe_formats as sf
from .helpers import swe_inputs as si
from .test_swe_formats import FOUR, IDS, assert_one_error, run_cli

NS_CLI = json.loads((Path(__file__).parent / "data/nemo_skills_cli.json").read_text())
SIF = "/sif/swebench_sweb.eval.x86_64.{instance_id}.sif"


def gym_eval(tmp_path: Path, **kw) -> ClusterEval:
    if not (tmp_path / "verified_gym.jsonl").exists():
        si.write_gym_input(tmp_path / "verified_gym.jsonl", IDS)
    args = {
        "backend": Backend.GYM,
        "model": "Qwen/Qwen3.5-35B-A3B",
        "output_dir": tmp_path / "out",
        "instance_ids": IDS,
        "seeds": 4,
        "server_url": "http://node1:8000/v1",
        "gym_input": tmp_path / "verified_gym.jsonl",
        "container_formatter": SIF,
    }
    return ClusterEval(**(args | kw))


def ns_eval(tmp_path: Path, **kw) -> ClusterEval:
    args = {
        "backend": Backend.NEMO_SKILLS,
        "model": "/ckpt/rl-step-200",
        "output_dir": tmp_path / "ns",
        "instance_ids": IDS,
        "seeds": 2,
        "cluster": "slurm",
    }
    return ClusterEval(**(args | kw))


def hydra_overrides(argv) -> dict:
    """``+key=value`` words as Hydra parses them, into one config dict.

    ``hydra.run.dir`` is Hydra's own key (where it logs), not Gym's: checked and left out.
    """
    parsed = OverridesParser.create().parse_overrides([str(a) for a in argv])
    hydra = [o for o in parsed if o.key_or_group.startswith("hydra.")]
    assert [o.key_or_group for o in hydra] == ["hydra.run.dir"], argv
    assert Path(hydra[0].value()).is_absolute() and not hydra[0].is_add()
    parsed = [o for o in parsed if o not in hydra]
    assert all(o.is_add() for o in parsed), argv  # "+key": Gym's CLI adds new keys
    conf = OmegaConf.create()
    for o in parsed:
        OmegaConf.update(conf, o.key_or_group, o.value(), force_add=True)
    return OmegaConf.to_container(conf)


def _gym_root() -> Path:
    spec = importlib.util.find_spec("responses_api_agents")
    return Path(spec.submodule_search_locations[0]).parent


class TestGymCommands:
    def test_collection_is_a_valid_rollout_collection_config(self, tmp_path):
        from nemo_gym.rollout_collection import RolloutCollectionConfig

        _, collect = plan_eval(gym_eval(tmp_path)).commands
        assert collect.argv[0] == "ng_collect_rollouts"
        doc = hydra_overrides(collect.argv[1:])
        assert set(doc) <= set(RolloutCollectionConfig.model_fields)
        config = RolloutCollectionConfig.model_validate(doc)
        assert config.num_repeats == 4 and config.resume_from_cache is True
        assert config.agent_map == {"_default": "swe_agents"}
        assert Path(config.output_jsonl_fpath) == (tmp_path / "out/rollouts.jsonl").resolve()

    def test_the_server_config_is_the_installed_swe_agents_config(self, tmp_path):
        from responses_api_agents.swe_agents.app import SWEBenchWrapperConfig

        serve, _ = plan_eval(
            gym_eval(tmp_path, overrides=(f"{GYM_AGENT_KEY}.agent_max_turns=200",))
        ).commands
        assert serve.argv[0] == "ng_run"
        doc = hydra_overrides(serve.argv[1:])
        merged = OmegaConf.create()
        for path in doc.pop("config_paths"):
            assert (_gym_root() / path).is_file(), path
            merged = OmegaConf.merge(merged, OmegaConf.load(_gym_root() / path))
        merged = OmegaConf.merge(merged, OmegaConf.create(doc))
        agent = OmegaConf.to_container(merged.swe_agents.responses_api_agents.swe_agents)
        assert set(doc["swe_agents"]["responses_api_agents"]["swe_agents"]) <= set(
            SWEBenchWrapperConfig.model_fields
        )
        assert agent["container_formatter"] == SIF and agent["agent_max_turns"] == 200
        assert agent["agent_framework"] == "openhands"
        policy = OmegaConf.to_container(merged.policy_model, resolve=True)
        vllm = policy["responses_api_models"]["vllm_model"]
        assert (vllm["base_url"], vllm["model"]) == ("http://node1:8000/v1", "Qwen/Qwen3.5-35B-A3B")

    def test_hydra_s_run_dir_is_inside_the_output_dir(self, tmp_path):
        """Not Hydra's default ``outputs/<date>/<time>`` in the cwd; each program its own."""
        out = (tmp_path / "out").resolve()
        dirs = []
        for cmd in plan_eval(gym_eval(tmp_path)).commands:
            parsed = OverridesParser.create().parse_overrides(list(cmd.argv[1:]))
            (run_dir,) = [o.value() for o in parsed if o.key_or_group == "hydra.run.dir"]
            dirs.append(Path(run_dir))
        assert dirs == [out / "hydra/ng_run", out / "hydra/ng_collect_rollouts"]

    def test_another_agent_gets_no_swe_agents_keys(self, tmp_path):
        """--gym-agent: the collection's agent; no container, so no SWEBenchWrapperConfig keys."""
        agent = "example_single_tool_call_simple_agent"
        config = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"
        e = gym_eval(tmp_path, gym_agent=agent, gym_config=config, container_formatter=None)
        serve, collect = plan_eval(e).commands
        doc = hydra_overrides(serve.argv[1:])
        assert doc["config_paths"][0] == config and "swe_agents" not in doc
        assert not any("container_formatter" in a for a in serve.argv)
        assert hydra_overrides(collect.argv[1:])["agent_name"] == agent
        merged = OmegaConf.load(_gym_root() / config)
        assert "responses_api_agents" in merged[agent]  # an agent server of that config

    def test_a_swe_agents_server_of_another_name_gets_its_keys(self, tmp_path):
        config = "responses_api_agents/swe_agents/configs/swebench_openhands_training.yaml"
        e = gym_eval(tmp_path, gym_agent="swe_agents_val", gym_config=config)
        serve, collect = plan_eval(e).commands
        doc = hydra_overrides(serve.argv[1:])
        merged = OmegaConf.merge(
            OmegaConf.load(_gym_root() / config),
            {k: v for k, v in doc.items() if k != "config_paths"},
        )
        agent = merged.swe_agents_val.responses_api_agents.swe_agents
        assert agent.container_formatter == SIF and agent.concurrency == 64
        assert set(doc) == {"config_paths", "policy_base_url", "policy_api_key",
                            "policy_model_name", "swe_agents_val"}  # fmt: skip
        assert hydra_overrides(collect.argv[1:])["agent_name"] == "swe_agents_val"

    def test_graded_rollouts_are_not_run_again(self, tmp_path):
        e = gym_eval(tmp_path)
        sf.write_gym_rollouts(e.output_dir / "rollouts.jsonl", [FOUR, FOUR])  # repeats 0 and 1
        plan = plan_eval(e)
        assert (plan.total, plan.remaining) == (16, 8)
        assert plan.cpu_hours == pytest.approx(8 * 45 / 60)
        assert plan.gpu_hours == pytest.approx(8 * 45 / 60)  # one wave of 8 < 64

    def test_only_the_evaluation_s_instances_and_seeds_count(self, tmp_path):
        """8 rows of one instance, indexes 0..7, are 2 of 4 x 2 rollouts, never all of them."""
        e = gym_eval(tmp_path, seeds=2)
        made = sf.write_gym_rollouts(tmp_path / "made.jsonl", [FOUR])
        one = json.loads(made.read_text().splitlines()[0])
        lines = [json.dumps({**one, "_ng_rollout_index": i}) for i in range(8)]
        other = json.loads(made.read_text().splitlines()[1])
        other["instance_config"]["problem_info"]["instance_id"] = "not__inthe-1"
        other["responses_create_params"]["metadata"]["instance_id"] = "not__inthe-1"
        lines.append(json.dumps(other))
        (e.output_dir).mkdir()
        (e.output_dir / "rollouts.jsonl").write_text("".join(x + "\n" for x in lines))
        plan = plan_eval(e)
        assert (plan.total, plan.remaining) == (8, 6)
        assert plan.notes == (
            f"7 row(s) not of this evaluation's instances x 2 seed(s), not counted (first: "
            f"{e.output_dir / 'rollouts.jsonl'}:3)",
        )

    def test_a_torn_final_line_is_left_out_and_named_a_torn_middle_line_is_refused(
        self, tmp_path, capsys
    ):
        e = gym_eval(tmp_path, seeds=2)
        rows = sf.write_gym_rollouts(tmp_path / "made.jsonl", [FOUR, FOUR]).read_text()
        results = e.output_dir / "rollouts.jsonl"
        e.output_dir.mkdir()
        lines = rows.splitlines()
        results.write_text("".join(x + "\n" for x in lines[:3]) + lines[3][:200])
        plan = plan_eval(e)
        assert (plan.remaining, plan.notes) == (
            5,
            (f"a torn final line, not counted: {results}:4",),
        )
        results.write_text("".join(x + "\n" for x in lines[:3]) + lines[3])  # JSON: Gym keeps it
        assert (plan_eval(e).remaining, plan_eval(e).notes) == (4, ())
        results.write_text("".join(x + "\n" for x in lines[:3]) + lines[3][:200] + "\n" + rows)
        argv = ["swe", "eval", "--backend", "gym", "--model", "base", "--seeds", "2",
                "--server-url", "http://127.0.0.1:8000/v1", "--gym-input",
                str(tmp_path / "in.jsonl"), "--container-formatter", SIF, "--output-dir",
                str(e.output_dir), "--dataset", str(si.DATASET), "--instance-ids", *IDS,
                "--dry-run"]  # fmt: skip
        code, _, err = run_cli(argv, capsys)
        assert_one_error(code, err, rf"{re.escape(str(results))}:4: not valid JSON")

    def test_the_same_rollout_twice_is_refused_as_swe_compare_refuses_it(self, tmp_path):
        e = gym_eval(tmp_path, seeds=2)
        rows = sf.write_gym_rollouts(tmp_path / "made.jsonl", [FOUR, FOUR]).read_text()
        e.output_dir.mkdir()
        (e.output_dir / "rollouts.jsonl").write_text(rows + rows)
        with pytest.raises(SweError, match=r"rollouts.jsonl:9: rollout 0 of '.*' already at "
                           r".*rollouts.jsonl:1"):  # fmt: skip
            plan_eval(e)


class TestNemoSkillsCommand:
    @staticmethod
    def ns_eval_parser() -> click.Command:
        """``ns eval`` as typer builds it from the signature (underscored names, bool flags)."""
        params = [
            click.Option(
                [f"--{name}/--no-{name}"] if spec["flag"] else [f"--{name}"],
                required=spec["required"],
                is_flag=spec["flag"] or None,
            )
            for name, spec in NS_CLI["ns_eval_options"].items()
        ]
        return click.Command(
            "eval",
            params=params,
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        )

    def test_the_command_line_parses_as_ns_eval_and_its_hydra_keys_exist(self, tmp_path):
        (cmd,) = plan_eval(ns_eval(tmp_path, overrides=("inference.temperature=0.7",))).commands
        assert cmd.argv[:2] == ("ns", "eval")
        ctx = self.ns_eval_parser().make_context("eval", list(cmd.argv[2:]))
        assert ctx.params["benchmarks"] == "swe-bench:2"
        assert ctx.params["server_type"] == "vllm" and ctx.params["cluster"] == "slurm"
        assert Path(ctx.params["output_dir"]) == (tmp_path / "ns").resolve()
        assert ctx.params["server_gpus"] == "8"  # hosted by ns: no --server-url
        for extra in ctx.args:  # passed to nemo_skills.inference.eval.swebench (Hydra)
            key, value = re.fullmatch(r"\+\+([\w.]+)=(.*)", extra).groups()
            top, _, sub = key.partition(".")
            assert top in NS_CLI["swebench_generation_keys"], key
            if top == "inference":
                assert sub in NS_CLI["swebench_inference_keys"], key
            if key == "agent_framework":
                assert value in NS_CLI["agent_frameworks"]

    def test_a_served_checkpoint_is_given_by_its_address(self, tmp_path):
        (cmd,) = plan_eval(ns_eval(tmp_path, server_url="http://node2:5000/v1")).commands
        ctx = self.ns_eval_parser().make_context("eval", list(cmd.argv[2:]))
        assert ctx.params["server_address"] == "http://node2:5000/v1"
        assert ctx.params["server_gpus"] is None

    def test_finished_seeds_and_graded_instances_are_not_run_again(self, tmp_path):
        e = ns_eval(tmp_path, seeds=3)
        sf.write_nemo_skills(e.output_dir, [FOUR])  # seed 0 finished (.done)
        results = e.output_dir / "eval-results/swe-bench"
        lines = (results / "output-rs0.jsonl").read_text().splitlines()
        (results / "output-rs1.jsonl-async").write_text("\n".join(lines[:3]) + "\n")
        plan = plan_eval(e)
        assert (plan.total, plan.remaining) == (12, 12 - 4 - 3)


def test_swe_eval_dry_run_prints_the_commands_and_the_cost(tmp_path, capsys):
    argv = ["swe", "eval", "--backend", "nemo-skills", "--model", "/ckpt/rl", "--cluster", "slurm",
            "--output-dir", str(tmp_path / "ns"), "--seeds", "4", "--dataset", str(si.DATASET),
            "--dry-run"]  # fmt: skip
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    assert "500 instances x 4 seed(s) = 2000 rollouts; 0 already graded" in out
    assert "24.0 h wall, 192.0 GPU-hours (8 serving GPUs), 1500.0 CPU-hours" in out
    assert "ns eval --cluster=slurm --model=/ckpt/rl --server_type=vllm --server_gpus=8 " in out
    assert not (tmp_path / "ns").exists()  # a dry run writes nothing


def test_an_engine_that_is_not_installed_is_an_infrastructure_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no `ns` here
    argv = ["swe", "eval", "--backend", "nemo-skills", "--model", "/ckpt/rl", "--cluster", "slurm",
            "--output-dir", str(tmp_path / "out"), "--dataset", str(si.DATASET)]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert_one_error(code, err, r"ns is not installed here", expected_code=3)


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        (["--backend", "docker"],
         r"swe eval --backend docker needs --predictions and --harness-run-id"),
        (["--backend", "gym", "--model", "m", "--output-dir", "o"],
         r"--backend gym needs --server-url, --gym-input, --container-formatter"),
        (["--backend", "nemo-skills", "--model", "m", "--output-dir", "o"],
         r"--backend nemo-skills needs --cluster"),
        (["--backend", "nemo-skills", "--model", "m", "--output-dir", "o", "--cluster", "c",
          "--override=--rerun_done"], r"override '--rerun_done' is not key=value"),
        (["--backend", "nemo-skills", "--model", "m", "--output-dir", "o", "--cluster", "c",
          "--override", "a=b\nc"], r"is not key=value"),
        (["--backend", "nemo-skills", "--model=a\nb", "--output-dir", "o", "--cluster", "c"],
         r"model 'a\\nb' is not a usable name"),
        (["--backend", "nemo-skills", "--model", "m", "--output-dir", "o", "--cluster", "c",
          "--server-url", "file:///etc/passwd"], r"--server-url 'file:///etc/passwd' is not"),
        (["--backend", "gym", "--model", "m", "--output-dir", "o", "--server-url", "http://h:1/v1",
          "--gym-input", "i.jsonl", "--container-formatter", "/sif/x.sif"],
         r"--container-formatter must hold \{instance_id\}"),
        (["--backend", "nemo-skills", "--model", "m", "--output-dir", "o", "--cluster", "c",
          "--seeds", "0"], r"argument --seeds"),
        (["--backend", "gym", "--model", "m", "--output-dir", "o", "--server-url", "http://h:1/v1",
          "--gym-input", "i.jsonl", "--gym-agent", "a.b=c"],
         r"--gym-agent 'a.b=c' is not a Gym server name"),
        (["--backend", "gym", "--model", "m", "--output-dir", "o", "--gym-agent", "simple"],
         r"--backend gym needs --server-url, --gym-input\n"),
        (["--backend", "nemo-skills", "--model", "m", "--output-dir", "o", "--cluster", "c",
          "--instance-ids", "django__django-99999"], r"--instance-ids not in the dataset"),
        (["--backend", "nemo-skills", "--model", "m", "--output-dir", "o", "--cluster", "c",
          "--instance-ids", "django__django-11099"],
         r"ns eval --benchmarks=swe-bench:N runs every instance of its benchmark, not 1 of"),
    ],
)  # fmt: skip
def test_swe_eval_refuses_bad_cluster_arguments(tmp_path, capsys, monkeypatch, extra, pattern):
    monkeypatch.chdir(tmp_path)
    argv = ["swe", "eval", "--dataset", str(si.DATASET), *extra, "--dry-run"]
    code, _, err = run_cli(argv, capsys)
    assert_one_error(code, err, pattern)


# --- running the gym path here, with stand-ins for the engine's two programs ----------------------
# The real ng_run builds a uv venv per server and installs nemo-gym (Python >= 3.13.14) into it,
# and the swe_agents server needs Apptainer and the .sif images: neither is possible here. The
# stand-ins take the same command lines; what is checked is rlgate's side: it waits for the
# server's ready line, runs the collection, stops the server, resumes, and compares the result.

STANDIN_SERVER = """#!{python}
import pathlib, signal, subprocess, sys, time
calls = pathlib.Path({calls!r})
calls.open("a").write("ng_run " + " ".join(sys.argv[1:]) + "\\n")
# nemo-gym 0.7.0's RunHelper: its servers are children in its process group, shut down on
# SIGINT (KeyboardInterrupt); SIGTERM has no handler and would leave them running.
child = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(1)"])
pathlib.Path({calls!r} + ".child").write_text(str(child.pid))
try:
    print("Checking for HTTP server statuses.\\n0 / 3 servers ready.", flush=True)
    time.sleep(0.5)
    if {fail!r}:
        child.kill()
        sys.exit(1)
    print("All 3 / 3 servers ready! Polling every 60s", flush=True)
    while True:
        time.sleep(1)
except KeyboardInterrupt:
    child.send_signal(signal.SIGINT)
    child.wait(timeout=5)
    calls.open("a").write("ng_run stopped\\n")
"""
STANDIN_COLLECT = """#!{python}
import pathlib, shutil, sys
pathlib.Path({calls!r}).open("a").write("ng_collect_rollouts\\n")
args = dict(a.lstrip("+").split("=", 1) for a in sys.argv[1:])
shutil.copy({rollouts!r}, args["output_jsonl_fpath"].strip("'"))
"""


def _standins(tmp_path: Path, *, fail: bool = False) -> tuple[Path, Path]:
    import sys

    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    rollouts = sf.write_gym_rollouts(tmp_path / "made.jsonl", [FOUR, FOUR])
    for name, text in (("ng_run", STANDIN_SERVER), ("ng_collect_rollouts", STANDIN_COLLECT)):
        path = bin_dir / name
        path.write_text(text.format(python=sys.executable, calls=str(calls), fail=fail,
                                    rollouts=str(rollouts)))  # fmt: skip
        path.chmod(0o755)
    return bin_dir, calls


def _gym_argv(tmp_path: Path) -> list[str]:
    dataset = si.write_subset_dataset(tmp_path / "four.jsonl", IDS)
    if not (tmp_path / "in.jsonl").exists():
        si.write_gym_input(tmp_path / "in.jsonl", IDS)
    return ["swe", "eval", "--backend", "gym", "--model", "base", "--seeds", "2",
            "--server-url", "http://127.0.0.1:8000/v1", "--gym-input", str(tmp_path / "in.jsonl"),
            "--container-formatter", SIF, "--output-dir", str(tmp_path / "out"),
            "--dataset", str(dataset)]  # fmt: skip


def test_the_gym_path_runs_resumes_and_compares(tmp_path, capsys, monkeypatch):
    import os

    bin_dir, calls = _standins(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code, out, err = run_cli(_gym_argv(tmp_path), capsys)
    assert code == 0, err
    assert "8 to run" in out and f"results: {tmp_path / 'out/rollouts.jsonl'}" in out
    lines = calls.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["ng_run", "ng_collect_rollouts", "ng_run"]
    assert lines[-1] == "ng_run stopped"  # the server is stopped once the collection ended
    child = Path(f"/proc/{int(Path(f'{calls}.child').read_text())}/stat")
    assert not child.is_file() or child.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert "All 3 / 3 servers ready!" in (tmp_path / "out/ng_run.log").read_text()
    # the same command again: everything is graded, nothing runs
    code, out, err = run_cli(_gym_argv(tmp_path), capsys)
    assert code == 0 and "8 already graded" in out and "0 to run" in out, err
    assert len(calls.read_text().splitlines()) == 3
    results = str(tmp_path / "out/rollouts.jsonl")
    argv = [
        "swe",
        "compare",
        "--before",
        results,
        "--after",
        results,
        "--resamples",
        "100",
        "--dataset",
        str(tmp_path / "four.jsonl"),
        "--json",
        str(tmp_path / "c.json"),
    ]
    code, out, err = run_cli(argv, capsys)
    doc = json.loads((tmp_path / "c.json").read_text())
    assert [r["format"] for r in doc["before"]["runs"]] == ["gym_rollouts"] * 2  # 2 seeds
    assert doc["before"]["infra"] == [1, 1]  # the timed-out agent, in each seed
    assert code == 3 and doc["verdict"] == "inconclusive"  # 1 of 4 instances is infra


def test_a_server_that_exits_before_it_is_ready_stops_the_eval(tmp_path, capsys, monkeypatch):
    import os

    bin_dir, calls = _standins(tmp_path, fail=True)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code, _, err = run_cli(_gym_argv(tmp_path), capsys)
    assert_one_error(code, err, r"ng_run exited with 1 before it was ready", expected_code=3)
    assert "ng_collect_rollouts" not in calls.read_text()
