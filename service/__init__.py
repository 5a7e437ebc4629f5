"""FastAPI app, settings, auth, errors and the ``fibertensor`` command line."""
