"""The rollout path's CPU cost (render, tokenize, Gym, parsing) and its gate."""
