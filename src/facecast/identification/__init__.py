"""1:N identification: gallery/probe protocol, blocked search, CMC and FNIR at FPIR."""
