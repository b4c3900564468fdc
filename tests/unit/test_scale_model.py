"""[bench] The scale model's pure parts: list scheduling, the backend phase's bounds, serial fraction, inputs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.measure import BenchError
from bench.scale_model import (
    BackendPhase,
    Bound,
    Inputs,
    Measured,
    Prediction,
    ProxyCosts,
    Shape,
    backend_phase,
    hashed_spread,
    load_costs,
    lpt_makespan,
    predict,
    sample_jobs,
)

COSTS = ProxyCosts(client_cpu_ms_per_hit=1.0, client_cpu_ms_per_action=32.0, proxy_cpu_ms_per_action=8.0,
                   server_round_trip_ms_p50=5.0, server_cpu_ms_per_action=10.0, remote_overhead_ms_per_action=100.0)


def test_list_scheduling_is_largest_first_not_optimal() -> None:
    # Largest first on 2 cores: 5 | 4, then 3 to the core free at 4 (7), 3 to the one free at 5 (8), 3 to the one
    # free at 7 (10). The optimum is 9 ({5, 4} | {3, 3, 3}): list scheduling is a bound, not the best schedule.
    assert lpt_makespan([3, 5, 3, 4, 3], 2) == 10
    assert lpt_makespan([3, 5, 3, 4, 3], 10) == 5  # more cores than jobs: the longest job
    assert lpt_makespan([2, 2, 2, 2], 1) == 8
    assert lpt_makespan([], 4) == 0


ONE = Shape(build_cores=32, proxy_shards=1, step_servers=1)


def test_proxy_bound_dominates_many_cores() -> None:
    phase = backend_phase([10.0] * 1000, cores=1000, costs=COSTS, shape=ONE)
    assert phase.bound_ms(Bound.PROXY) == 8000  # 1000 actions x 8 ms in one process
    assert phase.bound_ms(Bound.CLIENT_CPU) == 1250  # 1000 x (32 + 8) ms over 32 cores
    assert phase.bound_ms(Bound.REMOTE_CORES) == 10
    assert phase.makespan_ms == 10
    assert phase.bounds_ms[0][0] is Bound.PROXY and phase.bounds_ms[1][0] is Bound.CLIENT_CPU
    assert phase.wall_ms == 8000


def test_the_step_server_is_one_process_too() -> None:
    """[lean] The build directory's step server runs every backend step: its CPU per action bounds like the proxy's."""
    costs = dataclasses.replace(COSTS, step_server_cpu_ms_per_action=12.0)
    phase = backend_phase([10.0] * 1000, cores=1000, costs=costs, shape=ONE)
    assert phase.bounds_ms[0] == (Bound.STEP_SERVER, 12_000) and phase.wall_ms == 12_000


def test_shards_divide_the_proxy_and_step_server_bounds_by_their_count() -> None:
    """[scale] Shards run in parallel: the bound is the busiest shard's, i.e. the even share times the imbalance of
    the jobs' command lines hashed over the shards (not the benchmark's, measured on 20 distinct ones); and never
    more shards than build cores count."""
    costs = dataclasses.replace(COSTS, step_server_cpu_ms_per_action=12.0, shard_imbalance=1.25)
    phase = backend_phase([10.0] * 1000, cores=1000, costs=costs, shape=Shape(build_cores=32, proxy_shards=4,
                                                                             step_servers=3))
    assert phase.bound_ms(Bound.PROXY) == 1000 * 8 * hashed_spread(1000, 4) / 4
    assert phase.bound_ms(Bound.STEP_SERVER) == 4000
    few_cores = backend_phase([10.0] * 1000, cores=1000, costs=costs, shape=Shape(build_cores=2, proxy_shards=8,
                                                                                 step_servers=8))
    assert few_cores.bound_ms(Bound.PROXY) == 1000 * 8 * hashed_spread(1000, 2) / 2
    assert few_cores.bound_ms(Bound.STEP_SERVER) == 6000


def test_distinct_command_lines_spread_evenly_over_shards() -> None:
    """[scale] The busiest shard's share of many distinct command lines (CRC-32, as the client picks a shard) is
    close to even, and closer the more there are; one shard is even by definition."""
    assert hashed_spread(1000, 1) == hashed_spread(0, 4) == 1.0
    assert 1.0 < hashed_spread(40_000, 16) < 1.06
    assert 1.0 < hashed_spread(400, 4) < 1.2
    assert hashed_spread(40_000, 16) < hashed_spread(400, 16)


def test_remote_cores_and_longest_job_bounds() -> None:
    few = backend_phase([1000.0] * 100, cores=2, costs=COSTS, shape=ONE)
    assert few.bounds_ms[0] == (Bound.REMOTE_CORES, 50_000) and few.wall_ms == few.makespan_ms == 50_000
    one_long = backend_phase([1.0] * 9 + [90_000.0], cores=100, costs=COSTS, shape=ONE)
    assert one_long.bounds_ms[0][0] is Bound.LONGEST_BACKEND and one_long.wall_ms == 90_000


def test_serial_fraction_is_serial_links_over_wall() -> None:
    phase = BackendPhase(400.0, ((Bound.REMOTE_CORES, 400.0), (Bound.PROXY, 100.0)))
    p = Prediction(factor=1.0, cores=10, thin_link_ms=300.0, backends=phase, final_link_ms=300.0)
    assert p.wall_ms == 1000 and p.serial_fraction == pytest.approx(0.6)


def test_predict_scales_compile_time_and_adds_overhead() -> None:
    measured = Measured((100, 200), "app", modules=4, thin_link_ms=40, final_link_ms=8, build_dir=Path("out"))
    inputs = Inputs(measured, COSTS, Path("costs.json"), dataclasses.replace(ONE, product_modules=10, test_backends=0))
    p = predict(inputs, [100.0, 200.0], cores=1, factor=3.0)
    assert p.thin_link_ms == 100  # 10 ms per module x 10 modules
    assert p.final_link_ms == 20  # 2 ms per object x 10 objects
    assert p.backends.makespan_ms == (300 + 100) + (600 + 100)


def test_partition_edges_join_the_backend_phase_as_the_product_links_codegen() -> None:
    """[partition] The regular-LTO code generation that left the thin link: per module (median of the links that
    had partition edges) x product modules, in as many jobs as the most partitions a link used, not scaled."""
    measured = Measured((100,), "app", modules=4, thin_link_ms=40, final_link_ms=8, build_dir=Path("out"),
                        every_partition_ms_per_module=(2.0, 6.0, 30.0), partitions=3)
    inputs = Inputs(measured, COSTS, Path("costs.json"), dataclasses.replace(ONE, product_modules=30, test_backends=0))
    p = predict(inputs, [100.0], cores=10, factor=3.0)
    assert p.partition_job_ms == 6.0 * 30 / 3  # median 6 ms per module x 30 modules, in 3 jobs
    assert p.backends.makespan_ms == 300 + 100  # 4 jobs on 10 cores: the longest, the backend x 3 + overhead
    assert p.backends.bound_ms(Bound.PROXY) == 4 * 8.0
    without = predict(dataclasses.replace(inputs, measured=dataclasses.replace(measured, partitions=0)), [100.0],
                      cores=10, factor=3.0)
    assert without.partition_job_ms == 0 and without.backends.bound_ms(Bound.PROXY) == 8.0


def test_sample_is_deterministic_and_drawn_from_the_measurements() -> None:
    a, b = sample_jobs([5, 7, 11], 50, seed=3), sample_jobs([5, 7, 11], 50, seed=3)
    assert a == b and len(a) == 50 and set(a) <= {5.0, 7.0, 11.0}


def test_costs_come_from_the_results_or_the_fallback(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match=r"proxy\.json: no such file"):
        load_costs(tmp_path, None)
    fallback = tmp_path / "costs.json"
    fallback.write_text(json.dumps({"client_cpu_ms_per_hit": 1, "client_cpu_ms_per_action": 32,
                                    "proxy_cpu_ms_per_action": 8, "server_round_trip_ms_p50": 5,
                                    "server_cpu_ms_per_action": 10, "remote_overhead_ms_per_action": 100}))
    assert load_costs(tmp_path, fallback) == (COSTS, fallback)
    fallback.write_text("{}")
    with pytest.raises(BenchError, match="not a proxy-costs file"):
        load_costs(tmp_path, fallback)


def test_the_shard_benchmark_s_clean_mix_replaces_the_proxy_costs_net_of_idle_when_measured(tmp_path: Path) -> None:
    """[scale] proxy-shards.json's clean mix: without the background its idle processes spent over the run's wall time
    when the run measured it (what each further action costs), else as measured."""
    fallback = tmp_path / "costs.json"
    fallback.write_text(json.dumps({"client_cpu_ms_per_hit": 1, "client_cpu_ms_per_action": 32,
                                    "proxy_cpu_ms_per_action": 8, "server_round_trip_ms_p50": 5,
                                    "server_cpu_ms_per_action": 10, "remote_overhead_ms_per_action": 100}))
    raw = {"proxy_cpu_ms_per_action": 12.0, "busiest_shard_cpu_ms_per_action": 4.0,
           "step_server_cpu_ms_per_action": 7.0, "client_cpu_ms_per_action": 8.0, "shards": 4}
    (tmp_path / "proxy-shards.json").write_text(json.dumps({"shards": 4, "costs": {"clean-4": raw}}))
    costs, _ = load_costs(tmp_path, fallback)
    assert (costs.proxy_cpu_ms_per_action, costs.step_server_cpu_ms_per_action, costs.client_cpu_ms_per_action) == \
        (12.0, 7.0, 8.0) and costs.shard_imbalance == pytest.approx(4 * 4.0 / 12.0)
    net = {**raw, "net_proxy_cpu_ms_per_action": 9.0, "net_busiest_shard_cpu_ms_per_action": 2.5,
           "net_step_server_cpu_ms_per_action": 5.0, "net_client_cpu_ms_per_action": 6.0}
    (tmp_path / "proxy-shards.json").write_text(json.dumps({"shards": 4, "costs": {"clean-4": net}}))
    costs, source = load_costs(tmp_path, fallback)
    assert (costs.proxy_cpu_ms_per_action, costs.step_server_cpu_ms_per_action, costs.client_cpu_ms_per_action) == \
        (9.0, 5.0, 6.0) and "net of the idle background" in str(source)
