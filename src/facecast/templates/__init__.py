"""Template-based evaluation (IJB-B / IJB-C): image features pooled into templates, 1:1
verification of template pairs and 1:N identification (stage ``templates``)."""
