"""Records, the tool algebra, errors and configuration: the nouns every stage speaks."""
