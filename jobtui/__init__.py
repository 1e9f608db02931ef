"""jobtui: a PostgreSQL job queue with a bundled worker and a terminal console."""

from jobtui.enqueue import InvalidJob, JobSpec, enqueue, enqueue_many

__all__ = ["InvalidJob", "JobSpec", "Registry", "enqueue", "enqueue_many"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # Registry lives with the worker; imported lazily so producers stay light.
    if name == "Registry":
        from jobtui.registry import Registry

        return Registry
    raise AttributeError(name)
