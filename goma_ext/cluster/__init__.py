"""A local REAPI cluster on 127.0.0.1: PostgreSQL + BuildGrid + goma-ext workers, state in one directory.

May import worker/, remote/ and the stages before them."""
