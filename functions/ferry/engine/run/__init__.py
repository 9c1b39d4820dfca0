"""What one run shares across its copies: the transfer context, the byte budget and buffers, the
bandwidth limit, deadlines, degradations learned once, the encryption probe, and outcomes."""
