"""`python -m ferry.cli ...` runs the `ferry` command."""

import sys

from ferry.cli.main import main

sys.exit(main())
