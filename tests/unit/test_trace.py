"""[trace] The last build of a .ninja_log as trace events: builds split, edges grouped, phases, slots."""

from __future__ import annotations

from gn_thinlto.analysis.build_log import Link, LogEdge, PhaseIndex, cache_verdicts, last_build, slots, trace_events

LOG = """# ninja log v5
0\t100\t1\tobj/old.o\taaaa
5\t50\t1\tobj/a.o\t1111
5\t60\t1\tobj/b.o\t2222
60\t80\t1\tgn-thinlto/app/used.txt\t3333
60\t80\t1\tgn-thinlto/app/final.rsp\t3333
80\t90\t1\tgn-thinlto/app/native/obj/a.o\t4444
80\t95\t1\tgn-thinlto/app/native/obj/b.o\t5555
95\t99\t1\tapp\t6666
95\t99\t1\texe.unstripped/app\t6666
99\t99\t1\tobj/stamp\t7777
"""
LINKS = [Link("app", "gn-thinlto/app", ("./app", "app"))]


def test_last_build_and_edges() -> None:
    edges = last_build("0\t500\t1\tobj/earlier.o\tffff\n" + LOG.split("\n", 1)[1])
    assert [e.outputs for e in edges][:2] == [("obj/a.o",), ("obj/b.o",)]
    assert ("app", "exe.unstripped/app") in [e.outputs for e in edges]
    assert ("gn-thinlto/app/used.txt", "gn-thinlto/app/final.rsp") in [e.outputs for e in edges]
    assert len(edges) == 7


def test_phases() -> None:
    kinds = [PhaseIndex(LINKS).phase_of(e) for e in last_build(LOG)]
    assert kinds == [("compile", ""), ("compile", ""), ("thin link", "app"), ("backend", "app"), ("backend", "app"),
                     ("final link", "app"), ("other", "")]


def test_slots_reuse_the_lowest_free_track() -> None:
    edges = [LogEdge(0, 10, ("a",)), LogEdge(0, 5, ("b",)), LogEdge(5, 8, ("c",)), LogEdge(10, 12, ("d",))]
    assert slots(edges) == [0, 1, 1, 0]


def test_trace_events_carry_cache_verdicts() -> None:
    cache = cache_verdicts("miss k1 gn-thinlto/app/native/obj/a.o\nhit k2 gn-thinlto/app/native/obj/b.o\n")
    trace = trace_events(last_build(LOG), LINKS, cache)
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == 7 and all(e["dur"] >= 0 and e["ts"] >= 0 for e in slices)
    backends = {e["args"]["outputs"][0]: e["args"]["cache"] for e in slices if e["cat"] == "backend"}
    assert backends == {"gn-thinlto/app/native/obj/a.o": "miss", "gn-thinlto/app/native/obj/b.o": "hit"}
    assert {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"} == {"slot 0", "slot 1"}


def test_remote_runs_tie_backend_objects_to_the_wrappers_records() -> None:
    from gn_thinlto.analysis.build_log import remote_runs
    from goma_ext.remote.stats import Mode, RunRecord

    log = ("miss k1 gn-thinlto/app/native/obj/a.o\nremote c1 gn-thinlto/app/native/obj/a.o\n"
           "miss k2 gn-thinlto/app/native/obj/b.o\n")
    records = [RunRecord("gn-thinlto/remote-stage/c1/native.o", Mode.REMOTE, 0, 0.5, bytes_uploaded=1234)]
    runs = remote_runs(log, records)
    assert runs == {"gn-thinlto/app/native/obj/a.o": {"execution": "remote", "bytes_uploaded": 1234}}
    trace = trace_events(last_build(LOG), LINKS, cache_verdicts(log), runs)
    backends = {e["args"]["outputs"][0]: e["args"] for e in trace["traceEvents"] if e.get("cat") == "backend"}
    assert backends["gn-thinlto/app/native/obj/a.o"]["execution"] == "remote"
    assert backends["gn-thinlto/app/native/obj/b.o"]["execution"] == "local"


def test_a_two_step_backends_two_wrapper_runs_add_up() -> None:
    from gn_thinlto.analysis.build_log import remote_runs
    from goma_ext.remote.stats import Mode, RunRecord

    log = "miss k1 gn-thinlto/app/native/obj/a.o\nremote c1 gn-thinlto/app/native/obj/a.o\n"
    records = [RunRecord("gn-thinlto/remote-stage/c1/optimized.bc", Mode.CACHE_HIT, 0, 0.5, bytes_uploaded=0),
               RunRecord("gn-thinlto/remote-stage/c1/native.o", Mode.REMOTE, 0, 0.5, bytes_uploaded=99)]
    assert remote_runs(log, records) == {
        "gn-thinlto/app/native/obj/a.o": {"execution": "cache_hit+remote", "bytes_uploaded": 99}}


def test_a_build_directory_without_logs_is_one_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from gn_thinlto.cli.main import main

    for command in (["trace", str(tmp_path)], ["report", str(tmp_path), "--build"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ".ninja_log: no such file; build" in err, err


def check_trace_event_format(trace: dict) -> int:  # type: ignore[type-arg]
    """What a trace viewer needs of our file (Trace Event Format: the JSON object form, complete "X" events and
    "M" metadata), and what Perfetto's importer would reject: slices on one track that overlap without
    nesting. Returns the number of slices. (Perfetto's trace processor itself, from the `perfetto` package,
    downloads its binary at run time, which this machine cannot.)"""
    assert set(trace) == {"traceEvents", "displayTimeUnit"} and trace["displayTimeUnit"] in ("ms", "ns")
    tracks: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in trace["traceEvents"]:
        assert isinstance(e["name"], str) and e["ph"] in ("X", "M") and isinstance(e["pid"], int), e
        assert isinstance(e["tid"], int) and isinstance(e["args"], dict), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and isinstance(e["args"]["name"], str), e
            continue
        assert isinstance(e["cat"], str) and isinstance(e["ts"], int) and isinstance(e["dur"], int), e
        assert e["ts"] >= 0 and e["dur"] >= 0, e
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, f"overlapping slices on one track: {spans}"
    named = {e["tid"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {tid for _, tid in tracks} <= named
    return sum(len(s) for s in tracks.values())


def test_trace_follows_the_trace_event_format() -> None:
    assert check_trace_event_format(trace_events(last_build(LOG), LINKS, {})) == 7
