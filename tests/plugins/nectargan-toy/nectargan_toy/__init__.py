"""A small but real plugin used by nectargan-core's tests."""
