r"""MLflow runs, as NeMo RL's ``MLflowLogger`` writes them (``logger.mlflow_enabled=True``).

Three back-ends, read with the Python standard library (MLflow's own client cannot be
installed beside rlgate's pins; the stores are written by MLflow 3.15.1 in the tests):

* a **file store**: an ``mlruns/`` directory, or a directory holding one
  (``mlruns/<experiment_id>/<run_id>/metrics/<key>``, lines ``timestamp value step``);
* the **SQLite** back-end NeMo RL's docs recommend (MLflow 3's default, ``./mlflow.db``):
  ``sqlite:///mlflow.db``, the file itself, or a directory holding ``mlflow.db``; opened
  read-only; a corrupt file or another application's database is refused;
* a **tracking server**, ``http(s)://host:port``, through MLflow's REST API
  (``/api/2.0/mlflow/...``: ``experiments/search``, ``runs/search``, ``runs/get``,
  ``metrics/get-history``), with ``MLFLOW_TRACKING_TOKEN`` or
  ``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` (or the URL's user info) as MLflow's client
  takes them. No redirect is followed (it could carry the credentials elsewhere), a reply is
  at most 64 MiB, an unreachable server is exit 3, and a password is never printed.

**Which run.** ``STORE#<run_id>`` (32 hex digits), ``STORE#<experiment>/<run name>``, or
``STORE#<run name>``; with no ``#``, the store's only run. NeMo RL starts a new MLflow run
per job (``mlflow.start_run(run_name=logger.mlflow.run_name)``), so a name can select the
several jobs of one multi-job run: they are merged oldest first, as the ``exp_NNN/`` dirs of
a TensorBoard log dir are, and a job that resumed the same run (``logger.mlflow.run_id``)
logs its steps again: each time a tag's step goes back, a new *attempt* begins. So
:func:`~rlgate.runs.records.run_progress` judges the latest attempt, as for TensorBoard.

**Names.** ``MLflowLogger.log_metrics`` (``nemo_rl/utils/logger.py`` @ 7ea279a) logs
``flatten_dict(metrics, sep="/", expand_lists=False)`` under ``f"{prefix}/{name}"`` at the
``step`` it is given, as ``TensorboardLogger`` names ``add_scalar(f"{prefix}/{name}",
value, step)``: a scalar's MLflow key is its TensorBoard tag, and is read as it is. Keys
TensorBoard never has (nested dicts, and lists summarised as ``<name>/mean|p50|p90|max``,
which TensorBoard skips) are kept under their MLflow names. MLflow allows no other key
characters (``[\w/.\- :]``), so nothing is renamed either way.

**Values.** NaN is kept (the checks fail on it, naming the step). MLflow's SQL stores, and
a server over one, keep ``±inf`` as ``±1.7976931348623157e308`` (``sys.float_info.max``):
such a value is read back as ``±inf``, with a warning.
"""

from __future__ import annotations

import base64
import difflib
import json
import math
import os
import re
import sqlite3
import sys
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from rlgate.core.errors import InfraError, MetricsError
from rlgate.core.io import note_input, read_text, read_yaml
from rlgate.runs.records import (
    MAX_STEP,
    Merger,
    RunMetrics,
    SourceKind,
    log_warnings,
    no_scalars,
    summarise_conflicts,
)
from rlgate.runs.registry import RunFormat, RunSource, masked_url, register

__all__ = ["Mlflow", "MlflowRun", "load_mlflow", "select_runs"]

RUN_ID = re.compile(r"[0-9a-f]{32}")
SQLITE_MAGIC = b"SQLite format 3\x00"
_MLFLOW_TABLES = {"experiments", "runs", "metrics", "alembic_version"}
_FLOAT_MAX = sys.float_info.max
MAX_REPLY = 64 << 20  # bytes of one REST reply
MAX_PAGES = 1000  # pages of one listing or one metric's history
TIMEOUT = 30.0
_HINT = (
    "name the run: append #<run_id>, #<experiment>/<run name> or #<run name> to the store "
    "(MLflow's UI shows the run id)"
)


@dataclass(frozen=True, slots=True)
class MlflowRun:
    """One MLflow run: its id, name, experiment, start time (ms) and status."""

    run_id: str
    name: str
    experiment_id: str
    experiment: str
    start_time: int
    status: str
    keys: tuple[str, ...] = ()  # the metric keys (the REST back-end lists them with the run)

    def label(self) -> str:
        """``experiment/name (run_id)`` for messages."""
        return f"{self.experiment}/{self.name} ({self.run_id})"


