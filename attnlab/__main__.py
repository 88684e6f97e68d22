"""`python -m attnlab fetch | doctor` (see attnlab.cli)."""
import sys

from .cli import main

sys.exit(main())
