"""All-reduce sweep, 1 KiB to 1 GiB, on every GPU of one host: busbw timed with CUDA events
(unprofiled, as nccl-tests reports it) and a Kineto trace per rank of the same calls.

    torchrun --nproc-per-node 2 examples/allreduce_sweep.py OUT

Made fixtures/allreduce_h100x2 (README, "Collective bandwidth";
tests/unit/analyzers/communication/test_comm.py).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

out = sys.argv[1]
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(rank % torch.cuda.device_count())
sizes = [2**k for k in range(10, 31)]
iters = 5
x = torch.ones(1 << 20, device="cuda")
for _ in range(5):
    dist.all_reduce(x)
torch.cuda.synchronize()
timing, graph_timing = {}, {}


def ranks_mean(ms: float) -> float:
    """nccl-tests' time: averaged over the ranks."""
    v = torch.tensor([ms], device="cuda", dtype=torch.float64)
    dist.all_reduce(v)
    return v.item() / world


for s in sizes:
    t = torch.ones(s // 4, device="cuda", dtype=torch.float32)
    for _ in range(3):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        dist.all_reduce(t)
    b.record()
    torch.cuda.synchronize()
    timing[s] = ranks_mean(a.elapsed_time(b) / iters)
    # The same calls captured in a CUDA graph and replayed: no host time between them, as
    # nccl-tests' C++ loop (the Python loop above is bound by the host for small messages).
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(iters):
                dist.all_reduce(t)
        g.replay()
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        graph_timing[s] = ranks_mean(a.elapsed_time(b) / iters)
        del g
    except Exception as e:  # noqa: BLE001 - record why, keep the eager timing
        print(f"rank {rank}: graph capture of {s} bytes failed: {e}", file=sys.stderr)
    del t
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
    for s in sizes:
        t = torch.ones(s // 4, device="cuda", dtype=torch.float32)
        torch.cuda.synchronize()
        dist.barrier()
        for _ in range(iters):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        del t
prof.export_chrome_trace(os.path.join(out, f"allreduce_sweep_rank{rank}.json"))
if rank == 0:
    n = world

    def row(s: int, ms: float | None) -> dict[str, float] | None:
        if ms is None:
            return None
        algbw = s / (ms * 1e-3) / 1e9
        return {"time_us": ms * 1e3, "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (n - 1) / n}

    rows = [{"bytes": s, **(row(s, timing[s]) or {}), "graph": row(s, graph_timing.get(s))}
            for s in sizes]
    info = {"world": world, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())), "iters": iters, "rows": rows}
    with open(os.path.join(out, "cuda_events.json"), "w") as f:
        json.dump(info, f, indent=1)
dist.destroy_process_group()
