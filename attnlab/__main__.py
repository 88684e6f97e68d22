"""`python -m attnlab fetch | doctor` (see attnlab.plumbing.cli)."""
import sys

from .plumbing.cli import main

sys.exit(main())
