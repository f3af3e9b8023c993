"""microRTS (placeholder while building)."""
