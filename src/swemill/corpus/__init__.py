"""swemill.corpus"""
