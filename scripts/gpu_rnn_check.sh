#!/usr/bin/env bash
# The RNN kernels' GPU check, as one short run: the recurrence tests compiled for the
# GPU (the fused Pallas kernels through Triton, not interpreted), then the throughput
# benchmark with both kernels at n = 95, T = 1000, batch 128 and 1024, each row against
# the same run's matmul limit, all in full float32 (the fused kernels' precision).
# Prints everything; copies the logs to $OUT if it is set.
#
#   bash scripts/gpu_rnn_check.sh            # after `pip install -e '.[test]'` and a
#                                            # CUDA jaxlib (pip install 'jax[cuda12]')
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS="${OUT:-$(mktemp -d)}"
python - <<'PY' 2>&1 | tee "$LOGS/devices.txt"
import jax; print(jax.__version__, jax.default_backend(), jax.devices())
PY
python -m pytest tests/fused_recurrence_test.py tests/recurrence_test.py -p no:xdist \
    -o addopts="" -q 2>&1 | tee "$LOGS/tests.txt"
python scripts/bench_rnn_throughput.py --sizes=95 --batches=128,1024 --lengths=1000 \
    --models=gurnn_tanh,gurnn_modrelu,lstm --kernels=scan,pallas --rounds=2 \
    --min_seconds=4 --matmul_size=8192 --precision=highest 2>&1 | tee "$LOGS/throughput.txt"
echo "logs: $LOGS"
