"""A job's report as people read it, for `ferry copy` and Finalize alike: `report_stats`, the
charts' fixed-size counters, and `report_html`, the self-contained page drawn from them.
"""
