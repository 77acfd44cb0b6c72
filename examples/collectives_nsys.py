"""Collectives under Nsight Systems, one report per rank: all-reduce float32 1 KiB-1 GiB
(5 calls a size, timed with CUDA events like examples/allreduce_sweep.py) and 3 calls each
of all-gather / reduce-scatter / broadcast / all-to-all of 64 KiB and 16 MiB in bfloat16
and float16. Writes calls_rank{R}.json: what was called (kind, dtype, nccl-tests size S)
in order, and the CUDA-event time of each all-reduce size.

    NSYS=nsys OUTD=out torchrun --nproc-per-node 2 --no-python bash -c \
      '$NSYS profile -t cuda,nvtx -s none --cpuctxsw=none -o $OUTD/nsys_rank$LOCAL_RANK \
       python examples/collectives_nsys.py $OUTD'
    nsys export --type sqlite --include-blobs=true -o nccl_rank0.sqlite out/nsys_rank0.nsys-rep

``--include-blobs=true`` is what puts NCCL's NVTX payloads (message sizes) in the export;
without it ``traceforge comm`` has the kinds and no sizes. Made
fixtures/nccl_nsys_h100x2 (trimmed by its trim.py;
tests/unit/analyzers/communication/test_comm_nsys.py).
"""

import json
import os
import sys

import torch
import torch.distributed as dist

out = sys.argv[1]
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(rank % torch.cuda.device_count())
calls, timing = [], {}
x = torch.ones(1 << 20, device="cuda")
for _ in range(5):
    dist.all_reduce(x)
torch.cuda.synchronize()
calls += [{"kind": "allreduce", "dtype": "float32", "S": 4 << 20, "phase": "warmup"}] * 5
iters = 5
for k in range(10, 31):
    s = 2**k
    t = torch.ones(s // 4, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize(); dist.barrier(); torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        dist.all_reduce(t)
    b.record(); torch.cuda.synchronize()
    timing[s] = a.elapsed_time(b) / iters
    calls += [{"kind": "allreduce", "dtype": "float32", "S": s}] * iters
    del t
torch.cuda.synchronize(); dist.barrier()
for total in (1 << 16, 1 << 24):
    for dt, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        es = torch.tensor([], dtype=dt).element_size()
        n_el = total // es
        full = torch.ones(n_el, device="cuda", dtype=dt)
        part = torch.ones(n_el // world, device="cuda", dtype=dt)
        for _ in range(3):
            dist.all_gather_into_tensor(full, part)
            calls.append({"kind": "allgather", "dtype": name, "S": total})
            dist.reduce_scatter_tensor(part, full)
            calls.append({"kind": "reducescatter", "dtype": name, "S": total})
            dist.broadcast(full, src=0)
            calls.append({"kind": "broadcast", "dtype": name, "S": total})
            o = torch.empty_like(full)
            dist.all_to_all_single(o, full)
            calls.append({"kind": "alltoall", "dtype": name, "S": total})
        torch.cuda.synchronize()
dist.barrier()
torch.cuda.synchronize()
with open(os.path.join(out, f"calls_rank{rank}.json"), "w") as f:
    json.dump({"world": world, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "nccl": ".".join(map(str, torch.cuda.nccl.version())),
               "timing_ms": timing, "calls": calls}, f, indent=0)
dist.destroy_process_group()
