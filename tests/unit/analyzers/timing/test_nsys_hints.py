"""nsys exports: info lists the NVTX ranges that could be steps, ops says why it is empty
(issue 25, item 10)."""

from __future__ import annotations

import json

from tests.conftest import cli_main, ev, make_trace, shared
from traceforge.analyzers.timing.ops import why_no_ops
from traceforge.analyzers.timing.summary import summary

NSYS = "h200-nsys/policy_fa2.sqlite.gz"


def test_info_on_nsys_without_steps_lists_nvtx_ranges() -> None:
    p = str(shared(NSYS))
    code, out, err = cli_main("info", p, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    # Oracle: nsys stats --report nvtx_sum of the same report.
    import csv

    with shared("h200-nsys/policy_fa2_stats_nvtx_sum.csv").open() as f:
        want = [(r["Range"].lstrip(":"), int(r["Instances"]), int(r["Total Time (ns)"]))
                for r in csv.DictReader(f)]
    got = [(r["name"], r["count"], r["total_ns"]) for r in doc["ranges"]]  # exact ns
    assert got == want
    assert any("--steps-from policy_inference" in n for n in doc["notes"])
    code, out, _ = cli_main("info", p)
    assert "policy_inference" in out and "--steps-from" in out
    # With steps, no ranges table.
    code, out, _ = cli_main("info", p, "--steps-from", "policy_inference", "--format", "json")
    assert "ranges" not in json.loads(out)


def test_ranges_most_frequent_first_on_a_synthetic_trace() -> None:
    t = make_trace([ev("a", "user_annotation", 0, 50), ev("b", "user_annotation", 60, 5),
                    ev("b", "user_annotation", 70, 5), ev("k", "kernel", 10, 5)])
    s = summary(t)
    assert s.ranges["name"].tolist() == ["b", "a"] and s.ranges["count"].tolist() == [2, 1]
    assert any("--steps-from b" in n for n in s.notes)


def test_ops_on_nsys_says_why_it_is_empty() -> None:
    p = str(shared(NSYS))
    code, out, err = cli_main("ops", p)
    assert code == 0, err
    assert "Nsight Systems" in out and "shapes" in out and "┃" not in out
    code, out, _ = cli_main("ops", p, "--format", "json")
    assert json.loads(out) == []  # scripts still get the (empty) rows


def test_why_no_ops_names_each_case() -> None:
    assert "No GPU activity" in why_no_ops(make_trace([ev("x", "cpu_op", 0, 5)]))
    t = make_trace([ev("k", "kernel", 0, 5)])
    assert "no framework operators" in why_no_ops(t)
