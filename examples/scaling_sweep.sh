#!/usr/bin/env bash
# The GPU runs of issues 13 and 15 in one batched command: a `capture --nproc` sweep of
# examples/ddp_train.py in sdpa and compiled modes, the same launch under `--backend nsys` at
# the largest count (one report of the whole torchrun process tree, checked rank by rank
# against `nsys stats`), then `traceforge scaling` and `traceforge report` on the results.
#
# Run from the repository root on nvidia-h200-x2 (counts 1,2) or nvidia-h200-x8 (1,2,4,8):
#
#   bash examples/scaling_sweep.sh            # counts from the visible GPUs
#   COUNTS=1,2 bash examples/scaling_sweep.sh
#
# Environment (all optional): OUT (where the results go; the device tool sets it), WORK
# (scratch, default /tmp/tf-sweep), COUNTS, BATCH (samples per GPU per step, default 32: at
# 12 layers x d=1024 x seq 512 one H200 is busy, not waiting on the profiled host), STEPS
# (optimizer steps per run, default 10), NSYS (the nsys executable; default $TRACEFORGE_NSYS,
# else nsys on PATH, else the one inside Nsight Compute), MODES (default sdpa,compiled).
# Expected device time: about 4-5 min on x2, 7-8 min on x8 (compiled mode compiles once per
# count; Inductor's cache makes the later counts faster).
#
# What comes back in $OUT (the tool returns at most 8 files):
#   log.txt                   everything printed
#   scaling_MODE.md           the scaling tables of each mode (also in the tarballs)
#   nsys_check.txt            one trace per rank, kernel totals vs nsys stats
#   sweep_MODE.tar.gz         the sweep folders (traces < 1 MB each, summaries, reports, charts)
#   nsys.tar.gz               the nsys run's summaries, stats CSVs and (if < 12 MB) the SQLite
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-/tmp/tf-sweep-out}
WORK=${WORK:-/tmp/tf-sweep}
STEPS=${STEPS:-10}
BATCH=${BATCH:-32}
MODES=${MODES:-sdpa,compiled}
mkdir -p "$OUT" "$WORK"
exec > >(tee "$OUT/log.txt") 2>&1

# NVLink multicast stays off on these shared hosts (see the device notes), for every process.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Wheels and libraries carried along (see docs/gpu-verification.md): msgspec/orjson, libdw.
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
if compgen -G ".nsys-debs/*.deb" >/dev/null; then
    for f in .nsys-debs/*.deb; do dpkg -x "$f" /tmp/dw; done
    export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

GPUS=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ -z "${COUNTS:-}" ]; then
    COUNTS=1; n=2
    while [ "$n" -le "$GPUS" ]; do COUNTS="$COUNTS,$n"; n=$((n * 2)); done
fi
MAX=${COUNTS##*,}
echo "== $GPUS GPU(s); counts $COUNTS; modes $MODES; batch $BATCH per GPU; $STEPS steps"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -n $((GPUS + 1))
python3 -c 'import torch; c = torch.cuda.is_available()
print("torch", torch.__version__, "nccl", torch.cuda.nccl.version() if c else None)'
T0=$SECONDS

# 1. The sweep: every count, every mode, one folder each ($WORK/sweep/MODE/nN).
python3 -m traceforge capture --nproc "$COUNTS" --mode "$MODES" --batch "$BATCH" \
    --format md -o "$WORK/sweep" -- \
    torchrun --standalone --nproc-per-node "$MAX" examples/ddp_train.py \
    --steps "$STEPS" --batch "$BATCH"
echo "== sweep done after $((SECONDS - T0)) s"

# 2. The largest count under nsys: one report of the launcher's process tree.
NSYS=${NSYS:-${TRACEFORGE_NSYS:-$(command -v nsys || true)}}
if [ -z "$NSYS" ]; then
    NSYS=$(ls /opt/nvidia/nsight-*/*/host/target-linux-x64/nsys 2>/dev/null | head -n 1)
fi
if [ -n "$NSYS" ]; then
    python3 -m traceforge capture --backend nsys --nsys "$NSYS" --mode sdpa -o "$WORK/nsys" \
        -- torchrun --standalone --nproc-per-node "$MAX" examples/ddp_train.py --steps 6 \
        --batch "$BATCH"
    SQL="$WORK/nsys/ddp_train.sdpa.sqlite"
    if [ -f "$SQL" ]; then
        "$NSYS" stats --report cuda_gpu_kern_sum --format csv "$SQL" > "$WORK/nsys/kern_sum.csv"
        "$NSYS" stats --report nvtx_sum --format csv "$SQL" > "$WORK/nsys/nvtx_sum.csv"
        python3 examples/check_nsys_ranks.py "$SQL" "$WORK/nsys/kern_sum.csv" --ranks "$MAX" \
            | tee "$OUT/nsys_check.txt"
        python3 -m traceforge top-kernels "$SQL" -n 10 | tee -a "$OUT/nsys_check.txt"
        python3 -m traceforge scaling "$SQL" --table runs | tee -a "$OUT/nsys_check.txt"
    else
        echo "nsys wrote no SQLite" | tee "$OUT/nsys_check.txt"
    fi
else
    echo "no nsys found: the nsys run was skipped" | tee "$OUT/nsys_check.txt"
fi
echo "== nsys done after $((SECONDS - T0)) s"

# 3. Scaling and report of each mode, on the machine.
for MODE in ${MODES//,/ }; do
    DIR="$WORK/sweep"
    [ "${MODES}" != "${MODES/,/}" ] && DIR="$WORK/sweep/$MODE"
    python3 -m traceforge scaling "$DIR" --batch "$BATCH" --format md \
        --report "$DIR/scaling.md" | tee "$OUT/scaling_$MODE.md"
    python3 -m traceforge scaling "$DIR" --batch "$BATCH" --format json > "$DIR/scaling.json"
    python3 -m traceforge report "$DIR/n$MAX"/*.pt.trace.json.gz \
        -o "$DIR/report_n$MAX.html" --title "ddp_train $MODE, $MAX GPUs"
    if [ "$MAX" != 1 ]; then  # one count: nothing to compare
        python3 -m traceforge compare "$DIR/n1" "$DIR/n$MAX" --labels "1gpu,${MAX}gpu" \
            --report "$DIR/compare.md" > /dev/null
    fi
    tar czf "$OUT/sweep_$MODE.tar.gz" -C "$DIR" .
done

# The nsys run: summaries and stats always; the SQLite only if small enough to bring back.
if [ -d "$WORK/nsys" ]; then
    FILES=$(cd "$WORK/nsys" && ls *.summary.json *.csv 2>/dev/null)
    SQL_GZ="$WORK/nsys/ddp_train.sdpa.sqlite.gz"
    if [ -f "$WORK/nsys/ddp_train.sdpa.sqlite" ]; then
        gzip -kf "$WORK/nsys/ddp_train.sdpa.sqlite"
        [ "$(stat -c %s "$SQL_GZ")" -lt 12000000 ] && FILES="$FILES ddp_train.sdpa.sqlite.gz"
    fi
    # shellcheck disable=SC2086
    tar czf "$OUT/nsys.tar.gz" -C "$WORK/nsys" $FILES
fi
ls -la "$OUT"
echo "== all done after $((SECONDS - T0)) s"
