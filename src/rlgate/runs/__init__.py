"""Run inputs read into typed records: TensorBoard, metrics.json, MLPerf, rollouts."""
