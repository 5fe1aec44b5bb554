"""Measure ``driftloop-client``'s install: per extra, seconds to ``pip install`` the wheel into a fresh
virtual environment and the MB it adds there (site-packages and scripts, beyond an empty venv's).

    python scripts/measure_client.py                       # plain, [pandas], [onnx], [registry], [onnx,registry]
    python scripts/measure_client.py --extras pandas onnx

pip runs with ``--no-cache-dir``, so every package is fetched as a first install would fetch it (from
the package index or the mirrors pip is configured with: the seconds depend on that, the MB do not).
The figures in docs/parts/ingestion.md come from this script.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_client import build  # noqa: E402  (a sibling script, not a package)

VARIANTS = ("", "pandas", "onnx", "registry", "onnx,registry")


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


def measure(wheel: Path, extra: str, root: Path) -> tuple[float, float]:
    """Seconds and MB of one install of ``wheel[extra]`` into a fresh venv under ``root``."""
    env = root / (extra.replace(",", "-") or "plain")
    venv.EnvBuilder(with_pip=True).create(env)
    empty = size_mb(env)
    spec = f"{wheel}[{extra}]" if extra else str(wheel)
    start = time.perf_counter()
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--no-cache-dir",
                    "--disable-pip-version-check", "--prefer-binary", spec], check=True)
    return time.perf_counter() - start, size_mb(env) - empty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", nargs="*", default=list(VARIANTS), help="extras to measure ('' = none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build(Path(tmp) / "dist")
        print("| install | seconds | MB added |\n| --- | ---: | ---: |")
        for extra in args.extras:
            seconds, mb = measure(wheel, extra, Path(tmp))
            print(f"| driftloop-client{f'[{extra}]' if extra else ''} | {seconds:.0f} | {mb:.0f} |", flush=True)


if __name__ == "__main__":
    main()
