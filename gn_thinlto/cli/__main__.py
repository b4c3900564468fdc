"""`python -m gn_thinlto.cli`."""

import sys

from gn_thinlto.cli.main import main

sys.exit(main())
