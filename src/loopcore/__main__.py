"""``python -m loopcore``: the same as the ``loopcore`` console script."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
