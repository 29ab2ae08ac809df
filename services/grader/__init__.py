"""The grader service: grades finished rollouts in a clean sandbox and completes GRPO groups.

``grade.py`` (patch → tests → reward row), ``group_completion.py`` (exactly-once ``groups`` stream append),
``tasks.py`` (Celery task ``grade_rollout`` on queue ``grading``), ``worker.py`` (``harnessrl worker grader``).
"""
