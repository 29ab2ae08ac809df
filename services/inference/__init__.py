"""The inference service: vLLM serving the policy (token ids in, sampled ids and logprobs out), hot weight
updates with exact policy versions, and the locally built tiny model."""
