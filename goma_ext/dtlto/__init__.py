"""The DTLTO distributor: lld 22 hands it a link's backend jobs as JSON (`goma-ext dtlto`)."""
