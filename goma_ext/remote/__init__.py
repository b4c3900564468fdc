"""Remote Execution API (REAPI v2) client: config, channel, CAS, Merkle trees, execution and stats."""
