"""Shared helpers of the serving lab: pre/post-processing, artifacts, local launcher, measurements."""
