"""``python -m providers.mock_upstream [--host H] [--port N] [--models a,b]``."""

import sys

from providers.mock_upstream.server import main

if __name__ == "__main__":
    sys.exit(main())
