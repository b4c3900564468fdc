"""Remote Execution API (REAPI v2) client: config, channel, CAS, Merkle trees, execution and stats,
and the compiler wrapper `goma-ext run`. May import inputs/ and bitcode/ (grpc and REAPI stubs from here up)."""
