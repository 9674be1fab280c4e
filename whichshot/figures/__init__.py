"""Figures: every number the report shows, computed from shots by one statistic, labelled by one
provenance rule, with the caveats whose shots it cites (see table.compute_figures)."""
