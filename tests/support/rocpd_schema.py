"""A synthetic rocpd database written to the documented rocprofv3 schema (no real file exists here).

Schema source: ROCm/rocprofiler-sdk ``source/share/rocprofiler-sdk-rocpd/`` —
``rocpd_tables.sql`` @50c89cbde07fa1890f7b3167bef29297bdae608e (schema_version 3),
``rocpd_views.sql`` @ad31aebb5eb882f23601aedee99ef395eef5e72a and ``data_views.sql``
@fbb1b80dafe32a9aea6f2d05042c6e33642b55c9 (the same files as versions/3.0.x in
ROCm/rocm-systems). The statements below restate those definitions for the tables and views
the reader uses: every column of those tables, and for each data view the same joins and the
same output column names (views the reader does not use, and PMC/allocation tables, are left
out). Base tables carry the ``_<uuid>`` suffix the templates give them, and unsuffixed
pass-through views sit on top, as in a real file. The uuid spelling is our assumption,
and ``rocpd_string.string`` is not UNIQUE here so that two processes (two guids) can share
one sample file.

Rows are hand-written: per process one CPU and two GPU agents, kernels (some launched by a
recorded hipLaunchKernel, one not), two copies, HIP API / HSA / roctx regions.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

UUID = "_5b1c9e0a_2f7d_4c3e_8a61_0d9f4b7e2c13"

_TABLES = {
    "rocpd_metadata": "id INTEGER PRIMARY KEY AUTOINCREMENT, tag TEXT NOT NULL, "
                      "value TEXT NOT NULL",
    "rocpd_string": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                    "string TEXT NOT NULL",
    "rocpd_info_node": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, hash BIGINT, "
                       "machine_id TEXT, system_name TEXT, hostname TEXT, release TEXT, "
                       "version TEXT, hardware_name TEXT, domain_name TEXT",
    "rocpd_info_process": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                          "nid INTEGER NOT NULL, ppid INTEGER, pid INTEGER NOT NULL, "
                          "init BIGINT, fini BIGINT, start BIGINT, \"end\" BIGINT, "
                          "command TEXT, environment JSONB DEFAULT '{}' NOT NULL, "
                          "extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_info_thread": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                         "nid INTEGER NOT NULL, ppid INTEGER, pid INTEGER NOT NULL, "
                         "tid INTEGER NOT NULL, name TEXT, start BIGINT, \"end\" BIGINT, "
                         "extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_info_agent": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                        "nid INTEGER NOT NULL, pid INTEGER NOT NULL, "
                        "type TEXT CHECK (type IN ('CPU', 'GPU')), absolute_index INTEGER, "
                        "logical_index INTEGER, type_index INTEGER, uuid INTEGER, name TEXT, "
                        "model_name TEXT, vendor_name TEXT, product_name TEXT, user_name TEXT, "
                        "extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_info_queue": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                        "nid INTEGER NOT NULL, pid INTEGER NOT NULL, name TEXT, "
                        "extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_info_stream": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                         "nid INTEGER NOT NULL, pid INTEGER NOT NULL, name TEXT, "
                         "extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_info_code_object": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                              "nid INTEGER NOT NULL, pid INTEGER NOT NULL, agent_id INTEGER, "
                              "uri TEXT, load_base BIGINT, load_size BIGINT, load_delta BIGINT, "
                              "storage_type TEXT, extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_info_kernel_symbol": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                                "nid INTEGER NOT NULL, pid INTEGER NOT NULL, "
                                "code_object_id INTEGER NOT NULL, kernel_name TEXT, "
                                "display_name TEXT, kernel_object INTEGER, "
                                "kernarg_segment_size INTEGER, "
                                "kernarg_segment_alignment INTEGER, group_segment_size INTEGER, "
                                "private_segment_size INTEGER, sgpr_count INTEGER, "
                                "arch_vgpr_count INTEGER, accum_vgpr_count INTEGER, "
                                "extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_event": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                   "category_id INTEGER, stack_id INTEGER, parent_stack_id INTEGER, "
                   "correlation_id INTEGER, call_stack JSONB DEFAULT '{}' NOT NULL, "
                   "line_info JSONB DEFAULT '{}' NOT NULL, extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_region": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                    "nid INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL, "
                    "start BIGINT NOT NULL, \"end\" BIGINT NOT NULL, name_id INTEGER NOT NULL, "
                    "event_id INTEGER, extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_kernel_dispatch": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                             "nid INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER, "
                             "agent_id INTEGER NOT NULL, kernel_id INTEGER NOT NULL, "
                             "dispatch_id INTEGER NOT NULL, queue_id INTEGER NOT NULL, "
                             "stream_id INTEGER NOT NULL, start BIGINT NOT NULL, "
                             "\"end\" BIGINT NOT NULL, private_segment_size INTEGER, "
                             "group_segment_size INTEGER, workgroup_size_x INTEGER NOT NULL, "
                             "workgroup_size_y INTEGER NOT NULL, "
                             "workgroup_size_z INTEGER NOT NULL, grid_size_x INTEGER NOT NULL, "
                             "grid_size_y INTEGER NOT NULL, grid_size_z INTEGER NOT NULL, "
                             "region_name_id INTEGER, event_id INTEGER, "
                             "extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_memory_copy": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                         "nid INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER, "
                         "start BIGINT NOT NULL, \"end\" BIGINT NOT NULL, "
                         "name_id INTEGER NOT NULL, dst_agent_id INTEGER, dst_address INTEGER, "
                         "src_agent_id INTEGER, src_address INTEGER, size INTEGER NOT NULL, "
                         "queue_id INTEGER, stream_id INTEGER, region_name_id INTEGER, "
                         "event_id INTEGER, extdata JSONB DEFAULT '{}' NOT NULL",
    "rocpd_arg": "id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, "
                 "event_id INTEGER NOT NULL, position INTEGER NOT NULL, type TEXT NOT NULL, "
                 "name TEXT NOT NULL, value TEXT, extdata JSONB DEFAULT '{}' NOT NULL",
}

#: data_views.sql: the views the reader reads, restated (same joins, same column names).
DATA_VIEWS = {
    "processes": """SELECT N.id AS nid, N.machine_id, N.system_name, N.hostname,
        N.release AS system_release, N.version AS system_version, P.guid, P.ppid, P.pid,
        P.init, P.start, P.end, P.fini, P.command
        FROM rocpd_info_process P JOIN rocpd_info_node N ON N.id = P.nid AND N.guid = P.guid""",
    "threads": """SELECT N.id AS nid, N.machine_id, N.system_name, N.hostname,
        N.release AS system_release, N.version AS system_version, P.guid, P.ppid, P.pid,
        T.tid, T.start, T.end, T.name
        FROM rocpd_info_thread T
        JOIN rocpd_info_process P ON P.id = T.pid AND N.guid = T.guid
        JOIN rocpd_info_node N ON N.id = T.nid AND N.guid = T.guid""",
    "regions": """SELECT R.id, R.guid,
        (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid)
            AS category,
        S.string AS name, R.nid, P.pid, T.tid, R.start, R.end, (R.end - R.start) AS duration,
        R.event_id, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id, E.extdata,
        E.call_stack, E.line_info
        FROM rocpd_region R
        JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid
        JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid
        JOIN rocpd_info_process P ON P.id = R.pid AND P.guid = R.guid
        JOIN rocpd_info_thread T ON T.id = R.tid AND T.guid = R.guid""",
    "kernels": """SELECT K.id, K.guid, T.tid,
        (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid)
            AS category,
        R.string AS region, S.display_name AS name, K.nid, P.pid,
        A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
        A.type_index AS agent_type_index, A.type AS agent_type,
        S.code_object_id AS code_object_id, K.kernel_id, K.dispatch_id, K.stream_id,
        K.queue_id, Q.name AS queue, ST.name AS stream, K.start, K.end,
        (K.end - K.start) AS duration, K.grid_size_x AS grid_x, K.grid_size_y AS grid_y,
        K.grid_size_z AS grid_z, K.workgroup_size_x AS workgroup_x,
        K.workgroup_size_y AS workgroup_y, K.workgroup_size_z AS workgroup_z,
        K.group_segment_size AS lds_size, K.private_segment_size AS scratch_size,
        S.group_segment_size AS static_lds_size, S.private_segment_size AS static_scratch_size,
        E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
        FROM rocpd_kernel_dispatch K
        JOIN rocpd_info_agent A ON A.id = K.agent_id AND A.guid = K.guid
        JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid
        JOIN rocpd_string R ON R.id = K.region_name_id AND R.guid = K.guid
        JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
        LEFT JOIN rocpd_info_stream ST ON ST.id = K.stream_id AND ST.guid = K.guid
        LEFT JOIN rocpd_info_queue Q ON Q.id = K.queue_id AND Q.guid = K.guid
        JOIN rocpd_info_process P ON P.id = Q.pid AND P.guid = Q.guid
        JOIN rocpd_info_thread T ON T.id = K.tid AND T.guid = K.guid""",
    "memory_copies": """SELECT M.id, M.guid,
        (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid)
            AS category,
        M.nid, P.pid, T.tid, M.start, M.end, (M.end - M.start) AS duration, S.string AS name,
        R.string AS region_name, M.stream_id, M.queue_id, ST.name AS stream_name,
        Q.name AS queue_name, M.size, dst_agent.name AS dst_device,
        dst_agent.absolute_index AS dst_agent_abs_index,
        dst_agent.logical_index AS dst_agent_log_index,
        dst_agent.type_index AS dst_agent_type_index, dst_agent.type AS dst_agent_type,
        M.dst_address, src_agent.name AS src_device,
        src_agent.absolute_index AS src_agent_abs_index,
        src_agent.logical_index AS src_agent_log_index,
        src_agent.type_index AS src_agent_type_index, src_agent.type AS src_agent_type,
        M.src_address, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
        FROM rocpd_memory_copy M
        JOIN rocpd_string S ON S.id = M.name_id AND S.guid = M.guid
        LEFT JOIN rocpd_string R ON R.id = M.region_name_id AND R.guid = M.guid
        JOIN rocpd_info_agent dst_agent ON dst_agent.id = M.dst_agent_id
            AND dst_agent.guid = M.guid
        JOIN rocpd_info_agent src_agent ON src_agent.id = M.src_agent_id
            AND src_agent.guid = M.guid
        LEFT JOIN rocpd_info_queue Q ON Q.id = M.queue_id AND Q.guid = M.guid
        LEFT JOIN rocpd_info_stream ST ON ST.id = M.stream_id AND ST.guid = M.guid
        JOIN rocpd_event E ON E.id = M.event_id AND E.guid = M.guid
        JOIN rocpd_info_process P ON P.id = M.pid AND P.guid = M.guid
        JOIN rocpd_info_thread T ON T.id = M.tid AND T.guid = M.guid""",
}

KERNEL_NAMES = (
    "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x1_SN_1LDSB1_GRVW8",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
)


def create(conn: sqlite3.Connection) -> None:
    """Create the base tables (uuid-suffixed), pass-through views and data views."""
    for name, cols in _TABLES.items():
        conn.execute(f'CREATE TABLE "{name}{UUID}" ({cols})')
        conn.execute(f'CREATE VIEW "{name}" AS SELECT * FROM "{name}{UUID}"')
    for name, body in DATA_VIEWS.items():
        conn.execute(f'CREATE VIEW "{name}" AS {body}')
    conn.execute(f'INSERT INTO "rocpd_metadata{UUID}" (tag, value) VALUES '
                 "('schema_version', '3'), ('uuid', ?)", (UUID,))


class _Ids:
    def __init__(self, conn: sqlite3.Connection, guid: str) -> None:
        self.conn, self.guid = conn, guid

    def ins(self, table: str, **kw: object) -> int:
        kw = {"guid": self.guid, **kw}
        cols = ", ".join(f'"{k}"' for k in kw)
        q = f'INSERT INTO "{table}{UUID}" ({cols}) VALUES ({", ".join("?" * len(kw))})'
        cur = self.conn.execute(q, tuple(kw.values()))
        return int(cur.lastrowid or 0)

    def string(self, s: str) -> int:
        row = self.conn.execute(f'SELECT id FROM "rocpd_string{UUID}" WHERE string = ? '
                                "AND guid = ?", (s, self.guid)).fetchone()
        return int(row[0]) if row else self.ins("rocpd_string", string=s)

    def event(self, category: str, corr: int) -> int:
        return self.ins("rocpd_event", category_id=self.string(category), correlation_id=corr)


def add_process(conn: sqlite3.Connection, guid: str, os_pid: int, gpu: int, t0: int) -> None:
    """One profiled process: its node, threads, agents, and a few traced operations."""
    db = _Ids(conn, guid)
    nid = db.ins("rocpd_info_node", hash=os_pid, machine_id=f"m-{guid}", hostname="mi300x-01",
                 system_name="Linux")
    pid = db.ins("rocpd_info_process", nid=nid, ppid=1, pid=os_pid, start=t0,
                 command=f"python train.py --rank {gpu}")
    main = db.ins("rocpd_info_thread", nid=nid, pid=pid, tid=os_pid, name="python")
    worker = db.ins("rocpd_info_thread", nid=nid, pid=pid, tid=os_pid + 7, name="hip-worker")
    cpu = db.ins("rocpd_info_agent", nid=nid, pid=pid, type="CPU", absolute_index=0,
                 logical_index=0, type_index=0, name="AMD EPYC 9654", vendor_name="CPU")
    gpus = [db.ins("rocpd_info_agent", nid=nid, pid=pid, type="GPU", absolute_index=1 + i,
                   logical_index=1 + i, type_index=i, name="gfx942", model_name="aqua_vanjaram",
                   vendor_name="AMD", product_name="AMD Instinct MI300X",
                   extdata='{"cu_count": 304}') for i in range(2)]
    queue = db.ins("rocpd_info_queue", nid=nid, pid=pid, name="Queue 0")
    stream = db.ins("rocpd_info_stream", nid=nid, pid=pid, name="Stream 1")
    co = db.ins("rocpd_info_code_object", nid=nid, pid=pid, agent_id=gpus[gpu], uri="file://x")
    syms = [db.ins("rocpd_info_kernel_symbol", nid=nid, pid=pid, code_object_id=co,
                   kernel_name=n, display_name=n, arch_vgpr_count=64 + 8 * i, sgpr_count=32)
            for i, n in enumerate(KERNEL_NAMES)]
    fwd = db.string("forward")
    t = t0 + 1_000
    # roctx range over the whole step, and a zero-length roctx mark inside it.
    for name, start, end in (("forward", t, t + 400_000), ("step 1 done", t + 5, t + 5)):
        db.ins("rocpd_region", nid=nid, pid=pid, tid=main, start=start, end=end,
               name_id=db.string(name), event_id=db.event("MARKER_CORE_RANGE_API", 0))
    db.ins("rocpd_region", nid=nid, pid=pid, tid=worker, start=t + 10, end=t + 900,
           name_id=db.string("hsa_queue_create"), event_id=db.event("HSA_CORE_API", 0))
    durations = (12_345, 6_789, 40_001, 12_000, 7_013, 99_999)
    corr = 0
    for i, dur in enumerate(durations):
        corr += 1
        launch = t + 2_000 + i * 50_000
        if i != 3:  # dispatch 4 has no recorded launch call (e.g. HIP tracing started late)
            db.ins("rocpd_region", nid=nid, pid=pid, tid=main, start=launch, end=launch + 3_100,
                   name_id=db.string("hipLaunchKernel"),
                   event_id=db.event("HIP_RUNTIME_API_EXT", corr))
        k = i % len(syms)
        db.ins("rocpd_kernel_dispatch", nid=nid, pid=pid, tid=main, agent_id=gpus[gpu],
               kernel_id=syms[k], dispatch_id=corr, queue_id=queue, stream_id=stream,
               start=launch + 5_000, end=launch + 5_000 + dur, private_segment_size=0,
               group_segment_size=1024 * k, workgroup_size_x=256, workgroup_size_y=1,
               workgroup_size_z=1, grid_size_x=256 * (40 + i), grid_size_y=1 + k,
               grid_size_z=1, region_name_id=fwd, event_id=db.event("KERNEL_DISPATCH", corr))
    for direction, nbytes, src, dst in (("HOST_TO_DEVICE", 1 << 20, cpu, gpus[gpu]),
                                        ("DEVICE_TO_HOST", 4096, gpus[gpu], cpu)):
        corr += 1
        start = t + 330_000 + corr * 1_000
        db.ins("rocpd_region", nid=nid, pid=pid, tid=main, start=start - 400, end=start + 50,
               name_id=db.string("hipMemcpyAsync"),
               event_id=db.event("HIP_RUNTIME_API_EXT", corr))
        db.ins("rocpd_memory_copy", nid=nid, pid=pid, tid=main, start=start, end=start + 700,
               name_id=db.string(f"MEMORY_COPY_{direction}"), dst_agent_id=dst,
               src_agent_id=src, size=nbytes, queue_id=queue, stream_id=stream,
               region_name_id=fwd, event_id=db.event("MEMORY_COPY", corr))


def build(path: Path, processes: int = 1) -> Path:
    """Write a rocpd database with ``processes`` profiled processes (one GPU each)."""
    conn = sqlite3.connect(path)
    try:
        create(conn)
        for r in range(processes):
            add_process(conn, f"guid-{r}", 4242 + 101 * r, r, 1_700_000_000_000 + 777 * r)
        conn.commit()
    finally:
        conn.close()
    return path
