"""The account's own quotas, read where AWS lets them be read (Lambda's concurrency), and what
Ferry derives from them: the pipeline's concurrency cap and `ferry estimate`'s table of limits."""