# points of one metric: (timestamp ms, step, value), in logged order
Points = list[tuple[int, int, float]]


class _Backend(ABC):
    """One MLflow store: its runs and a run's metric histories."""

    shown: str

    @abstractmethod
    def runs(self) -> list[MlflowRun]:
        """Every active run of every active experiment."""

    def runs_in(self, experiment: str) -> list[MlflowRun]:
        """The active runs of the experiment called ``experiment``."""
        return [r for r in self.runs() if r.experiment == experiment]

    @abstractmethod
    def history(self, run: MlflowRun) -> dict[str, Points]:
        """``{key: [(timestamp, step, value), ...]}`` in logged order."""

    def run_by_id(self, run_id: str) -> MlflowRun | None:
        """The run with this id (also when its experiment holds many runs)."""
        return next((r for r in self.runs() if r.run_id == run_id), None)


def _step(where: str, raw: Any) -> int:
    try:
        step = int(raw)
    except (TypeError, ValueError, OverflowError):
        step = -1
    if isinstance(raw, float) and not raw.is_integer():
        step = -1
    if not 0 <= step <= MAX_STEP:
        raise MetricsError(f"{where}: step {str(raw)[:40]!r} is not a training step")
    return step


def _int(raw: Any) -> int:
    """A start time as an integer (0 when it is not one: only the run order uses it)."""
    try:
        return int(raw or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def _number(where: str, raw: Any) -> float:
    if isinstance(raw, bool):
        raise MetricsError(f"{where}: value {raw!r} is not a number")
    if isinstance(raw, str) and raw in ("NaN", "Infinity", "-Infinity"):
        return float(raw.replace("Infinity", "inf"))
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise MetricsError(f"{where}: value {str(raw)[:40]!r} is not a number") from None


# --- the file store ----------------------------------------------------------------------


class _FileStore(_Backend):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.shown = str(root)

    def _meta(self, path: Path) -> dict[str, Any]:
        meta = read_yaml(path, what="MLflow meta.yaml", error=MetricsError)
        if not isinstance(meta, dict):
            raise MetricsError(f"{path}: not an MLflow meta.yaml (a {type(meta).__name__})")
        return meta

    def runs(self) -> list[MlflowRun]:
        found = []
        for exp_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            if exp_dir.name.startswith(".") or not (exp_dir / "meta.yaml").is_file():
                continue
            exp = self._meta(exp_dir / "meta.yaml")
            if exp.get("lifecycle_stage", "active") != "active":
                continue
            for run_dir in sorted(p for p in exp_dir.iterdir() if p.is_dir()):
                meta_file = run_dir / "meta.yaml"
                if not meta_file.is_file():
                    continue
                meta = self._meta(meta_file)
                if meta.get("lifecycle_stage", "active") != "active":
                    continue
                name = meta.get("run_name") or self._tag(run_dir, "mlflow.runName") or ""
                found.append(
                    MlflowRun(
                        str(meta.get("run_id") or run_dir.name),
                        str(name),
                        str(exp.get("experiment_id", exp_dir.name)),
                        str(exp.get("name", exp_dir.name)),
                        _int(meta.get("start_time")),
                        str(meta.get("status", "")),
                    )
                )
        return found

    @staticmethod
    def _tag(run_dir: Path, key: str) -> str | None:
        tag = run_dir / "tags" / key
        return read_text(tag, what="MLflow tag", error=MetricsError) if tag.is_file() else None

    def _run_dir(self, run: MlflowRun) -> Path:
        return self.root / run.experiment_id / run.run_id

    def history(self, run: MlflowRun) -> dict[str, Points]:
        metrics = self._run_dir(run) / "metrics"
        out: dict[str, Points] = {}
        if not metrics.is_dir():
            return out
        for top, _dirs, names in os.walk(metrics):  # links are not followed
            for name in sorted(names):
                file = Path(top) / name
                key = file.relative_to(metrics).as_posix()
                out[key] = self._points(file)
        return out

    @staticmethod
    def _points(file: Path) -> Points:
        if file.is_symlink() or not file.is_file():
            raise MetricsError(f"{file}: not a regular file (an MLflow metric file is one)")
        points: Points = []
        text = read_text(file, what="MLflow metric file", error=MetricsError)
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            fields = line.split()
            where = f"{file}:{i}"
            if len(fields) not in (2, 3):
                raise MetricsError(
                    f"{where}: not an MLflow metric line 'timestamp value step': {line[:60]!r}"
                )
            ts = _step(where, fields[0])
            step = _step(where, fields[2]) if len(fields) == 3 else 0
            points.append((ts, step, _number(where, fields[1])))
        return points


# --- SQLite --------------------------------------------------------------------------------


class _SqliteStore(_Backend):
    def __init__(self, path: Path) -> None:
        note_input(path, "run")  # a sqlite:/// URL's database is an input like a path
        self.path = path
        self.shown = str(path)
        uri = "file:" + urllib.request.pathname2url(str(path.resolve())) + "?mode=ro"
        try:
            self.db = sqlite3.connect(uri, uri=True)
            tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
        except sqlite3.Error as exc:
            raise MetricsError(f"{path}: not a readable SQLite database ({exc})") from None
        if not _MLFLOW_TABLES <= tables:
            raise MetricsError(
                f"{path}: a SQLite database, but not an MLflow tracking store (it lacks the "
                f"tables {', '.join(sorted(_MLFLOW_TABLES - tables))})",
                hint="pass the database NeMo RL's MLflow logger wrote (MLFLOW_TRACKING_URI)",
            )

    def _query(self, sql: str, args: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        try:
            yield from self.db.execute(sql, args)
        except sqlite3.Error as exc:
            raise MetricsError(f"{self.path}: cannot read the MLflow store ({exc})") from None

    def runs(self) -> list[MlflowRun]:
        rows = self._query(
            "SELECT r.run_uuid, r.name, r.experiment_id, e.name, r.start_time, r.status "
            "FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id "
            "WHERE r.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active'"
        )
        return [
            MlflowRun(str(a), str(b or ""), str(c), str(d), _int(e), str(f or ""))
            for a, b, c, d, e, f in rows
        ]

    def history(self, run: MlflowRun) -> dict[str, Points]:
        out: dict[str, Points] = {}
        rows = self._query(
            "SELECT key, timestamp, step, value, is_nan FROM metrics WHERE run_uuid = ? "
            "ORDER BY key, timestamp, rowid",
            (run.run_id,),
        )
        for key, ts, step, value, is_nan in rows:
            where = f"{self.path}: run {run.run_id} metric {key!r}"
            number = float("nan") if is_nan else _number(where, value)
            out.setdefault(str(key), []).append((_int(ts), _step(where, step), number))
        return out


# --- the tracking server ------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str):
        raise urllib.error.HTTPError(req.full_url, code, f"redirected ({msg})", headers, fp)


class _RestStore(_Backend):
    def __init__(self, url: str) -> None:
        self.shown = masked_url(url)
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname:
            raise MetricsError(f"MLflow tracking URL {self.shown} names no host")
        netloc = parts.hostname + (f":{parts.port}" if parts.port is not None else "")
        self.base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.headers = {"Accept": "application/json", "Content-Type": "application/json"}
        user = urllib.parse.unquote(parts.username or "") or os.environ.get(
            "MLFLOW_TRACKING_USERNAME"
        )
        password = urllib.parse.unquote(parts.password or "") or os.environ.get(
            "MLFLOW_TRACKING_PASSWORD"
        )
        token = os.environ.get("MLFLOW_TRACKING_TOKEN")
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        elif user and password:
            pair = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {pair}"
        self.opener = urllib.request.build_opener(_NoRedirect)

    def _call(self, endpoint: str, *, query: dict[str, Any] | None = None, body: Any = None) -> Any:
        url = f"{self.base}/api/2.0/mlflow/{endpoint}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, headers=self.headers)
        where = f"MLflow tracking server {self.shown} ({endpoint})"
        try:
            with self.opener.open(request, timeout=TIMEOUT) as reply:
                raw = reply.read(MAX_REPLY + 1)
        except urllib.error.HTTPError as exc:
            raise self._http_error(where, exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InfraError(
                f"cannot reach the {where}: {reason}",
                hint="is the server running (mlflow server), and is the URL right?",
            ) from None
        if len(raw) > MAX_REPLY:
            raise MetricsError(f"{where}: reply larger than {MAX_REPLY >> 20} MiB")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise MetricsError(
                f"{where}: the reply is not JSON (is this an MLflow server?)"
            ) from None

    @staticmethod
    def _http_error(where: str, exc: urllib.error.HTTPError) -> Exception:
        code = exc.code
        try:
            detail = json.loads(exc.read(1 << 16).decode("utf-8", "replace")).get("message", "")
        except (ValueError, AttributeError, OSError):
            detail = ""
        text = f"{where}: HTTP {code}" + (f": {str(detail)[:200]}" if detail else "")
        if code >= 500:
            return InfraError(text)
        if code in (401, 403):
            return MetricsError(
                text,
                hint="set MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and "
                "MLFLOW_TRACKING_PASSWORD, as for MLflow's client",
            )
        if 300 <= code < 400:
            return MetricsError(text, hint="give the server's final URL (no redirect is followed)")
        return MetricsError(text)

    def _pages(self, endpoint: str, body: dict[str, Any], field: str) -> Iterator[dict[str, Any]]:
        token = None
        for _ in range(MAX_PAGES):
            reply = self._call(endpoint, body={**body, **({"page_token": token} if token else {})})
            items = reply.get(field, []) if isinstance(reply, dict) else None
            if not isinstance(items, list):
                raise MetricsError(
                    f"MLflow tracking server {self.shown}: {endpoint} reply has no {field} list"
                )
            yield from (i for i in items if isinstance(i, dict))
            token = reply.get("next_page_token")
            if not token:
                return
        raise MetricsError(
            f"MLflow tracking server {self.shown}: {endpoint} has over {MAX_PAGES} pages"
        )

    def _run(self, item: dict[str, Any], experiments: dict[str, str]) -> MlflowRun:
        info = item.get("info") if isinstance(item.get("info"), dict) else {}
        data = item.get("data") if isinstance(item.get("data"), dict) else {}
        metrics = data.get("metrics")
        listed = metrics if isinstance(metrics, list) else []
        keys = tuple(str(m["key"]) for m in listed if isinstance(m, dict) and "key" in m)
        exp_id = str(info.get("experiment_id", ""))
        return MlflowRun(
            str(info.get("run_id") or info.get("run_uuid") or ""),
            str(info.get("run_name", "")),
            exp_id,
            experiments.get(exp_id, exp_id),
            _int(info.get("start_time")),
            str(info.get("status", "")),
            keys,
        )

    def _experiments(self) -> dict[str, str]:
        body = {"max_results": 1000, "view_type": "ACTIVE_ONLY"}
        return {
            str(e.get("experiment_id")): str(e.get("name", ""))
            for e in self._pages("experiments/search", body, "experiments")
        }

    def runs(self) -> list[MlflowRun]:
        return self._search(self._experiments())

    def _search(self, experiments: dict[str, str]) -> list[MlflowRun]:
        if not experiments:
            return []
        body = {
            "experiment_ids": sorted(experiments),
            "max_results": 1000,
            "run_view_type": "ACTIVE_ONLY",
        }
        return [self._run(item, experiments) for item in self._pages("runs/search", body, "runs")]

    def runs_in(self, experiment: str) -> list[MlflowRun]:
        """Only that experiment's runs are listed (a shared server holds many)."""
        try:
            reply = self._call("experiments/get-by-name", query={"experiment_name": experiment})
        except MetricsError as exc:
            if "HTTP 404" in str(exc):
                return []
            raise
        found = reply.get("experiment") if isinstance(reply, dict) else None
        if not isinstance(found, dict) or found.get("lifecycle_stage", "active") != "active":
            return []
        return self._search({str(found.get("experiment_id")): experiment})

    def run_by_id(self, run_id: str) -> MlflowRun | None:
        try:
            reply = self._call("runs/get", query={"run_id": run_id})
        except MetricsError as exc:
            if "HTTP 404" in str(exc):
                return None
            raise
        item = reply.get("run") if isinstance(reply, dict) else None
        if not isinstance(item, dict):
            raise MetricsError(f"MLflow tracking server {self.shown}: runs/get reply has no run")
        return self._run(item, self._experiments())

    def history(self, run: MlflowRun) -> dict[str, Points]:
        out: dict[str, Points] = {}
        for key in run.keys:
            points: Points = []
            token = None
            for _ in range(MAX_PAGES):
                query = {"run_id": run.run_id, "metric_key": key, "max_results": 25000}
                reply = self._call(
                    "metrics/get-history", query=query | ({"page_token": token} if token else {})
                )
                where = f"MLflow tracking server {self.shown}: run {run.run_id} metric {key!r}"
                items = reply.get("metrics", []) if isinstance(reply, dict) else None
                if not isinstance(items, list):
                    raise MetricsError(f"{where}: get-history reply has no metrics list")
                for m in items:
                    if not isinstance(m, dict):
                        raise MetricsError(f"{where}: a point is not an object")
                    value = _number(where, m.get("value"))
                    points.append(
                        (_step(where, m.get("timestamp", 0)), _step(where, m.get("step", 0)), value)
                    )
                token = reply.get("next_page_token")
                if not token:
                    break
            else:
                raise MetricsError(
                    f"MLflow tracking server {self.shown}: metric {key!r} has over "
                    f"{MAX_PAGES} pages"
                )
            points.sort(key=lambda p: p[0])  # the server's order is by step; the log's is by time
            out[key] = points
        return out


# --- which run, and the record ---------------------------------------------------------------


def select_runs(backend: _Backend, selector: str | None) -> list[MlflowRun]:
    """The runs ``selector`` names (oldest first); see the module docstring."""
    if selector is not None and RUN_ID.fullmatch(selector):
        run = backend.run_by_id(selector)
        if run is None:
            raise MetricsError(f"no MLflow run {selector} in {backend.shown}", hint=_HINT)
        return [run]
    experiment, sep, name = (selector or "").rpartition("/")
    runs = backend.runs_in(experiment) if sep else backend.runs()
    if not runs:
        where = f"experiment {experiment!r} of {backend.shown}" if sep else backend.shown
        raise MetricsError(f"no active MLflow run in {where}", hint=_HINT)
    if selector is None:
        names = {(r.experiment, r.name) for r in runs}
        if len(names) > 1:
            listed = "; ".join(r.label() for r in sorted(runs, key=lambda r: r.start_time)[:8])
            more = f" and {len(runs) - 8} more" if len(runs) > 8 else ""
            raise MetricsError(
                f"{backend.shown} holds {len(runs)} MLflow runs ({listed}{more})", hint=_HINT
            )
        return sorted(runs, key=lambda r: (r.start_time, r.run_id))
    matches = [r for r in runs if r.name == name and (not sep or r.experiment == experiment)]
    if not matches:
        labels = sorted({f"{r.experiment}/{r.name}" for r in runs})
        close = difflib.get_close_matches(selector, labels, n=3, cutoff=0.5)
        hint = ("did you mean " + " or ".join(close) + "?") if close else _HINT
        raise MetricsError(f"no MLflow run named {selector!r} in {backend.shown}", hint=hint)
    if len({r.experiment for r in matches}) > 1:
        raise MetricsError(
            f"MLflow runs named {name!r} in several experiments of {backend.shown}",
            hint="name the experiment too: #<experiment>/<run name>",
        )
    return sorted(matches, key=lambda r: (r.start_time, r.run_id))


def _attempts(points: Points) -> list[Points]:
    """Split one metric's logged points where its step goes back (a resumed job)."""
    parts: list[Points] = [[]]
    for point in points:
        if parts[-1] and point[1] <= parts[-1][-1][1]:
            parts.append([])
        parts[-1].append(point)
    return parts


def load_mlflow(backend: _Backend, selector: str | None) -> RunMetrics:
    """The selected run(s) of ``backend`` as one record (jobs and attempts merged in order)."""
    runs = select_runs(backend, selector)
    histories = [backend.history(run) for run in runs]
    merger = Merger()
    labels: list[str] = []
    warnings: list[str] = []
    infinite = 0
    for run, history in zip(runs, histories, strict=True):
        split = {key: _attempts(points) for key, points in history.items()}
        count = max((len(parts) for parts in split.values()), default=1)
        first = len(labels)
        for attempt in range(count):
            label = f"run {run.name or run.run_id} ({run.run_id[:8]})"
            labels.append(label + (f" attempt {attempt + 1}" if count > 1 else ""))
            merger.source(labels[-1])
        for key, parts in split.items():
            for attempt, part in enumerate(parts):
                steps = np.fromiter((p[1] for p in part), np.int64, len(part))
                values = np.fromiter((p[2] for p in part), np.float64, len(part))
                big = np.abs(values) == _FLOAT_MAX
                if big.any():
                    infinite += int(big.sum())
                    values[big] = np.sign(values[big]) * math.inf
                merger.add(key, steps, values, first + attempt)
        if count > 1:
            warnings.append(
                f"MLflow run {run.label()}: steps logged again {count - 1} time(s) (a job "
                "resumed the run); each restart is an attempt, the latest judged"
            )
    series, conflicts, segments = merger.finish()
    if not series:
        raise no_scalars(Path(backend.shown), "the selected MLflow run(s)")
    if infinite:
        warnings.append(
            f"{infinite} value(s) stored as ±{_FLOAT_MAX!r} read as ±inf (MLflow's SQL stores "
            "keep infinities so)"
        )
    warnings.extend(summarise_conflicts(conflicts))
    log_warnings(warnings)
    metadata = {"mlflow_runs": tuple(r.run_id for r in runs), "status": runs[-1].status}
    return RunMetrics(
        source=backend.shown if isinstance(backend, _RestStore) else Path(backend.shown),
        kind=SourceKind.MLFLOW,
        series=MappingProxyType(series),
        files=tuple(Path(label) for label in labels),
        conflicts=tuple(conflicts),
        anomalies=tuple(merger.anomalies),
        warnings=tuple(warnings),
        metadata=MappingProxyType(metadata),
        segments=MappingProxyType(segments),
    )


def _is_mlruns(path: Path) -> bool:
    """An MLflow file store: ``<experiment_id>/meta.yaml`` in it (``0/``, ``.trash/``)."""
    if not path.is_dir():
        return False
    if (path / "0" / "meta.yaml").is_file() or (path / ".trash").is_dir():
        return True
    return any(
        (p / "meta.yaml").is_file() and p.name.isdigit() for p in path.iterdir() if p.is_dir()
    )


def _is_sqlite(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def _backend(source: RunSource) -> _Backend | None:
    """The store ``source`` names, or None when it is no MLflow store."""
    url = source.url
    if url is not None:
        scheme = url.split(":", 1)[0].lower()
        if scheme in ("http", "https"):
            return _RestStore(url)
        if scheme == "sqlite":
            rest = url[len("sqlite:///") :] if url.lower().startswith("sqlite:///") else None
            if rest is None or not rest:
                raise MetricsError(
                    f"{masked_url(url)}: expected sqlite:///<path> (sqlite:////abs/path)"
                )
            return _SqliteStore(Path(urllib.parse.unquote(rest)))
        if scheme == "file":
            path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
            return _FileStore(path) if _is_mlruns(path) else None
        return None
    path = source.path
    if path is None:
        return None
    if path.is_dir():
        if _is_mlruns(path):
            return _FileStore(path)
        if _is_mlruns(path / "mlruns"):
            return _FileStore(path / "mlruns")
        if _is_sqlite(path / "mlflow.db"):
            return _SqliteStore(path / "mlflow.db")
        return None
    if _is_sqlite(path):
        return _SqliteStore(path)
    return None


@register
class Mlflow(RunFormat):
    """An MLflow store (file, SQLite or a tracking server), with an optional ``#run``."""

    name = "mlflow"
    kind = SourceKind.MLFLOW
    order = 40
    shape = (
        "an MLflow store (mlruns/, mlflow.db or sqlite:///…, http://host:port; "
        "#<run_id> or #<experiment>/<run name> picks a run)"
    )

    def detect(self, source: RunSource) -> bool:
        """A store URL, an ``mlruns/`` dir, a dir holding one or ``mlflow.db``, a SQLite file."""
        if source.url is not None:
            return source.url.split(":", 1)[0].lower() in ("http", "https", "sqlite", "file")
        path = source.path
        if path is None:
            return False
        if path.is_dir():
            return _is_mlruns(path) or _is_mlruns(path / "mlruns") or _is_sqlite(path / "mlflow.db")
        return _is_sqlite(path)

    def read(self, source: RunSource) -> RunMetrics:
        """The selected run(s) of the store."""
        backend = _backend(source)
        if backend is None:
            raise MetricsError(f"{source.shown}: not an MLflow store", hint=_HINT)
        return load_mlflow(backend, source.fragment or None)
