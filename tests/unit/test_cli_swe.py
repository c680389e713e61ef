"""`rlgate swe compare|power|eval`: exit codes, written files, messages."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from junitparser import JUnitXml

from rlgate.cli.app import main
from rlgate.core.io import SCHEMA_VERSION
from rlgate.swe.records import VERIFIED_IDS_SHA256

from .helpers import swe_inputs as si

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
            ["swe", "eval", "--predictions", str(preds), "--harness-run-id", "rl_s0",
             "--dataset", str(si.DATASET), "--run-dir", str(tmp_path / "run")]
        )  # fmt: skip
        assert code == 3
        err = capsys.readouterr().err
        assert "no Docker daemon is reachable" in err and "--modal" in err
        assert not (tmp_path / "run").exists()

    def test_swe_eval_with_unreadable_predictions_is_a_usage_error(self, tmp_path, capsys):
        (tmp_path / "p.jsonl").write_text('{"instance_id": "x"\n')
        code = main(
            ["swe", "eval", "--predictions", str(tmp_path / "p.jsonl"), "--harness-run-id", "r"]
        )
        assert code == 2
        assert "not valid JSON" in capsys.readouterr().err


def _compare_on(tmp_path, dataset, ids, capsys):
    """Compare two per-instance maps on ``dataset``; return (code, stdout, JSON, suite props)."""
    before = tmp_path / "b.json"
    after = tmp_path / "a.json"
    before.write_text(json.dumps({i: {"resolved": k % 2 == 0} for k, i in enumerate(ids)}))
    after.write_text(json.dumps({i: {"resolved": k % 3 == 0} for k, i in enumerate(ids)}))
    code = main(
        ["swe", "compare", "--before", str(before), "--after", str(after),
         "--dataset", str(dataset), "--resamples", "200",
         "--json", str(tmp_path / "o.json"), "--junit", str(tmp_path / "o.xml")]
    )  # fmt: skip
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "o.json").read_text())
    suite = next(
        s for s in JUnitXml.fromfile(str(tmp_path / "o.xml")) if s.name == "rlgate.swe_gate"
    )
    props = {p.name: p.value for p in suite.properties()}
    return code, out, doc, props


class TestSweCompareNamesTheInstanceSet:
    def test_the_full_verified_set_is_named_by_its_id_hash(self, tmp_path, capsys):
        ids = [r["instance_id"] for r in si.verified_rows()]
        code, out, doc, props = _compare_on(tmp_path, si.DATASET, ids, capsys)
        assert code in (0, 1)
        assert (
            "instance set: SWE-bench Verified, all 500 instances (ids sha256 fad0fdea4fc2)" in out
        )
        assert doc["dataset"]["instance_set"] == "swe-bench-verified"
        assert props["rlgate.instance_set"] == "swe-bench-verified"
        assert props["rlgate.instance_set.ids_sha256"] == VERIFIED_IDS_SHA256

    def test_a_subset_of_verified_is_never_called_swe_bench_verified(self, tmp_path, capsys):
        ids = [r["instance_id"] for r in si.verified_rows()][::5]  # 100 of the 500
        dataset = si.write_subset_dataset(tmp_path / "subset.jsonl", ids)
        code, out, doc, props = _compare_on(tmp_path, dataset, ids, capsys)
        assert code in (0, 1)
        assert "instance set: a subset of Verified: 100 of its 500 instances, not the full " in out
        assert "SWE-bench Verified" not in out
        assert doc["dataset"]["instance_set"] == "verified-subset"
        assert props["rlgate.instance_set"] == "verified-subset"
        assert "SWE-bench Verified" not in props["rlgate.instance_set.text"]
        assert "SWE-bench Verified" not in (tmp_path / "o.xml").read_text()

    def test_a_hand_made_set_is_unknown(self, tmp_path, capsys):
        ids = [f"octo__repo-{k}" for k in range(40)]
        dataset = tmp_path / "own.json"
        dataset.write_text(json.dumps([{"instance_id": i, "repo": "octo/repo"} for i in ids]))
        code, out, doc, props = _compare_on(tmp_path, dataset, ids, capsys)
        assert code in (0, 1)
        assert "instance set: an unknown instance set of 40 instances, not a subset of " in out
        assert "SWE-bench Verified" not in out
        assert doc["dataset"]["instance_set"] == props["rlgate.instance_set"] == "unknown"


class TestSweJunitIsValidXml:
    def test_control_characters_and_surrogates_from_inputs_give_valid_xml(self, tmp_path, capsys):
        """Reasons and paths from inputs reach the JUnit; XML 1.0 cannot hold them raw."""
        import xml.etree.ElementTree as ET

        ids = ["octo__repo-1", "octo__repo-2"]
        dataset = tmp_path / "d.json"
        dataset.write_text(json.dumps([{"instance_id": i, "repo": "octo/repo"} for i in ids]))
        odd = tmp_path / "run\x1b[2J\x07.json"
        odd.write_text(
            '{"octo__repo-1": {"resolved": false, "infra_failure": true, '
            '"infra_failure_reason": "oom\\u0000\\udc80\\u001b[31m"}, '
            '"octo__repo-2": {"resolved": true}}'
        )
        code = main(
            ["swe", "compare", "--before", str(odd), "--after", str(odd), "--dataset",
             str(dataset), "--resamples", "100", "--junit", str(tmp_path / "o.xml")]
        )  # fmt: skip
        assert code == 3  # 1 of 2 instances is an infra fault: inconclusive
        root = ET.parse(tmp_path / "o.xml").getroot()  # raised "not well-formed" before
        text = ET.tostring(root, encoding="unicode")
        assert "\\x1b[2J\\x07.json" in text and "oom\\x00\\udc80\\x1b[31m" in text
        assert "\x1b" not in text and "\x00" not in text
        assert "SWE gate verdict: INCONCLUSIVE" in capsys.readouterr().out


def test_cli_bounds_equal_the_library_bounds():
    """_cli_swe keeps literal copies (no numpy/scipy import at CLI start-up); they must agree."""
    from rlgate.cli import swe as _cli_swe
    from rlgate.swe import compare as swe_compare
    from rlgate.swe import harness, stats
    from rlgate.swe import records as swebench

    assert (_cli_swe.MIN_RESAMPLES, _cli_swe.MAX_RESAMPLES, _cli_swe.MAX_SEED) == (
        swe_compare.MIN_RESAMPLES,
        swe_compare.MAX_RESAMPLES,
        swe_compare.MAX_SEED,
    )
    assert (_cli_swe.MAX_WORKERS, _cli_swe.MAX_TIMEOUT_S) == (
        harness.MAX_WORKERS,
        harness.MAX_TIMEOUT_S,
    )
    assert _cli_swe.MAX_POWER_N == stats.MAX_EXACT_N == swebench.MAX_INSTANCES
    assert _cli_swe.MAX_POWER_SEEDS == swebench.MAX_RUNS_PER_ARM
