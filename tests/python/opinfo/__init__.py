"""PyTorch OpInfo database as an oracle for TensorPlay (see harness.py)."""
