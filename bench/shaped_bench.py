"""`python -m bench shaped`: remote builds of the example through a shaped link and through the same namespaces
unshaped, side by side in one run ([scale]).

Per link (bench/shaped_net.py: the client and a fresh cluster in network namespaces of their own; `shaped`: tbf at
--rate-mbit on both ends of their veth and a relay adding --rtt-ms / 2 each way; `unshaped`: the same veth and relay
without rate limit or delay), per `remote.download` mode (--downloads) and per gRPC compression (--compression:
`gzip` is the cluster's `--compression gzip` and the client's `remote.compression: gzip`), each against a cluster of
its own, so each starts cold, two builds, each of the whole example with every backend remote:
- `clean`: a new build directory against the cold cluster (its CAS learns the compiler too: `toolchain: inputs`);
- `fresh`: another new build directory, every backend an action-cache hit;
- `edit`: the `fresh` directory again after a body edit in a file many modules import from (the subject's
  `edit_body`): the backends that import from it rerun remotely, and most give the object they gave before.
Printed per build: wall, remote actions, bytes down and up at the client's end of the link (all traffic), the
proxy's CAS payload down and up, the natives' size as they lie in the build directory (stand-ins under
`minimal`), the final binaries' sizes as lld wrote them (exe.unstripped/, which the strip here reads) and as
stripped, and bytes down / linked binaries (the goal for build-without-the-bytes is ≤ 1.05). For `edit`: the
natives the edit changed (their bytes are what an incremental build needs), and the outputs the proxy left as
they were because they already held the object (not downloaded).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import cluster_tool, prereqs, results, subjects, variants
from bench.fsio import REPO, remove, scratch_dir
from bench.measure import BenchError, progress, run
from bench.shaped_net import ShapedNet
from bench.table import render
from bench.variants import Variant
from gn_thinlto import tools
from goma_ext.remote import stats
from goma_ext.remote.names import LINK_STATS_LOG

LINKS = ("shaped", "unshaped")


def _proxy(net: ShapedNet, env: dict[str, str], *args: str) -> str:
    return subprocess.run([*net.exec_client(), sys.executable, "-m", "goma_ext.cli", "proxy", *args],
                          capture_output=True, text=True, env=env, check=False, cwd=REPO).stdout


def _payload(net: ShapedNet, env: dict[str, str]) -> dict[str, int]:
    found = json.loads(_proxy(net, env, "status", "--json") or "[]")
    return {k: sum(int(s.get(field, 0)) for s in found) for k, field in (
        ("down", "bytes_downloaded"), ("up", "bytes_uploaded"), ("outputs_here", "outputs_already_here"),
        ("bytes_here", "bytes_already_here"))}


def _native_files(out: Path) -> list[Path]:
    return list((out / "gn-thinlto").glob("*/native/**/*.o"))


def _natives(out: Path) -> dict[Path, bytes]:
    """The natives' bytes (for the edit's comparison)."""
    return {p: p.read_bytes() for p in _native_files(out)}


def _mb(n: int | None) -> float | None:
    return None if n is None else round(n / 1e6, 3)


def _reports(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The build directory's remote backends and remote final links so far (their stats logs)."""
    return cluster_tool.report(out), stats.report(out, LINK_STATS_LOG)


def _since(now: dict[str, Any], then: dict[str, Any] | None) -> dict[str, Any]:
    """NOW's counts less THEN's: an edit build's own, in a directory built before."""
    return now if then is None else {k: v - then.get(k, 0) if isinstance(v, int) else v for k, v in now.items()}


def _final_bytes(out: Path, root: Path) -> tuple[int, int]:
    """(the binaries as lld wrote them, as stripped here): a link's output is exe.unstripped/NAME or
    lib.unstripped/NAME where GN's toolchain strips a copy."""
    names = [*tools.gn_ls(out, root, "--type=executable", "--as=output"),
             *tools.gn_ls(out, root, "--type=shared_library", "--as=output"),
             *tools.gn_ls(out, root, "--type=loadable_module", "--as=output")]
    linked = [next((out / d / n for d in ("exe.unstripped", "lib.unstripped") if (out / d / n).is_file()), out / n)
              for n in names]
    return sum(p.stat().st_size for p in linked), sum((out / n).stat().st_size for n in names)


