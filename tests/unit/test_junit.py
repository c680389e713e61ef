import math

import pytest

from rlgate.junit import format_value


class TestFormatValue:
    @pytest.mark.parametrize(
        ("value", "text"),
        [
            pytest.param(1.0203040506, "1.0203", id="float_six_significant"),
            pytest.param(True, "true", id="bool_lowercase"),
            pytest.param(None, "none", id="none"),
            pytest.param(math.nan, "nan", id="nan_kept_visible"),
            pytest.param(3, "3", id="int"),
        ],
    )
    def test_format_value_is_fixed_precision(self, value, text):
        assert format_value(value) == text
