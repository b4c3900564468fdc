"""The Bots API worker: leases in, sandboxed allow-listed compiler runs, ActionResults out."""
