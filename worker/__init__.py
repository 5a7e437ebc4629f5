"""Jobs: read inputs, call :mod:`gpu`, write outputs; the Celery app, tasks and job storage."""
