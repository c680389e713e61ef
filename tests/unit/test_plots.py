"""Release-report figures: what is drawn, what is refused, and the DEMO watermark."""

import io
import json

import pytest
from PIL import Image

from rlgate.report.inputs import load_run_doc, load_swe_doc
from rlgate.report.plots import render_all, value_bounds, wilson_interval
from rlgate.runs.metrics import load_run
from rlgate.testing.corpus import Fault

from .helpers import report_inputs as ri
from .helpers.corpus_build import corpus


def _full(demo=False):
    c = corpus()
    return render_all(
        run=load_run(c.runs[Fault.HEALTHY]),
        baseline=load_run(c.baseline),
        band_runs=[load_run(p) for p in c.band_runs],
        checks=load_run_doc(ri.check_run(Fault.HEALTHY)[0]).checks,
        swe=load_swe_doc(ri.swe("improved")[0]),
        demo=demo,
    )


class TestRenderAll:
    def test_render_all_draws_every_figure_from_a_full_input_set(self):
        figures, notes = _full()
        assert [f.key for f in figures] == ["reward", "logprob", "agentic", "perf", "swe"]
        assert notes == []
        for fig in figures:
            image = Image.open(io.BytesIO(fig.png))
            assert image.format == "PNG" and image.width >= 500 and image.height >= 300
            assert fig.data_uri().startswith("data:image/png;base64,iVBOR")

    def test_demo_figures_are_titled_and_watermarked_demo(self):
        plain, _ = _full()
        demo, _ = _full(demo=True)
        assert all(f.title.startswith("DEMO — ") for f in demo)
        assert not any(f.title.startswith("DEMO") for f in plain)
        assert all(d.png != p.png for d, p in zip(demo, plain, strict=True))

    def test_a_run_without_the_tags_gets_notes_not_empty_figures(self, tmp_path):
        path = tmp_path / "metrics.json"
        path.write_text(json.dumps({"train/loss": {"1": 0.1, "2": 0.05}}))
        figures, notes = render_all(run=load_run(path))
        assert figures == []
        assert len(notes) == 5
        assert any("does not log train/reward" in n for n in notes)
        assert any("no --swe JSON" in n for n in notes)

    def test_no_run_is_a_note(self):
        figures, notes = render_all(run=None)
        assert figures == [] and any("no run" in n for n in notes)


class TestValueBounds:
    def test_value_bounds_draws_only_bounds_on_the_metric_scale(self):
        checks = load_run_doc(ri.check_run(Fault.HEALTHY)[0]).checks
        bounds = value_bounds(checks, "train/token_mult_prob_error")
        assert bounds == [
            ("logprob_error_median < 1.05", 1.05),
            ("logprob_error_last < 1.1", 1.1),
        ]  # not ratio_above's 0.1 (a fraction) nor the band's bound on the run mean


class TestWilsonInterval:
    @pytest.mark.parametrize(
        ("rate", "n", "low", "high"),
        [
            pytest.param(0.4, 500, 0.3579, 0.4437, id="verified_size"),
            pytest.param(0.0, 100, 0.0, 0.0370, id="zero_rate"),
        ],
    )
    def test_wilson_interval_matches_statsmodels(self, rate, n, low, high):
        from statsmodels.stats.proportion import proportion_confint

        lo, hi = wilson_interval(rate, n)
        ref = proportion_confint(round(rate * n), n, alpha=0.05, method="wilson")
        assert (lo, hi) == pytest.approx(ref, abs=1e-3)
        assert (lo, hi) == pytest.approx((low, high), abs=1e-3)

    @pytest.mark.parametrize(
        ("rate", "n"),
        [
            pytest.param(0.0, 100, id="none_resolved"),
            pytest.param(1.0, 100, id="all_resolved"),
            pytest.param(0.5, 1, id="one_instance"),
            pytest.param(1 / 3, 3, id="thirds"),
            pytest.param(0.123, 2_294, id="swe_bench_full"),
        ],
    )
    def test_wilson_interval_is_statsmodels_proportion_confint(self, rate, n):
        """statsmodels' own interval (z = norm.ppf(0.975), not a rounded 1.96), within [0, 1]."""
        from statsmodels.stats.proportion import proportion_confint

        ref = proportion_confint(rate * n, n, alpha=0.05, method="wilson")
        assert wilson_interval(rate, n) == (float(ref[0]), float(ref[1]))
        assert 0.0 <= wilson_interval(rate, n)[0] <= rate <= wilson_interval(rate, n)[1] <= 1.0
