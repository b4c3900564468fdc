"""[scale] A network to measure remote builds against: the client in a network namespace of its own, the cluster in
another, joined by one veth pair whose two ends `tc` shapes to RATE (tbf), and a relay on the server's side that
adds RTT/2 in each direction (bench/delay_relay.py: this kernel has no netem). Both numbers are parameters.

    with ShapedNet(rate_mbit=100, rtt_ms=20) as net:
        endpoint = net.start_cluster(state, workers=4)  # the cluster in the server's namespace, the relay in front
        subprocess.run([*net.exec_client(), "ninja", …])  # a client in the client's namespace
        net.counters()                                    # bytes the client's end received and sent

Addresses exist only inside the two namespaces made here (10.232.N.1 server, 10.232.N.2 client, N from the pid);
nothing is added to the machine's own network namespace. Everything (processes in the namespaces, the namespaces
with their veths) is removed on exit, also after a failure. Needs root.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.fsio import REPO

RELAY = REPO / "bench" / "delay_relay.py"


def _run(argv: Sequence[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)[:200]}: exit {proc.returncode}: {(proc.stdout + proc.stderr)[-500:]}")
    return proc


@dataclass
class ShapedNet:
    rate_mbit: float = 100.0
    rtt_ms: float = 20.0
    tag: str = field(default_factory=lambda: str(os.getpid() % 100000))
    relays: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def subnet(self) -> str:
        return f"10.232.{int(self.tag) % 250 + 1}"

    @property
    def server_ip(self) -> str:
        return f"{self.subnet}.1"

    def ns(self, who: str) -> str:
        return f"gxn-{self.tag}-{who}"

    def exec_in(self, who: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns(who)]

    def exec_client(self) -> list[str]:
        return self.exec_in("cli")

    def __enter__(self) -> ShapedNet:
        try:
            for who in ("srv", "cli"):
                _run(["ip", "netns", "add", self.ns(who)])
                _run(["ip", "-n", self.ns(who), "link", "set", "lo", "up"])
            _run(["ip", "link", "add", "name", self._dev("srv"), "netns", self.ns("srv"), "type", "veth", "peer",
                  "name", self._dev("cli"), "netns", self.ns("cli")])
            burst = max(16_000, int(self.rate_mbit * 1e6 / 8 / 100))  # 10 ms of the rate, at least a few packets
            for who, host in (("srv", 1), ("cli", 2)):
                ns, dev = self.ns(who), self._dev(who)
                _run(["ip", "-n", ns, "addr", "add", f"{self.subnet}.{host}/24", "dev", dev])
                _run(["ip", "-n", ns, "link", "set", dev, "up"])
                if self.rate_mbit > 0:  # 0: the veth as it is (the unshaped comparison)
                    _run([*self.exec_in(who), "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                          f"{self.rate_mbit:g}mbit", "burst", str(burst), "latency", "400ms"])
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _dev(self, who: str) -> str:
        return f"gxn{self.tag}{who[0]}"

    def relay(self, port: int) -> int:
        """A delaying relay on the server's link address in front of PORT on the server's loopback; its port."""
        relay_port = port + 1 if port < 65535 else port - 1
        proc = subprocess.Popen([*self.exec_in("srv"), sys.executable, "-S", str(RELAY),
                                 f"{self.server_ip}:{relay_port}", f"127.0.0.1:{port}", f"{self.rtt_ms / 2:g}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.relays.append(proc)
        line = proc.stdout.readline() if proc.stdout else b""
        if not line.startswith(b"relay "):
            raise RuntimeError(f"delay relay did not start: {line!r}")
        return relay_port

    def start_cluster(self, state: Path, workers: int, venv: Path, compression: str = "off",
                      poll_s: float | None = None) -> str:
        """`goma-ext cluster start --auth none` in the server's namespace (everything on its loopback) and a relay
        in front of it; the endpoint a client in the client's namespace uses. No tokens: a plaintext link between
        namespaces of one machine, measured, not a deployment. COMPRESSION: the server's (`--compression`); POLL_S:
        its scheduler's `--poll-interval` (default: the cluster's, which the benchmarks measure with)."""
        poll = ["--poll-interval", f"{poll_s:g}"] if poll_s is not None else []
        _run([*self.exec_in("srv"), sys.executable, "-m", "goma_ext.cli", "cluster", "start", "--state", str(state),
              "--workers", str(workers), "--auth", "none", "--server-venv", str(venv), "--compression", compression,
              *poll], cwd=REPO, timeout=600)
        from goma_ext.cluster import manager

        st = manager.load(state)
        if st is None or not st.endpoint.startswith("grpc://127.0.0.1:"):
            raise RuntimeError(f"cluster in {state} has no loopback endpoint: {st}")
        return f"grpc://{self.server_ip}:{self.relay(int(st.endpoint.rsplit(':', 1)[1]))}"

    def counters(self) -> dict[str, int]:
        """Bytes the client's end of the link received (down) and sent (up) so far."""
        stat = Path("/sys/class/net") / self._dev("cli") / "statistics"
        out = _run([*self.exec_client(), "cat", str(stat / "rx_bytes"), str(stat / "tx_bytes")]).stdout.split()
        return {"down": int(out[0]), "up": int(out[1])}

    def close(self) -> None:
        for proc in self.relays:
            proc.kill()
            proc.wait()
            if proc.stdout:
                proc.stdout.close()
        self.relays.clear()
        for who in ("cli", "srv"):
            name = self.ns(who)
            for _ in range(50):  # again until none is left: a process may fork while the last ones are killed
                pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                time.sleep(0.1)
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
