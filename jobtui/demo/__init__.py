"""The demo: an embedded PostgreSQL, seeded jobs, the bundled worker running the demo handlers,
a trickle of new jobs, and the console. `jobtui demo` and `make demo` start it.
"""

from jobtui.demo.runner import ConsoleRunner, DemoOptions, default_data_dir, run_demo
from jobtui.demo.server import DemoError

__all__ = ["ConsoleRunner", "DemoError", "DemoOptions", "default_data_dir", "run_demo"]
