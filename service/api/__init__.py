"""REST routers: health, job submission (one route per job kind) and jobs."""
