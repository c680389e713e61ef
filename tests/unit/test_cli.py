from rlgate.cli import main


class TestVersionsCommand:
    def test_versions_prints_the_tested_stack(self, capsys):
        assert main(["versions"]) == 0
        out = capsys.readouterr().out
        for name in ("python=", "vllm=", "transformers=", "nemo-gym="):
            assert name in out
