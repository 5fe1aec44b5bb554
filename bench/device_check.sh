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
# The device machine may lack driftloop's lighter dependencies (pydantic, pandas, httpx...); it has
# torch, numpy, pyarrow, prometheus-client, nvidia-ml-py and pytest. Pack them here, on any machine
# with pip, as cp312 manylinux wheels into the ignored .whl/ folder, and carry it:
#
#   bash bench/device_check.sh --pack .whl        # here: pip download, versions of this venv
#   bash bench/device_check.sh --wheels .whl      # there: installs them offline into a temp folder
#
# Steps needing what is still missing (mlflow, evidently for the daemon's GPU test) show up as
# collection errors in the pytest step rather than being hidden. --dry-run writes the plan only.
set -u -o pipefail

usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    cat <<'EOF'
Usage: bash bench/device_check.sh [--out DIR] [--wheels DIR] [--budget SECONDS] [--python PY] [--dry-run]
       bash bench/device_check.sh --pack DIR [--python PY]
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
        --wheels) [ $# -ge 2 ] || die "--wheels needs a folder"; WHEELS="$2"; shift 2 ;;
        --pack) [ $# -ge 2 ] || die "--pack needs a folder"; PACK="$2"; shift 2 ;;
        --budget) [ $# -ge 2 ] || die "--budget needs seconds"; BUDGET="$2"; shift 2 ;;
        --python) [ $# -ge 2 ] || die "--python needs an interpreter"; PY="$2"; shift 2 ;;
        --dry-run) DRY=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
case "$BUDGET" in ''|*[!0-9]*) die "--budget must be whole seconds, got '$BUDGET'" ;; esac
[ "$BUDGET" -le 480 ] || die "--budget must stay within the 8 minutes a device run is sized for (480 s)"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT" || exit 2

# Distributions driftloop's GPU tests and benches import beyond the device machine's own set.
PACKED="pydantic pydantic_core annotated_types typing_inspection typing_extensions PyYAML click cloudpickle
pandas python_dateutil pytz tzdata six httpx httpcore h11 anyio sniffio idna certifi tqdm rich pygments
markdown_it_py mdurl"

if [ -n "$PACK" ]; then
    [ "$PY" != python3 ] || [ ! -x .venv/bin/python ] || PY=.venv/bin/python
    mkdir -p "$PACK" || die "cannot create $PACK"
    # Same versions as this environment, so the device runs what the tests here ran.
    specs=$("$PY" - "$PACKED" <<'EOF'
import sys
from importlib import metadata
out = []
for name in sys.argv[1].split():
    try:
        out.append(f"{name.replace('_', '-')}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        out.append(name.replace("_", "-"))
print(" ".join(out))
EOF
) || die "cannot read installed versions with $PY"
    # shellcheck disable=SC2086
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --implementation cp --python-version 3.12 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
        -d "$PACK" $specs || die "pip download failed"
    echo "packed $(ls "$PACK"/*.whl | wc -l) wheels into $PACK ($(du -sh "$PACK" | cut -f1)); carry it and pass --wheels $PACK"
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

# The steps: name, timeout in seconds, command. The timeouts sum to at most the budget.
STEP_NAMES=(wheels gpu_tests amp_large amp_small exporter_load)
STEP_TIMEOUTS=(40 170 140 60 55)
step_command() {
    case "$1" in
        wheels) echo "$PY -m pip install --no-index --no-deps --target \$SITE ${WHEELS:-DIR}/*.whl" ;;
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
    ls "$WHEELS"/*.whl > /dev/null 2>&1 || die "no wheels in $WHEELS (pack them with --pack $WHEELS)"
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
