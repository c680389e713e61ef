"""NeMo RL driver logs as ``run_grpo_nemo_gym.py`` writes them (stdout + stderr under Ray).

The shape follows NeMo RL 7ea279a: the setup banner, one ``===== Step k/N =====`` banner per
step (``nemo_rl/algorithms/grpo.py``) followed by its "Training Results" and "Timing" blocks,
Ray's ``(ActorName pid=N)`` prefix on every line an actor prints (the NemoGym actor hosts the
Gym servers, so agent observations -- tool output -- arrive with it), and the endings real
runs have: a Python traceback in the driver, a ``RayTaskError`` carrying a worker's own
traceback, a worker's NCCL watchdog abort followed by the driver's ``ActorDiedError``.
"""

from __future__ import annotations

from collections.abc import Sequence

GYM = "(NemoGym pid=4321)"
WORKER = "(MegatronPolicyWorker pid=2345, ip=10.65.3.7)"

SETUP = (
    "Loaded config from /lustre/fsw/rlgate/recipes/grpo-qwen3.5-35ba3b.yaml",
    "Ray head node address: 10.65.3.7:6379",
    "==================================================",
    "                  SETUP COMPLETE",
    "==================================================",
    "✅ All setup complete, starting buffer wait...",
    "✅ Buffer ready for step 0! Starting training loop...",
)


def step(k: int, target: int, *, loss: float = 0.0213) -> list[str]:
    """The lines NeMo RL prints for one completed training step."""
    return [
        "",
        f"{'=' * 25} Step {k}/{target} {'=' * 25}",
        "",
        "📊 Training Results:",
        f"  • Loss: {loss:.4f}",
        "  • Generation KL Error: 0.0012",
        "  • Avg Reward: 0.3125",
        "",
        "⏱️  Timing:",
        "  • Total step time: 412.37s",
    ]


def echo(*text: str, actor: str = GYM) -> list[str]:
    """An agent's tool output as the Gym actor logs it (observations, shell output)."""
    return [f"{actor} [swe_agents] observation: {line}" for line in text]


def traceback(*frames_and_error: str, actor: str = "") -> list[str]:
    """A Python traceback: ``Traceback ...``, frames, then the exception line(s)."""
    prefix = f"{actor} " if actor else ""
    return [f"{prefix}Traceback (most recent call last):"] + [
        f"{prefix}{line}" for line in frames_and_error
    ]


DRIVER_FRAMES = (
    '  File "/opt/nemo-rl/examples/nemo_gym/run_grpo_nemo_gym.py", line 262, in <module>',
    "    main()",
    '  File "/opt/nemo-rl/nemo_rl/algorithms/grpo.py", line 4702, in async_grpo_train',
    "    train_results = policy.train(train_data, loss_fn)",
)

LOSS_IS_NAN = traceback(
    *DRIVER_FRAMES,
    '  File "/opt/nemo-rl/nemo_rl/algorithms/loss_functions.py", line 311, in __call__',
    '    raise ValueError("loss is NaN")',
    "ValueError: loss is NaN",
)

#: What an agent's ``pytest`` or ``pip install`` run in the sandbox prints, echoed back.
ECHOED_DISK_FULL = echo(
    "$ pip install -e .",
    "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device",
    "OSError: [Errno 28] No space left on device: '/tmp/pip-req-build-x1'",
)
ECHOED_PYTHON_ERROR = echo(
    "$ python -m pytest tests/test_units.py -x",
    "Traceback (most recent call last):",
    '  File "/testbed/astropy/units/core.py", line 2046, in __call__',
    "    raise ValueError(f'{s!r} did not parse as unit')",
    "ValueError: 'm/s/s' did not parse as unit",
)
ECHOED_TIMEOUTS = echo(
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
    "[rank0]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout",
    "slurmstepd: error: *** JOB 12 ON pool0-01 CANCELLED AT 2026-12-01T03:00:00 "
    "DUE TO TIME LIMIT ***",
)

#: A worker's NCCL watchdog abort, then the driver learns that the actor died.
NCCL_WATCHDOG = [
    f"{WORKER} [rank3]:[E1201 02:41:07.803 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600049 milliseconds before timing out.",
    f"{WORKER} [rank3]:[E1201 02:41:07.811 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID "
    "0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
    "[Rank 3] Watchdog caught collective operation timeout",
    f"{WORKER} terminate called after throwing an instance of 'c10::DistBackendError'",
    f"{WORKER} *** SIGABRT received at time=1764556867 on cpu 17 ***",
]
ACTOR_DIED = traceback(
    *DRIVER_FRAMES,
    '  File "/usr/local/lib/python3.12/site-packages/ray/_private/worker.py", line 2961, in get',
    "    raise value",
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    "\tclass_name: MegatronPolicyWorker",
    "\tactor_id: 5e8c3bd0f38a1d9d7fb1c56a01000000",
    "\tpid: 2345",
    "\tnamespace: 2c5c8f06-3c1c-4d8e-9f5c-0b9a1f7f2f4c",
    "\tip: 10.65.3.7",
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker "
    "exit detail: Worker unexpectedly exits with a connection error code 2. End of file.",
)

#: A worker's CUDA OOM, as the driver re-raises it (RayTaskError carries the remote traceback).
RAY_TASK_OOM = traceback(
    *DRIVER_FRAMES,
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::MegatronPolicyWorker.train() "
    "(pid=2345, ip=10.65.3.7, actor_id=5e8c3bd0f38a1d9d7fb1c56a01000000)",
    '  File "/opt/nemo-rl/nemo_rl/models/policy/workers/megatron_policy_worker.py", line 988, '
    "in train",
    "    losses_reduced = forward_backward_func(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
    "capacity of 79.19 GiB of which 1.05 GiB is free.",
)

#: What Ray prints after the driver's exception while it shuts the actors down.
SHUTDOWN = (
    "(raylet) [2026-12-01 02:41:09,112 I 1871 1871] Worker exited, shutting down.",
    "Detected ENDED file, terminating...",
)


def driver_log(
    *parts: Sequence[str], steps: int = 0, target: int = 20, setup: bool = True
) -> list[str]:
    """Setup, ``steps`` completed steps, then ``parts`` in order (the run's last step)."""
    lines: list[str] = list(SETUP) if setup else []
    for k in range(1, steps + 1):
        lines += step(k, target)
    if steps:  # the step that never finished starts with its banner
        lines += ["", f"{'=' * 25} Step {steps + 1}/{target} {'=' * 25}"]
    for part in parts:
        lines += list(part)
    return lines
