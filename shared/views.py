"""SQL of the stable views people query (``trajectories``, ``call_log``); the migration creates them."""

TRAJECTORIES = """
CREATE VIEW trajectories AS
SELECT
    r.id                      AS rollout_id,
    r.run_id,
    r.group_id,
    g.step,
    r.index_in_group,
    r.harness,
    t.dataset,
    t.instance_id,
    r.status,
    r.isolation,
    r.harness_outcome,
    rw.reward,
    rw.resolved,
    coalesce(c.n_calls, 0)            AS n_calls,
    coalesce(c.prompt_tokens, 0)      AS prompt_tokens,
    coalesce(c.completion_tokens, 0)  AS completion_tokens,
    coalesce(ch.n_chains, 0)          AS n_chains,
    coalesce(ch.n_forks, 0)           AS n_forks,
    c.min_policy_version,
    c.max_policy_version,
    extract(epoch FROM (r.finished_at - r.started_at)) AS duration_s,
    r.created_at,
    r.error
FROM rollouts r
JOIN tasks t ON t.id = r.task_id
LEFT JOIN groups g ON g.id = r.group_id
LEFT JOIN rewards rw ON rw.rollout_id = r.id
LEFT JOIN (
    SELECT rollout_id, count(*) AS n_calls, sum(prompt_tokens) AS prompt_tokens,
           sum(completion_tokens) AS completion_tokens,
           min(policy_version) AS min_policy_version, max(policy_version) AS max_policy_version
    FROM calls GROUP BY rollout_id
) c ON c.rollout_id = r.id
LEFT JOIN (
    SELECT rollout_id, count(*) AS n_chains, count(fork_reason) AS n_forks
    FROM chains GROUP BY rollout_id
) ch ON ch.rollout_id = r.id
"""

CALL_LOG = """
CREATE VIEW call_log AS
SELECT
    c.id AS call_id,
    c.created_at,
    r.run_id,
    c.rollout_id,
    r.harness,
    c.provider_api,
    c.model_alias,
    c.chain_id,
    c.position,
    c.fork_reason,
    c.stream,
    c.prompt_tokens,
    c.suffix_tokens,
    c.completion_tokens,
    c.finish_reason,
    c.tool_call_count,
    c.parse_error,
    c.policy_version,
    c.queue_ms,
    c.inference_ms,
    c.ttfb_ms,
    c.total_ms,
    c.retemplate_drift
FROM calls c
JOIN rollouts r ON r.id = c.rollout_id
"""

VIEWS = {"trajectories": TRAJECTORIES, "call_log": CALL_LOG}
