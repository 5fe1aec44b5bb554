#!/usr/bin/env bash
# Every GPU claim re-checked in one run on a machine with an NVIDIA GPU, in under 8 minutes:
#
#   1. the `gpu`-marked tests (pytest -m gpu over the files that have them);
#   2. the AMP bench, fit / bare for fp32, TF32, bf16, fp16 (bench/bench_trainer.py --only amp --cuda),
#      at MLP 4096x3 and at the small tabular size (256,128);
#   3. the exporter under load (bench/bench_exporter.py --nvml --load --quick --gpus 1): scrape cost
#      against nvidia-smi, and sm_active / tensor_active / utilization / energy as served.
#
# Each step has its own timeout, and a step that no longer fits in --budget is skipped (and says so).
# Everything measured goes to ONE file, DIR/device_check.md (DIR: --out, else $OUT, else .device-out),
# with the machine, versions, each step's exit status, time and output; full logs beside it in
# DIR/device_check_logs/. Exit status 0 only when every step ran and passed.
#
# The device machine has python3 3.12 with torch, numpy, pyarrow, prometheus-client, nvidia-ml-py and
# pytest, and no network. --pack resolves, here, the closure of driftloop's runtime dependencies (from
# pyproject.toml, at the versions installed in this venv) for CPython 3.12 manylinux x86_64, less what
# the device has, unpacks the wheels into one site folder, trims what is not needed at run time and
# writes it as one .tar.xz (57 MiB: with the working tree it must stay under the 64 MiB a run carries):
#
#   bash bench/device_check.sh --pack .whl/pack.tar.xz     # here (pip, network; a few minutes)
#   bash bench/device_check.sh --wheels .whl/pack.tar.xz   # there: unpacked into a temp folder on PYTHONPATH
#
# --pack DIR (no .tar.xz) downloads the same wheels into DIR instead, and --wheels DIR installs them
# offline (pip --target): 180 MiB, for a machine reached without that limit. --dry-run writes
# the plan only.
set -u -o pipefail

usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    cat <<'EOF'
Usage: bash bench/device_check.sh [--out DIR] [--wheels PACK.tar.xz|DIR] [--budget SECONDS] [--python PY] [--dry-run]
       bash bench/device_check.sh --pack PACK.tar.xz|DIR [--python PY]
EOF
}

die() { echo "Error: $*" >&2; exit 2; }

OUT_DIR="${OUT:-.device-out}"
WHEELS=""
PACK=""
DRY=0
BUDGET=470
PY="${PYTHON:-python3}"
while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || die "--out needs a folder"; OUT_DIR="$2"; shift 2 ;;
        --wheels) [ $# -ge 2 ] || die "--wheels needs a .tar.xz from --pack or a folder of wheels"; WHEELS="$2"; shift 2 ;;
        --pack) [ $# -ge 2 ] || die "--pack needs a .tar.xz to write or a folder"; PACK="$2"; shift 2 ;;
        --budget) [ $# -ge 2 ] || die "--budget needs seconds"; BUDGET="$2"; shift 2 ;;
        --python) [ $# -ge 2 ] || die "--python needs an interpreter"; PY="$2"; shift 2 ;;
        --dry-run) DRY=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
