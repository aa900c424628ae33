"""`python -m dsv4_model`: the model's command line (see cli.py)."""
import sys

from .cli import main

sys.exit(main())
