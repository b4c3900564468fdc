"""The remote-execution client side, on top of the REAPI basics (reapi/): its config and settings, the executor
(client), a backend command's action inputs, the compiler's identity and toolchain, the compiler wrapper `goma-ext run`
and its thin client, the proxy's wire protocol and client, the stats log and `goma-ext report`.
May import reapi/, inputs/ and bitcode/."""
