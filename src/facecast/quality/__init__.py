"""Quality measures against recognition errors: error-versus-discard characteristics."""
