#!/bin/bash
# The GPU run of issue 6 (2 GPUs, NCCL): the distributed scenario tests, then the DDP overhead
# benchmark with the synchronisation check and a torch.profiler comparison of CUDA runtime calls.
# Needs pytest carried as wheels in .whl/ (device README). Usage: bash benchmarks/runtime_ddp_gpu.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0], "gpus", torch.cuda.device_count())';
  echo "cpus $(nproc)"; git log -1 --format='loopcheck commit %H' 2>/dev/null; } > "$out/devices.txt" 2>&1
timeout 300 python3 -m pytest tests/runtime/test_distributed.py -q -rs -p no:cacheprovider --basetemp=/tmp/pt 2>&1 | tee "$out/tests.log"
timeout 400 torchrun --standalone --nproc_per_node=2 benchmarks/runtime_overhead_ddp.py --sync-check --trace 5 \
    --workloads gpt2:10,gpt2-mb4:16,mlp:40 --rounds 16 --out "$out/overhead" 2>&1 | grep -v '^W1\|USDT\|_warn_once\|UserWarning' | tee "$out/bench.log"
