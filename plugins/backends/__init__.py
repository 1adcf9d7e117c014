"""Built-in model backends, one module per scheme family (llamacpp, hf, litellm, fleet, vllm)."""
