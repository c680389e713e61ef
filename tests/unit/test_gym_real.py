"""``rlgate swe eval --backend gym`` with NeMo Gym's real ``ng_run`` and ``ng_collect_rollouts``.

Real (nemo-gym 0.7.0, installed here): Gym's head server, Ray, the four servers of
``resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml`` (its
resources server and verifier, ``simple_agent``, the ``legacy_agent`` environment server) and
``vllm_model``, the collection, its resume and its shutdown. The one stand-in is the model
behind ``vllm_model``: a fixed OpenAI-compatible chat server owned by this test (it calls
``get_weather`` when the question names SF, else answers in text); the reward is the real
verifier's (1 when the response calls ``get_weather``).

Gym builds each server's venv with uv at Python >= 3.13.14; here each server's venv is this
interpreter's venv instead: ``+uv_venv_dir`` puts it at ``<dir>/<type>/<name>/.venv`` and
``+skip_venv_if_present=true`` skips setup when its ``bin/python`` and ``bin/activate`` exist
(``nemo_gym/cli/setup_command.py::get_venv_path``, ``::setup_env_command``). What stays
untested here: swe_agents itself (Apptainer and the .sif images) and a GPU vLLM server.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rlgate.swe.backends import GYM_READY, GYM_ROLLOUTS, Backend, ClusterEval, progress

from .helpers import swe_inputs as si
from .test_swe_formats import IDS, run_cli

ENV = "resources_servers/example_single_tool_call"
CONFIG = f"{ENV}/configs/example_single_tool_call.yaml"
MODEL_CONFIG = "responses_api_models/vllm_model/configs/vllm_model.yaml"
AGENT = "example_single_tool_call_simple_agent"  # the agent server in CONFIG
MARK = "RLGATE_GYM_REAL_TEST"  # in the environment of every process a run starts


def _gym_root() -> Path | None:
    spec = importlib.util.find_spec("resources_servers")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def _bin_dir() -> Path | None:
    """Where ``ng_run`` and ``ng_collect_rollouts`` are: PATH, else next to this interpreter."""
    for where in (None, str(Path(sys.executable).parent)):
        found = [shutil.which(p, path=where) for p in ("ng_run", "ng_collect_rollouts")]
        if all(found):
            return Path(found[0]).parent  # type: ignore[arg-type]
    return None


ROOT, BIN = _gym_root(), _bin_dir()
pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("nemo_gym") is None or ROOT is None,
        reason="nemo-gym (with its resources_servers) is not installed",
    ),
    pytest.mark.skipif(BIN is None, reason="ng_run / ng_collect_rollouts are not installed"),
]


class _Model(BaseHTTPRequestHandler):
    """Fixed chat completions: ``get_weather`` for a question about SF, then a text answer."""

    firsts: list[str]  # the question of each rollout's first model call, in order
    seen: list[set[str]]  # the command lines of this test's processes, at each call

    def _send(self, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # Gym probes /v1/models
        self._send({"object": "list", "data": [{"id": "standin", "object": "model"}]})

    def do_POST(self) -> None:
        doc = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        messages = doc.get("messages", [])
        question = next(m["content"] for m in messages if m["role"] == "user")
        if messages[-1]["role"] == "user":
            type(self).firsts.append(question)
            type(self).seen.append(_ours())
        message: dict[str, Any] = {"role": "assistant", "content": "It is cold."}
        if messages[-1]["role"] == "user" and "sf" in question.lower():
            call = {"name": "get_weather", "arguments": json.dumps({"city": "SF"})}
            tool_call = {"id": "call_1", "type": "function", "function": call}
            message = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        self._send(
            {"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
             "model": doc.get("model"), "choices": [choice], "usage": usage}
        )  # fmt: skip

    def log_message(self, *args: Any) -> None:
        pass


def _ours() -> set[str]:
    """The command lines of the live processes (not this one) started under :data:`MARK`."""
    found = set()
    mark = f"{MARK}={os.environ[MARK]}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if mark not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # exited, not yet reaped
            found.add((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gym(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The model stand-in, the servers' venvs, the inputs, and Gym's settings, all in tmp_path."""
    from omegaconf import DictConfig, OmegaConf

    if sys.prefix == sys.base_prefix or not (Path(sys.prefix) / "bin/activate").is_file():
        pytest.skip("the servers reuse this interpreter's venv, and this interpreter is not in one")
    assert ROOT is not None and BIN is not None
    venvs = tmp_path / "venvs"
    for path in (CONFIG, MODEL_CONFIG):
        for value in OmegaConf.load(ROOT / path).values():
            for kind, servers in value.items() if isinstance(value, DictConfig) else ():
                for name, server in servers.items():
                    if isinstance(server, DictConfig) and "entrypoint" in server:
                        (venvs / kind / name).mkdir(parents=True)
                        (venvs / kind / name / ".venv").symlink_to(sys.prefix)
    assert len(list(venvs.glob("*/*/.venv"))) == 4
    lines = (ROOT / ENV / "data/example.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines[: len(IDS)]]
    with (tmp_path / "in.jsonl").open("w") as fh:
        for iid, row in zip(IDS, rows, strict=True):  # rlgate reads the id from the metadata
            row["responses_create_params"]["metadata"] = {"instance_id": iid}
            fh.write(json.dumps(row) + "\n")
    si.write_subset_dataset(tmp_path / "four.jsonl", IDS)
    # Gym's head server port, for both programs: env.yaml in the cwd (global_config.py)
    (tmp_path / "env.yaml").write_text(f"head_server:\n  port: {_free_port()}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(MARK, str(tmp_path))
    # Ray's files in tmp_path, not /tmp/ray, through a short link: its sockets' paths must fit
    # in 107 bytes (ray/_private/utils.py::validate_socket_filepath)
    (tmp_path / "ray").mkdir()
    short = Path(tempfile.mkdtemp(prefix="rg"))
    (short / "r").symlink_to(tmp_path / "ray")
    monkeypatch.setenv("RAY_TMPDIR", str(short / "r"))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no token written to ~/.ray
    handler = type("Model", (_Model,), {"firsts": [], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    argv = ["swe", "eval", "--backend", "gym", "--model", "standin", "--seeds", "2",
            "--server-url", f"http://127.0.0.1:{server.server_port}/v1",
            "--gym-input", str(tmp_path / "in.jsonl"), "--gym-config", str(ROOT / CONFIG),
            "--gym-agent", AGENT, "--output-dir", str(tmp_path / "out"),
            "--dataset", str(tmp_path / "four.jsonl"), "--concurrency", "2",
            "--override", "skip_venv_if_present=true",
            "--override", f"uv_venv_dir={venvs}"]  # fmt: skip
    try:
        yield argv, handler
    finally:
        server.shutdown()
        server.server_close()
        (short / "r").unlink()
        short.rmdir()


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _pairs(path: Path) -> list[tuple[str, int, float]]:
    """(instance id, rollout index, reward) of each row, sorted."""
    return sorted(
        (r["responses_create_params"]["metadata"]["instance_id"], r["_ng_rollout_index"],
         r["reward"])
        for r in _rows(path)
    )  # fmt: skip


def test_the_real_gym_programs_run_resume_and_stop(gym, tmp_path, capsys):
    argv, model = gym
    out = tmp_path / "out"
    e = ClusterEval(Backend.GYM, "standin", out, IDS, seeds=2, server_url="http://h:1/v1",
                    gym_input=tmp_path / "in.jsonl", gym_agent=AGENT)  # fmt: skip
    code, text, err = run_cli(argv, capsys)
    assert code == 0, err + text
    assert "0 already graded" in text and "8 to run" in text
    log = (out / "ng_run.log").read_text()
    assert GYM_READY.search(log) and "All 4 / 4 servers ready!" in log  # the real line
    # the collection ran against the live servers: the real simple_agent's first model calls
    assert len(model.firsts) == 8
    assert all(any("app.py" in c for c in seen) for seen in model.seen)
    assert any("raylet" in c for c in model.seen[0]), model.seen[0]
    assert _ours() == set()  # ng_run, its servers and its Ray cluster are gone
    questions = {
        r["responses_create_params"]["metadata"]["instance_id"]: r["responses_create_params"][
            "input"
        ][-1]["content"]
        for r in _rows(tmp_path / "in.jsonl")
    }
    sf = {iid for iid, question in questions.items() if "sf" in question.lower()}
    assert 0 < len(sf) < len(IDS)
    expected = sorted((iid, i, float(iid in sf)) for iid in IDS for i in range(2))
    assert _pairs(out / GYM_ROLLOUTS) == expected  # the real verifier's rewards
    assert progress(e).done == {(iid, i) for iid in IDS for i in range(2)}
    assert not (tmp_path / "outputs").exists()  # Hydra's run dirs went to the output dir
    assert {p.name for p in (out / "hydra").iterdir()} == {"ng_run", "ng_collect_rollouts"}

    # Cut the rollouts short as a killed job leaves them: 5 rows and a torn sixth.
    lines = (out / GYM_ROLLOUTS).read_text().splitlines(keepends=True)
    (out / GYM_ROLLOUTS).write_text("".join(lines[:5]) + lines[5][:40])
    kept = [json.loads(line) for line in lines[:5]]
    code, text, err = run_cli(argv, capsys)
    assert code == 0, err + text
    assert "5 already graded" in text and "3 to run" in text and "a torn final line" in text
    assert len(model.firsts) == 8 + 3  # Gym's resume ran only the missing rollouts
    assert _pairs(out / GYM_ROLLOUTS) == expected  # each (instance, seed) once
    assert all(row in _rows(out / GYM_ROLLOUTS) for row in kept)  # not run again
    assert _ours() == set()

    # Everything graded: nothing is started.
    before = (out / "ng_run.log").stat().st_mtime_ns
    code, text, err = run_cli(argv, capsys)
    assert code == 0 and "8 already graded" in text and "0 to run" in text, err
    assert len(model.firsts) == 11 and (out / "ng_run.log").stat().st_mtime_ns == before
