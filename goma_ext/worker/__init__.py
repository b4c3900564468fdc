"""The Bots API worker: leases in, sandboxed allow-listed compiler runs, ActionResults out.

May import remote/ and the stages before it."""