case "$BUDGET" in ''|*[!0-9]*) die "--budget must be whole seconds, got '$BUDGET'" ;; esac
[ "$BUDGET" -le 480 ] || die "--budget must stay within the 8 minutes a device run is sized for (480 s)"
[ -z "$PACK" ] || [ -z "$WHEELS" ] || die "--pack (here) and --wheels (on the device) go in separate runs"
# --wheels: an archive from --pack, or a folder of .whl files.
WHEELS_KIND=""
if [ -n "$WHEELS" ]; then
    case "$WHEELS" in
        *.tar.xz|*.txz) WHEELS_KIND=archive ;;
        *) WHEELS_KIND=folder ;;
    esac
    if [ "$DRY" = 0 ]; then
        if [ "$WHEELS_KIND" = archive ]; then
            [ -f "$WHEELS" ] || die "no archive $WHEELS (write it with --pack $WHEELS)"
        else
            [ -d "$WHEELS" ] || die "--wheels takes a .tar.xz from --pack or a folder of wheels; $WHEELS is neither"
            ls "$WHEELS"/*.whl > /dev/null 2>&1 || die "no wheels in $WHEELS (pack them with --pack $WHEELS)"
        fi
    fi
fi

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
case "$WHEELS" in ''|/*) ;; *) WHEELS="$PWD/$WHEELS" ;; esac
case "$PACK" in ''|/*) ;; *) PACK="$PWD/$PACK" ;; esac
cd "$ROOT" || exit 2

# What the device machine has: its own set, and what torch (CUDA build) and pytest pull in there. --pack
# leaves these out, so the device's builds are the ones imported.
DEVICE_HAS="torch numpy pyarrow prometheus-client nvidia-ml-py pytest triton filelock typing-extensions sympy mpmath
networkx jinja2 markupsafe fsspec setuptools iniconfig packaging pluggy pygments"   # and nvidia-*, cuda-*
# Also left out: what the closure declares but nothing on this run's path imports (checked with grep over
# the packed code and driftloop; the pack here imports every module of monitor, trainer and examples):
#   matplotlib and its own dependencies: mlflow declares it for its plots (models.evaluation);
#   statsmodels, patsy, formulaic (+ interface-meta, wrapt): evidently declares statsmodels and never
#     imports it (mlflow's statsmodels flavour and plotly's trendlines do);
#   faker, polyfactory: litestar's OpenAPI examples and evidently's UI demo data (and faker's pytest
#     plugin would load into the device's pytest);
#   MLflow's server, gateway and image side, which driftloop's local sqlite store never starts: flask
#     (+ werkzeug, flask-cors, itsdangerous, blinker), gunicorn, graphene (+ graphql-core, graphql-relay),
#     huey, docker, aiohttp (+ aiohappyeyeballs, aiosignal, frozenlist, propcache, yarl), and skops
#     (+ prettytable, wcwidth: mlflow.sklearn's skops format).
# Without them the pack fits the 64 MiB a device run carries, with the working tree.
NOT_ON_PATH="matplotlib contourpy cycler fonttools kiwisolver pyparsing statsmodels patsy formulaic interface-meta
wrapt faker polyfactory flask werkzeug flask-cors itsdangerous blinker gunicorn graphene graphql-core graphql-relay
huey docker aiohttp aiohappyeyeballs aiosignal frozenlist propcache yarl skops prettytable wcwidth"
# Distributions the gpu-marked tests import beyond driftloop's runtime dependencies: none (their conftests
# and helpers use httpx, PyYAML, pandas, uvicorn, mlflow: runtime dependencies; no pytest plugin).
GPU_TEST_EXTRAS=""
PLATFORMS=(--only-binary=:all: --implementation cp --python-version 3.12 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64)

# The interpreter whose pip resolves the closure: a CPython 3.12 when there is one (PACK_PYTHON, python3.12,
# pyenv's), since pip evaluates environment markers (python_version < "3.12") for the interpreter it runs
# on, whatever --python-version says.
resolver_python() {
    local c
    for c in "${PACK_PYTHON:-}" python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12; do
        if [ -n "$c" ] && command -v "$c" > /dev/null 2>&1 && "$c" -m pip --version > /dev/null 2>&1; then
            echo "$c"; return
        fi
    done
    echo "$PY"
}

# pip's notes about local file indexes that lack a package (this kind of machine has some) stay out.
quiet_pip() { "$@" 2> >(grep -v -e 'is ignored: it is neither a file nor a directory' -e "Running pip as the 'root'" >&2); }

if [ -n "$PACK" ]; then
    [ "$PY" != python3 ] || [ ! -x .venv/bin/python ] || PY=.venv/bin/python
    case "$PACK" in *.tar.xz|*.txz) ARCHIVE=1 ;; *) ARCHIVE=0 ;; esac
    RPY="$(resolver_python)"
    "$RPY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2> /dev/null \
        || echo "warning: no CPython 3.12 with pip here (set PACK_PYTHON); $RPY's version decides environment markers" >&2
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/driftloop-pack.XXXXXX")" || die "cannot create a temporary folder"
    trap 'rm -rf "$WORK"' EXIT
    # 1. Requirements: driftloop's runtime dependencies from pyproject.toml (+ GPU_TEST_EXTRAS), less what the
    #    device has; constraints: every distribution at the version installed in $PY's environment.
    "$PY" - "$WORK" "$DEVICE_HAS" "$GPU_TEST_EXTRAS" <<'PYEOF' || die "cannot read pyproject.toml or the versions installed for $PY"
import re, sys, tomllib
from importlib import metadata
work, device, extras = sys.argv[1], set(sys.argv[2].split()), sys.argv[3].split()
canon = lambda name: re.sub(r"[-_.]+", "-", name).lower()
on_device = lambda name: canon(name) in device or canon(name).startswith(("nvidia-", "cuda-"))
with open("pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"] + extras
reqs = [d for d in deps if not on_device(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", d).group())]
pins = sorted({f"{canon(d.metadata['Name'])}=={d.version}" for d in metadata.distributions()
               if d.metadata["Name"] and not on_device(d.metadata["Name"])
               and canon(d.metadata["Name"]) != "driftloop" and "+" not in d.version})
open(f"{work}/requirements.txt", "w").write("\n".join(reqs) + "\n")
open(f"{work}/constraints.txt", "w").write("\n".join(pins) + "\n")
PYEOF
    if [ "$DRY" = 1 ]; then  # the plan only: what would be resolved, pinned and left out (no network)
        echo "requirements (pyproject.toml's dependencies less the device's, resolved by $RPY for CPython 3.12):"
        sed 's/^/  /' "$WORK/requirements.txt"
        echo "pinned: $(grep -c . "$WORK/constraints.txt") distributions at the versions $PY has, e.g." \
             "$(grep -E '^(pandas|mlflow|evidently)==' "$WORK/constraints.txt" | tr '\n' ' ')"
        echo "left out, on the device: $(echo $DEVICE_HAS) nvidia-* cuda-*"
        echo "left out, not imported on this run's path: $(echo $NOT_ON_PATH)"
        exit 0
    fi
    # 2. Resolve the closure for CPython 3.12 manylinux x86_64 (metadata only, nothing installed); keep what
    #    the device lacks and this run imports.
    quiet_pip "$RPY" -m pip install --quiet --dry-run --ignore-installed --report "$WORK/report.json" \
        --target "$WORK/none" "${PLATFORMS[@]}" -r "$WORK/requirements.txt" -c "$WORK/constraints.txt" \
        || die "pip could not resolve driftloop's dependencies for CPython 3.12"
    "$PY" - "$WORK" "$DEVICE_HAS $NOT_ON_PATH" <<'PYEOF' || die "cannot read pip's report"
import json, re, sys
work, left_out = sys.argv[1], set(sys.argv[2].split())
canon = lambda name: re.sub(r"[-_.]+", "-", name).lower()
report = json.load(open(f"{work}/report.json"))["install"]
keep = sorted(f"{i['metadata']['name']}=={i['metadata']['version']}" for i in report
              if canon(i["metadata"]["name"]) not in left_out and not canon(i["metadata"]["name"]).startswith(("nvidia-", "cuda-")))
open(f"{work}/pack.txt", "w").write("\n".join(keep) + "\n")
PYEOF
    WHL="$WORK/wheels"
    [ "$ARCHIVE" = 1 ] || WHL="$PACK"
    mkdir -p "$WHL" || die "cannot create $WHL"
    # 3. Download exactly those wheels (pip's cache makes a second pack quick).
    quiet_pip "$RPY" -m pip download --quiet --no-deps "${PLATFORMS[@]}" -d "$WHL" -r "$WORK/pack.txt" \
        || die "pip download failed"
    if [ "$ARCHIVE" = 0 ]; then
        echo "packed $(ls "$WHL"/*.whl | wc -l) wheels into $WHL ($(du -sh "$WHL" | cut -f1)); carry it and pass --wheels $WHL"
        exit 0
    fi
    # 4. One site folder: the wheels unpacked, trimmed of what is not needed at run time.
    SITE_DIR="$WORK/site"
    "$PY" - "$WHL" "$SITE_DIR" "$RPY" <<'PYEOF' || die "cannot unpack the wheels"
import os, shutil, struct, subprocess, sys, zipfile
from pathlib import Path
wheels, site, rpy = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
site.mkdir()
# Merged as pip installs them (a namespace package such as google/ or opentelemetry/ spans several
# wheels); a wheel's .data/purelib and platlib go to the top, its scripts, headers and data (Jupyter
# extensions) are left out.
for whl in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if info.is_dir():
                continue
            if parts[0].endswith(".data"):
                if parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            dest = site.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            if (info.external_attr >> 16) & 0o111:
                dest.chmod(0o755)
unpacked = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
drop = [site / "mlflow/server/js",                                   # MLflow's web UI (build and assets)
        site / "evidently/ui/service/assets", site / "evidently/legacy/ui/assets",  # Evidently's UI service
        site / "jupyterlab_plotly", site / "plotly/package_data/plotly.min.js",  # plotly's Jupyter/HTML JS
        site / "onnx/backend/test/data",                            # ONNX backend conformance data
        *(site / "onnxruntime/capi").glob("libonnxruntime.so*"),    # C API library; the Python binding is whole
        *(site / "PIL").glob("_avif.*"), *(site / "pillow.libs").glob("libavif-*")]  # AVIF codec (optional)
drop += site.rglob("__pycache__")
drop += site.rglob("*.ipynb")                                       # example notebooks
drop += site.glob("*.dist-info/RECORD")                             # pip's uninstall list
# Sources, headers and stubs: for building against a package or type-checking it.
for pattern in ("*.c", "*.cc", "*.cpp", "*.h", "*.hpp", "*.pyx", "*.pxd", "*.pxi", "*.pyi"):
    drop += site.rglob(pattern)
# Packages' own test suites (nothing outside them imports them; evidently's tests/ is an API, kept).
for pkg in ("pandas", "scipy", "sklearn", "plotly", "nltk", "sqlalchemy", "pydantic", "skops", "PIL", "onnx"):
    drop += [p for p in (site / pkg).rglob("tests") if p.is_dir()]
for p in drop:
    if p.exists():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
# Symbol tables and debug information out of native libraries. strip can break a library auditwheel has
# patched (scipy's openblas: "ELF load command address/offset not page-aligned"), so a stripped file is
# kept only if its load segments stay page-congruent and it still loads (ctypes, in a fresh CPython 3.12);
# without a CPython 3.12 here nothing is stripped.
def segments_ok(path: Path, page: int = 4096) -> bool:
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for i in range(phnum):
        kind, _, offset, vaddr, _, _, _, align = struct.unpack_from("<IIQQQQQQ", table, i * phentsize)
        if kind == 1 and ((vaddr - offset) % page or align % page or (vaddr - offset) % max(align, 1)):
            return False
    return True


def loads(path: Path) -> bool:  # (its own folder on the library path: a grafted lib may have no RPATH)
    return subprocess.run([rpy, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(path)], capture_output=True,
                          env={**os.environ, "LD_LIBRARY_PATH": str(path.parent)}).returncode == 0


is_312 = subprocess.run([rpy, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 12))"],
                        capture_output=True).returncode == 0
if is_312 and shutil.which("strip"):
    stripped = []
    for f in sorted([*site.rglob("*.so"), *site.rglob("*.so.*")]):
        backup = f.with_name(f.name + ".unstripped")
        f.rename(backup)
        if (subprocess.run(["strip", "--strip-unneeded", "-o", str(f), str(backup)], capture_output=True).returncode == 0
                and segments_ok(f) and f.stat().st_size < backup.stat().st_size):
            f.chmod(backup.stat().st_mode)
            stripped.append(f)
        else:
            backup.replace(f)
    reverted = [f for f in stripped if not loads(f)]
    for f in stripped:
        backup = f.with_name(f.name + ".unstripped")
        backup.replace(f) if f in reverted else backup.unlink()
    print(f"stripped {len(stripped) - len(reverted)} native libraries ({len(reverted)} kept whole: they would not load)")
else:
    print("no CPython 3.12 here: native libraries left unstripped")
size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
print(f"unpacked {unpacked / 2**20:.0f} MiB, trimmed to {size / 2**20:.0f} MiB")
PYEOF
    cp "$WORK/pack.txt" "$SITE_DIR/DRIFTLOOP_PACK.txt"
    mkdir -p "$(dirname "$PACK")" || die "cannot create the folder of $PACK"
    # xz with the x86 filter: native code is two thirds of the pack, and the filter costs text nothing.
    # One block with a 256 MiB window, so one thread: 2 % smaller than xz -T0 -9's blocks, which the 64 MiB
    # needs; about 4 minutes and 3 GiB of memory here, 256 MiB to unpack there.
    XZ_OPT="${XZ_OPT:--T1 --x86 --lzma2=preset=9e,dict=256MiB}" tar -cJf "$PACK" --sort=name --owner=0 --group=0 \
        --numeric-owner -C "$SITE_DIR" . || die "cannot write $PACK"
    echo "packed $(ls -d "$SITE_DIR"/*.dist-info | wc -l) distributions into $PACK:" \
         "$(($(stat -c %s "$PACK") / 1048576)) MiB ($(du -sm "$SITE_DIR" | cut -f1) MiB unpacked); carry it, pass --wheels $PACK"
    # A device run carries the working tree and the carried paths, 64 MiB in all.
    tree=$(git ls-files -z | xargs -0 stat -c %s 2> /dev/null | awk '{s += $1} END {print s + 0}')
    [ $(($(stat -c %s "$PACK") + tree)) -le $((64 * 1048576)) ] \
        || echo "warning: with the working tree ($((tree / 1048576)) MiB) this is over the 64 MiB a device run carries" >&2
    exit 0
fi

mkdir -p "$OUT_DIR/device_check_logs" || die "cannot create $OUT_DIR"
FIG="$OUT_DIR/device_check.md"
LOGS="$OUT_DIR/device_check_logs"
START=$(date +%s)
FAILED=0
SUMMARY=""

gpu_test_files() {
    grep -rlE --include='test_*.py' 'pytest\.mark\.gpu|mark\.gpu\b' tests | sort
}

# tests/conftest.py needs driftloop's config (pydantic, PyYAML): without them only the files written to
# run with --noconftest (they say so) can run, and the figures file says which were left out.
gpu_tests() {
    if [ "$DRY" = 1 ] || "$PY" -c "import pydantic, yaml" > /dev/null 2>&1; then
        gpu_test_files | tr '\n' ' '
    else
        echo "--noconftest $(grep -l -- '--noconftest' $(gpu_test_files) | tr '\n' ' ')"
    fi
}

# The wheels step: an archive from --pack unpacked (xz's tar, else Python's tarfile), or a folder of wheels
# installed offline; into $SITE, which then leads PYTHONPATH.
wheels_command() {
    if [ "$WHEELS_KIND" = folder ]; then
        echo "$PY -m pip install --quiet --no-index --no-deps --no-compile --target \$SITE $WHEELS/*.whl"
    elif command -v xz > /dev/null 2>&1; then
        echo "tar -xJf ${WHEELS:-.whl/pack.tar.xz} -C \$SITE && echo unpacked \$(grep -c . \$SITE/DRIFTLOOP_PACK.txt) distributions into \$SITE: \$(tr '\\n' ' ' < \$SITE/DRIFTLOOP_PACK.txt)"
    else
        echo "$PY -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter=\"data\")' ${WHEELS:-.whl/pack.tar.xz} \$SITE && echo unpacked \$(grep -c . \$SITE/DRIFTLOOP_PACK.txt) distributions into \$SITE: \$(tr '\\n' ' ' < \$SITE/DRIFTLOOP_PACK.txt)"
    fi
}

# The steps: name, timeout in seconds, command. The timeouts sum to at most the budget.
STEP_NAMES=(wheels gpu_tests amp_large amp_small exporter_load)
STEP_TIMEOUTS=(40 170 140 60 55)
step_command() {
    case "$1" in
        wheels) wheels_command ;;
        gpu_tests) echo "$PY -m pytest -m gpu -q -rfEsP -p no:cacheprovider --continue-on-collection-errors $(gpu_tests)" ;;
        amp_large) echo "$PY bench/bench_trainer.py --only amp --cuda" ;;
        amp_small) echo "$PY bench/bench_trainer.py --only amp --cuda --hidden 256,128" ;;
        exporter_load) echo "$PY bench/bench_exporter.py --nvml --load --quick --gpus 1" ;;
    esac
}

{
    echo "# driftloop device check"
    echo
    echo "- started: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- budget: ${BUDGET} s; mode: $([ $DRY = 1 ] && echo 'dry run (plan only)' || echo run)"
} > "$FIG"

if [ "$DRY" = 1 ]; then
    {
        echo
        echo "| step | timeout s | command |"
        echo "|---|---|---|"
        total=0
        for i in "${!STEP_NAMES[@]}"; do
            echo "| ${STEP_NAMES[$i]} | ${STEP_TIMEOUTS[$i]} | \`$(step_command "${STEP_NAMES[$i]}")\` |"
            total=$((total + STEP_TIMEOUTS[i]))
        done
        echo
        echo "timeouts total: ${total} s"
    } >> "$FIG"
    cat "$FIG"
    exit 0
fi

{
    echo
    echo "## Machine"
    echo '```'
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit --format=csv 2>&1 | head -20
    "$PY" - <<'EOF' 2>&1
import importlib, platform
print("python", platform.python_version())
for name in ("torch", "numpy", "pandas", "pyarrow", "pynvml", "prometheus_client", "pydantic", "httpx", "yaml",
             "fastapi", "mlflow", "evidently", "pytest"):
    try:
        m = importlib.import_module(name)
        print(f"{name} {getattr(m, '__version__', 'present')}")
    except Exception as exc:
        print(f"{name} MISSING ({type(exc).__name__})")
try:
    import torch
    print("cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception:
    pass
EOF
    echo '```'
} >> "$FIG"

# run_step NAME TIMEOUT: runs step_command NAME under timeout, records rc, time and output.
run_step() {
    local name="$1" limit="$2" cmd log rc began took left
    left=$((BUDGET - ($(date +%s) - START)))
    cmd="$(step_command "$name")"
    if [ "$limit" -gt "$left" ]; then
        SUMMARY+="| $name | skipped | 0 | only ${left} s of the budget left |"$'\n'
        printf '\n## %s: skipped (%s s of the budget left, needs %s)\n' "$name" "$left" "$limit" >> "$FIG"
        FAILED=1
        return
    fi
    log="$LOGS/$name.log"
    began=$(date +%s)
    # shellcheck disable=SC2086
    timeout --kill-after=5 "$limit" bash -c "$cmd" > "$log" 2>&1
    rc=$?
    took=$(($(date +%s) - began))
    local status=passed
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="timed out after ${limit} s"; FAILED=1
    elif [ $rc -ne 0 ]; then status="failed (exit $rc)"; FAILED=1
    elif [ "$name" = gpu_tests ] && ! grep -qE '[0-9]+ passed' "$log"; then
        status="no test ran (all skipped: is the GPU visible?)"; FAILED=1
    fi
    SUMMARY+="| $name | $status | $took | \`$cmd\` |"$'\n'
    {
        printf '\n## %s: %s, %s s\n\n' "$name" "$status" "$took"
        echo "\`$cmd\`"
        echo
        echo '```'
        if [ "$name" = gpu_tests ]; then
            grep -E '^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)|passed|failed|error|^(utilization|idle|bf16|fp16) ' "$log" | tail -60
        else
            tail -80 "$log"
        fi
        echo '```'
    } >> "$FIG"
}

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "$WHEELS" ]; then
    SITE="$(mktemp -d "${TMPDIR:-/tmp}/driftloop-site.XXXXXX")"
    export SITE
    run_step wheels "${STEP_TIMEOUTS[0]}"
    export PYTHONPATH="$SITE:$PYTHONPATH"
fi
for i in 1 2 3 4; do
    run_step "${STEP_NAMES[$i]}" "${STEP_TIMEOUTS[$i]}"
done

{
    printf '\n## Summary (%s s in all)\n\n' "$(($(date +%s) - START))"
    echo "| step | status | seconds | command or reason |"
    echo "|---|---|---|---|"
    printf '%s' "$SUMMARY"
} >> "$FIG"
echo "device check: $([ $FAILED = 0 ] && echo 'all steps passed' || echo 'some steps failed or were skipped'); figures in $FIG"
exit $FAILED
