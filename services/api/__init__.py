"""The REST API service: runs, tasks, enqueueing, status, trajectories, plots, OpenAPI, metrics (DESIGN §7)."""
