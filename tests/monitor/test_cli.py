import subprocess
import sys

from monitor.cli import COMMANDS, main


def test_every_command_has_help(capsys):
    for name in COMMANDS:
        assert main([name, "--help"]) == 0, name
        out = capsys.readouterr().out
        assert "Usage:" in out and name in out


def test_config_error_is_one_line_and_nonzero(tmp_path):
    env = {"DRIFTLOOP_SERVER__PORT": "not-a-port", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "monitor.cli", "status"], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.startswith("Error: invalid configuration")
    assert "server.port" in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["nope"]) == 2


def test_global_options_work_after_the_subcommand_too(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.yaml").write_text(f"home: {tmp_path / 'home'}\nmodel: {{name: after}}\n")
    from monitor.config import load_config
    from monitor.store import PredictionStore
    PredictionStore.from_config(load_config(tmp_path / "x.yaml", environ={})).close()  # status reads, never creates
    for argv in (["--config", "x.yaml", "status", "--json"], ["status", "--json", "--config", "x.yaml"],
                 ["status", "-c", "x.yaml", "--log-level", "info", "--json"]):
        assert main(argv) == 0, argv
        assert '"model": "after"' in capsys.readouterr().out
    assert main(["status", "--config", "missing.yaml"]) == 2
    assert capsys.readouterr().err.strip() == "Error: config file not found: missing.yaml"
    assert "--config" in (main(["serve", "--help"]), capsys.readouterr().out)[1]
