"""NeMo RL configs: loading, the rlgate: block spec, run facts, the key schema."""
