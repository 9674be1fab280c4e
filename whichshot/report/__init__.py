"""The HTML report: rendered from figures.parquet (and the shots it cites) only."""
