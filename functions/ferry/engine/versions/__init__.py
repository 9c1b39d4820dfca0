"""Version histories: a key's every version copied oldest first, delete markers reproduced,
matched to the destination's history by content rather than by version id."""
