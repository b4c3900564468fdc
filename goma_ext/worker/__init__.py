"""The Bots API worker: leases in, sandboxed allow-listed compiler runs, ActionResults out.

Modules, by what they do: cli (`goma-ext worker`: the processes), bots (the Bots API session loop), lease (one
lease: fetch, check, place, run, collect, upload), policy (which programs may run), inputtree (an input tree
fetched and measured before anything is written), exec_root (the input root on disk, and the outputs collected
from it), beneath (no-follow file operations inside a tree an action shaped), sandbox (how the action's process
runs: bubblewrap, an unprivileged uid, rlimits), filecache (verified input files shared across leases), forklock,
baseroot (`goma-ext worker base-root`), errors.

May import remote/ and the stages before it."""
