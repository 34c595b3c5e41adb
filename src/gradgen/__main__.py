"""``python -m gradgen`` is the ``gradgen`` command."""

import sys

from .cli import main

sys.exit(main())
