"""`python -m jobtui` runs the command line (the demo starts its worker this way)."""

import sys

from jobtui.cli import main

sys.exit(main())
