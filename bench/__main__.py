"""`python -m bench` from the repository root: run the worker scaling benchmark."""

import sys

from bench.suite import main

sys.exit(main())
