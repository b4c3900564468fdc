"""The Remote Execution API (REAPI v2) basics: digests, the generated protobuf stubs (proto), gRPC channels, the
server's capabilities, retries, typed errors, Merkle input trees, the CAS, Action messages and Execute/WaitExecution.

Protocol, transport and data model only: nothing here knows the compiler wrapper, the thin client, the proxy, the
stats log, toolchains or the settings file (those are remote/). Imports only goma_ext.errors, grpc, the REAPI stubs
and the standard library (grpc and the stubs from here up)."""
