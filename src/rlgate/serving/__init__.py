"""The served chat path: templates, vLLM parsers (the only vLLM gateway), Gym."""
