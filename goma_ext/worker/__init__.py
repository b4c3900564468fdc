"""The Bots API worker: leases in, sandboxed allow-listed compiler runs, ActionResults out.

Modules, by what they do: cli (`goma-ext worker`: the processes), bots (the Bots API session loop), lease (one
lease: fetch, check, place, run, collect, upload), policy (which programs may run), inputtree (an input tree
fetched and measured before anything is written), exec_root (the input root on disk, and the outputs collected
from it), beneath (no-follow file operations inside a tree an action shaped), sandbox (how the action's process
runs: bubblewrap, an unprivileged uid, rlimits), filecache (verified input files shared across leases), forklock,
baseroot (`goma-ext worker base-root`), errors.

May import remote/ and the stages before it."""

import os as _os
import sys as _sys

# gRPC's fork handlers off for the worker's process, before it loads gRPC. The worker starts each sandbox as root
# with a uid change (Popen user=: fork, not vfork), while its other threads are in gRPC calls (the Bots session,
# leases' CAS transfers). gRPC's core then runs its fork handlers in the child; with other threads inside gRPC,
# that child can die before it reaches exec (SIGABRT or SIGBUS, after "Epoll1Poller … epoll_wait error: Bad file
# descriptor"): 3 of 600 children in a probe with four threads in gRPC calls, 0 of 600 with the handlers off. The
# child only execs, so it needs none of them. The setting is read once, when gRPC loads, and is not passed on to the
# worker's own children; one the user set is kept.
if "grpc" not in _sys.modules and "GRPC_ENABLE_FORK_SUPPORT" not in _os.environ:
    _os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "0"
    try:
        import grpc  # noqa: F401
    finally:
        del _os.environ["GRPC_ENABLE_FORK_SUPPORT"]
