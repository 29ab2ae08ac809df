"""The harnessrl services: one package per process kind (api, gateway, inference, runner, grader, learner, cli)."""
