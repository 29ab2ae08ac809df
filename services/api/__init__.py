"""The REST API service: runs, tasks, enqueueing, status, trajectories, plots, OpenAPI, metrics (docs/design.md#interfaces-for-people)."""
