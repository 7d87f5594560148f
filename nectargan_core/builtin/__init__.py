"""The core's own parts, registered through the same entry point group as any plugin."""
