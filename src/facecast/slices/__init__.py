"""Slice discovery: attribute slices where a model errs most, with false-discovery control
(stage ``slices``; see docs/stages/slices.md)."""
