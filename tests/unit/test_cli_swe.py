"""`rlgate swe compare|power|eval`: exit codes, written files, messages."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import swe_inputs as si
from junitparser import JUnitXml

from rlgate._io import SCHEMA_VERSION
from rlgate.cli import main

CLI_SEED = 11


def _power(tmp_path, *args):
    out = tmp_path / "power.json"
    assert main(["swe", "power", *args, "--json", str(out)]) == 0
    return json.loads(out.read_text())["rows"]


class TestSwePower:
    @pytest.mark.parametrize(
        ("n", "seeds", "expected"),
        [
            pytest.param("500", "1", 5.0, id="n500_one_seed_exact"),
            pytest.param("100", "1", 11.0, id="n100_one_seed_exact"),
            pytest.param("500", "4", 3.3, id="n500_four_seeds"),
        ],
    )
    def test_swe_power_prints_the_minimum_detectable_difference(
        self, tmp_path, capsys, n, seeds, expected
    ):
        (row,) = _power(tmp_path, "--n", n, "--discordance", "0.15", "--seeds", seeds)
        assert 100 * row["mde"] == pytest.approx(expected, abs=0.1)
        assert f"MDE = {expected:.1f} pp" in capsys.readouterr().out

    def test_swe_power_tabulates_every_combination(self, tmp_path):
        rows = _power(
            tmp_path, "--n", "100", "500", "--discordance", "0.1", "0.2", "--seeds", "1", "2"
        )
        assert len(rows) == 8
        assert {(r["n"], r["discordance"], r["seeds"]) for r in rows} == {
            (n, d, k) for n in (100, 500) for d in (0.1, 0.2) for k in (1, 2)
        }

    def test_swe_power_rejects_a_discordance_above_one(self, capsys):
        with pytest.raises(SystemExit) as info:
            main(["swe", "power", "--discordance", "1.5"])
        assert info.value.code == 2


@pytest.fixture(scope="module")
def maps(tmp_path_factory):
    """Per-instance mappings on the full universe: base, a clear gain, a clear drop."""
    root = tmp_path_factory.mktemp("cli")
    ids = [r["instance_id"] for r in si.verified_rows()]
    rng = np.random.default_rng(CLI_SEED)
    base = rng.random(500) < 0.4
    better = base | (rng.random(500) < 0.12)
    worse = base & (rng.random(500) > 0.2)
    out = {}
    for name, vec in (("base", base), ("better", better), ("worse", worse)):
        out[name] = root / f"{name}.json"
        out[name].write_text(
            json.dumps({i: {"resolved": bool(v)} for i, v in zip(ids, vec, strict=True)})
        )
    holes = json.loads(out["base"].read_text())
    for iid in ids[:100]:
        del holes[iid]  # 100 instances never evaluated
    out["holes"] = root / "holes.json"
    out["holes"].write_text(json.dumps(holes))
    return out


def _compare(maps, before, after, tmp_path, *extra):
    return main(
        [
            "swe", "compare", "--before", str(maps[before]), "--after", str(maps[after]),
            "--dataset", str(si.DATASET), "--resamples", "1000",
            "--json", str(tmp_path / "out.json"), "--junit", str(tmp_path / "out.xml"), *extra,
        ]
    )  # fmt: skip


class TestSweCompare:
    def test_swe_compare_improved_exits_zero_and_writes_json_and_junit(self, maps, tmp_path):
        assert _compare(maps, "base", "better", tmp_path) == 0
        doc = json.loads((tmp_path / "out.json").read_text())
        assert doc["schema_version"] == SCHEMA_VERSION
        assert doc["verdict"] == "improved" and doc["test"] == "exact_mcnemar"
        xml = JUnitXml.fromfile(str(tmp_path / "out.xml"))
        assert sum(s.tests for s in xml) == 5 + 500

    def test_swe_compare_regressed_exits_one(self, maps, tmp_path, capsys):
        assert _compare(maps, "base", "worse", tmp_path) == 1
        assert "SWE gate verdict: REGRESSED" in capsys.readouterr().out

    def test_swe_compare_inconclusive_exits_three_and_still_writes_json(self, maps, tmp_path):
        assert _compare(maps, "base", "holes", tmp_path) == 3
        doc = json.loads((tmp_path / "out.json").read_text())
        assert doc["verdict"] == "inconclusive"
        assert doc["after"]["missing"] == [100]
        assert any("infra error rate 20.0%" in r for r in doc["reasons"])

    def test_swe_compare_refuses_to_overwrite_an_input(self, maps, tmp_path, capsys):
        before = maps["base"].read_text()
        code = main(
            ["swe", "compare", "--before", str(maps["base"]), "--after", str(maps["better"]),
             "--dataset", str(si.DATASET), "--json", str(maps["base"])]
        )  # fmt: skip
        assert code == 2
        assert "one of the inputs" in capsys.readouterr().err
        assert maps["base"].read_text() == before

    def test_swe_compare_names_a_corrupt_input(self, maps, tmp_path, capsys):
        bad = tmp_path / "bad.json"
        bad.write_text(maps["better"].read_text()[:1000])
        assert main(["swe", "compare", "--before", str(maps["base"]), "--after", str(bad),
                     "--dataset", str(si.DATASET)]) == 2  # fmt: skip
        assert "bad.json: not valid JSON" in capsys.readouterr().err

    def test_swe_compare_without_the_hub_is_an_infra_error(self, maps, tmp_path):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        env.pop("RLGATE_SWE_DATASET", None)
        proc = subprocess.run(
            [sys.executable, "-m", "rlgate.cli", "swe", "compare", "--before", str(maps["base"]),
             "--after", str(maps["better"])],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 3, proc.stderr
        assert "cannot load dataset 'SWE-bench/SWE-bench_Verified'" in proc.stderr
        assert "--dataset PATH" in proc.stderr


class TestSweEval:
    def test_swe_eval_without_docker_exits_three_before_starting(
        self, tmp_path, monkeypatch, capsys
    ):
        monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/rlgate/docker.sock")
        preds = tmp_path / "preds.jsonl"
        preds.write_text(
            json.dumps(
                {
                    "instance_id": "django__django-11099",
                    "model_name_or_path": "m",
                    "model_patch": "x",
                }
            )
            + "\n"
        )
        code = main(
            ["swe", "eval", "--predictions", str(preds), "--run-id", "rl_s0",
             "--dataset", str(si.DATASET), "--run-dir", str(tmp_path / "run")]
        )  # fmt: skip
        assert code == 3
        err = capsys.readouterr().err
        assert "no Docker daemon is reachable" in err and "--modal" in err
        assert not (tmp_path / "run").exists()

    def test_swe_eval_with_unreadable_predictions_is_a_usage_error(self, tmp_path, capsys):
        (tmp_path / "p.jsonl").write_text('{"instance_id": "x"\n')
        code = main(["swe", "eval", "--predictions", str(tmp_path / "p.jsonl"), "--run-id", "r"])
        assert code == 2
        assert "not valid JSON" in capsys.readouterr().err
