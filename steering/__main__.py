"""`python -m steering`: the command line (steering/cli/)."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
