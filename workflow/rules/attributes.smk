# Stage rules: attributes (see README.md). Register default outputs with DEFAULT_TARGETS.append(fn(ds) -> list).