def _build(net: ShapedNet, subject: subjects.Subject, out: Path, endpoint: str, env: dict[str, str],
           link: str, download: str, tag: str, compression: str) -> dict[str, Any]:
    before: dict[Path, bytes] = {}
    earlier = None
    if tag == "edit":  # the directory built last, after the edit
        before, earlier = _natives(out), _reports(out)
        subject.edit_body()
    else:
        remove(out)
        variants.configure(Variant.REMOTE, out, subject.root, subject.gn_args, endpoint, download=download,
                           compression=compression)
    wire0, payload0 = net.counters(), _payload(net, env)
    s = run([*net.exec_client(), "ninja", "-C", str(out)], env=env)
    wire1, payload1 = net.counters(), _payload(net, env)
    checked = subjects.check(subject, out)
    # the backends, and the remote final links (minimal) with their CAS payload down and up
    now = _reports(out)
    rep, links = _since(now[0], earlier and earlier[0]), _since(now[1], earlier and earlier[1])
    natives = sum(p.stat().st_size for p in _native_files(out))
    changed = [b for p, b in _natives(out).items() if before.get(p) != b] if tag == "edit" else []
    linked, final = _final_bytes(out, subject.root)
    row = {"link": link, "download": download, "compression": compression, "build": tag, "wall_s": round(s.wall_s, 1), "actions": rep["runs"],
           "remote_executions": rep["remote_executions"], "cache_hits": rep["cache_hits"],
           "local_fallbacks": rep["local_fallbacks"], "wire_down": wire1["down"] - wire0["down"],
           "wire_up": wire1["up"] - wire0["up"], "payload_down": payload1["down"] - payload0["down"],
           "payload_up": payload1["up"] - payload0["up"],
           "link_payload_down": links["bytes_downloaded"], "link_payload_up": links["bytes_uploaded"],
           "remote_links": links["runs"], "natives_bytes": natives, "linked_binaries_bytes": linked,
           "final_binaries_bytes": final, "checked": checked,
           "outputs_already_here": payload1["outputs_here"] - payload0["outputs_here"],
           "bytes_already_here": payload1["bytes_here"] - payload0["bytes_here"]}
    if tag == "edit":  # under `minimal` the natives are stand-ins: what changed is the digests they name
        row.update(natives_changed=len(changed),
                   natives_changed_bytes=sum(len(b) for b in changed) if download == "all" else None)
    row["down_vs_linked_binaries"] = round(row["wire_down"] / linked, 3) if linked else None
    payload = row["payload_down"] + row["link_payload_down"]
    row["payload_down_vs_linked_binaries"] = round(payload / linked, 3) if linked else None
    row["down_vs_final_binaries"] = round(row["wire_down"] / final, 3) if final else None
    progress(f"  {link} {download} {compression} {tag}: {s.wall_s:.1f} s, {row['wire_down'] / 1e6:.2f} MB down, "
             f"{row['wire_up'] / 1e6:.1f} MB up, linked binaries {linked / 1e6:.2f} MB")
    return row


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench shaped", description=__doc__.splitlines()[0])
    p.add_argument("--rate-mbit", type=float, default=100.0, help="the shaped link's rate (default 100)")
    p.add_argument("--rtt-ms", type=float, default=20.0, help="the shaped link's round trip (default 20)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--subject", default="example", choices=("example", "abseil", "tiny"))
    p.add_argument("--downloads", default="all,minimal", help="remote.download modes to compare (default all,minimal)")
    p.add_argument("--links", default=",".join(LINKS), help="shaped, unshaped or both (default)")
    p.add_argument("--compression", default="off",
                   help="gRPC compression modes to compare, off and/or gzip (the cluster's and the client's; "
                        "default off)")
    p.add_argument("--name", default="shaped", help="results file name (default shaped)")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "gn-thinlto-bench")
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    # a SIGTERM (a timeout, a user) unwinds like an error: the namespaces, the cluster and the proxies go too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        raise BenchError("needs root: it makes network namespaces and shapes their link")
    prereqs.ensure()
    ctx = results.context()
    command = "python -m bench shaped" + (f" {' '.join(argv)}" if argv else "")
    print(f"machine: {ctx['machine'].one_line()}")
    missing = cluster_tool.available()
    if missing:
        print(f"not measured: {missing}")
        results.write(args.results, args.name, dict(ctx, missing=missing, command=command))
        return 0
    subject = subjects.SUBJECTS[args.subject](args.cache)
    venv = Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))
    rows: list[dict[str, Any]] = []
    downloads = [d for d in args.downloads.split(",") if d]
    compressions = [c for c in args.compression.split(",") if c]
    for link, download, compression in ((k, d, c) for k in args.links.split(",") if k for d in downloads
                                        for c in compressions):
        if link not in LINKS or download not in ("all", "minimal") or compression not in ("off", "gzip"):
            raise BenchError(f"--links {link!r} / --downloads {download!r} / --compression {compression!r}: "
                             f"expected {LINKS}, all or minimal, off or gzip")
        shaped = link == "shaped"
        work = scratch_dir(args.cache, f"shaped-{link}-{download}-{compression}-")
        proxy_dir = tempfile.mkdtemp(prefix="gxsh-")
        env = {"GOMA_EXT_CACHE_SALT": f"bench-shaped-{time.time_ns()}", "GOMA_EXT_PROXY_DIR": proxy_dir}
        os.environ.pop("GOMA_EXT_REMOTE_TOKEN_FILE", None)  # the cluster takes no tokens (ShapedNet.start_cluster)
        with ShapedNet(rate_mbit=args.rate_mbit if shaped else 0, rtt_ms=args.rtt_ms if shaped else 0) as net:
            state = work / "cluster"
            try:
                endpoint = net.start_cluster(state, args.workers, venv, compression)
                for tag, out in (("clean", "out_clean"), ("fresh", "out_fresh"), ("edit", "out_fresh")):
                    rows.append(_build(net, subject, work / out, endpoint, {**os.environ, **env}, link,
                                       download, tag, compression))
            finally:
                _proxy(net, {**os.environ, **env}, "stop")
                from goma_ext.cluster import manager

                manager.destroy(state)
                remove(work)
                remove(Path(proxy_dir))
    print(render(["link", "download", "compression", "build", "wall s", "actions", "executed", "hits", "fallbacks", "MB down",
                  "MB up", "CAS MB down", "CAS MB up", "natives MB", "linked MB", "stripped MB", "down / linked",
                  "CAS down / linked"],
                 [[r["link"], r["download"], r["compression"], r["build"], r["wall_s"], r["actions"], r["remote_executions"],
                   r["cache_hits"], r["local_fallbacks"], round(r["wire_down"] / 1e6, 2), round(r["wire_up"] / 1e6, 2),
                   round((r["payload_down"] + r["link_payload_down"]) / 1e6, 2),
                   round((r["payload_up"] + r["link_payload_up"]) / 1e6, 2),
                   round(r["natives_bytes"] / 1e6, 2), round(r["linked_binaries_bytes"] / 1e6, 2),
                   round(r["final_binaries_bytes"] / 1e6, 2), r["down_vs_linked_binaries"],
                   r["payload_down_vs_linked_binaries"]] for r in rows]))
    edits = [r for r in rows if r["build"] == "edit"]
    if edits:
        print("after the edit: the backends' CAS payload down against the natives the edit changed")
        print(render(["link", "download", "compression", "actions", "executed", "natives changed", "changed MB",
                      "outputs already here", "MB already here", "backends' CAS MB down", "down / changed"],
                     [[r["link"], r["download"], r["compression"], r["actions"], r["remote_executions"],
                       r["natives_changed"], _mb(r["natives_changed_bytes"]), r["outputs_already_here"],
                       _mb(r["bytes_already_here"]), _mb(r["payload_down"]),
                       round(r["payload_down"] / r["natives_changed_bytes"], 2) if r["natives_changed_bytes"]
                       else None] for r in edits]))
    data = dict(ctx, command=command, rate_mbit=args.rate_mbit, rtt_ms=args.rtt_ms, downloads=downloads,
                compressions=compressions, rows=rows)
    print(f"results: {results.write(args.results, args.name, data)}")
    return 0
