"""`goma-ext proxy`: one long-lived process per user and endpoint that runs `goma-ext run`'s remote actions.

It holds the gRPC channel and the server's Capabilities, remembers which blobs the CAS holds and which files
it has hashed, batches CAS uploads across concurrent actions and runs identical in-flight actions once.
It executes nothing locally: a client whose action fails remotely runs it itself. May import remote/ and below.
"""
